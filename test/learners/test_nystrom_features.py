"""NystromFeatureMap: kernel identity, state round trip, export → RecursiveRLS = NystromKRR."""

import numpy as np
import pytest

from lifelong_learning.learners.feature_map import FeatureMap, feature_map_from_state
from lifelong_learning.learners.nystrom_features import NystromFeatureMap


def test_inner_products_are_the_nystrom_kernel():
    rng = np.random.default_rng(0)
    Z, X = rng.normal(size=(12, 3)), rng.normal(size=(20, 3))
    ls = np.array([0.5, 1.0, 2.0])
    fmap = NystromFeatureMap(Z, ls)
    assert isinstance(fmap, FeatureMap)
    Phi = fmap.transform(X)
    k = lambda A, B: np.exp(-0.5 * (((A[:, None] - B[None]) / ls) ** 2).sum(-1))  # noqa: E731
    np.testing.assert_allclose(Phi @ Phi.T, k(X, Z) @ np.linalg.solve(k(Z, Z), k(Z, X)), atol=1e-6)


def test_state_round_trip_and_validation():
    rng = np.random.default_rng(1)
    fmap = NystromFeatureMap(rng.normal(size=(5, 2)), 1.3)
    meta, arrays = fmap.to_state()
    back = feature_map_from_state(fmap.kind, meta, arrays)
    X = rng.normal(size=(4, 2))
    np.testing.assert_array_equal(back.transform(X), fmap.transform(X))
    with pytest.raises(ValueError):
        fmap.transform(np.full((1, 2), np.nan))
    with pytest.raises(ValueError):
        fmap.transform(np.zeros((1, 3)))
    with pytest.raises(ValueError):
        NystromFeatureMap(np.zeros((3, 2)), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        NystromFeatureMap.from_state(meta, {"centers": arrays["centers"]})


def test_export_to_recursive_rls_reproduces_nystrom_krr():
    from lifelong_learning.nystrom import NystromKRR
    from lifelong_learning.nystrom.export import to_recursive_rls

    rng = np.random.default_rng(2)
    X = rng.normal(size=(250, 3))
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1] * X[:, 2])])
    model = NystromKRR(centers=30, lengthscale=[1.0, 0.8, 1.5], lam=1e-4, device="cpu").fit(X, Y)
    fmap, rls = to_recursive_rls(model, X, Y, batch=64)
    Xt = rng.normal(size=(40, 3))
    np.testing.assert_allclose(rls.predict(fmap.transform(Xt)), model.predict(Xt), atol=1e-8)
    np.testing.assert_allclose(rls.weights, model.whitened_weights, atol=1e-8)
