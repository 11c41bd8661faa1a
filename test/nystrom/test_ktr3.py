"""KTR³ (Jun, Cutkosky, Orabona, Algorithm 1): every prefix model from one factor or one engine pass
equals the batch ridge fit of that prefix; the output is the chosen prefix's fit truncated to the
targets' range, with the exact kernel and on the package's feature maps; λ = 0 is the minimum-norm
fit; bad input is refused or meets its documented limit."""

import numpy as np
import pytest
import torch

from lifelong_learning.learners.nystrom_features import NystromFeatureMap
from lifelong_learning.learners.random_features import RandomFourierFeatures
from lifelong_learning.learners.slkl_features import SLKLFeatureMap
from lifelong_learning.nystrom import KTR3
from lifelong_learning.nystrom.ktr3 import kernel_ridge_prefixes

pytestmark = pytest.mark.usefixtures("one_thread")


def _gauss(A, B, ls):
    return np.exp(-0.5 * (((A[:, None] - B[None]) / ls) ** 2).sum(-1))


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, 2))
    Y = np.column_stack([np.sin(6 * X[:, 0]), X[:, 1] ** 2]) + 0.1 * rng.normal(size=(n, 2))
    return X, Y


def test_every_prefix_from_one_factor_is_the_batch_fit():
    X, Y = _data(n=40)
    K, nlam = _gauss(X, X, 0.3), 40 * 1e-3
    out = kernel_ridge_prefixes(torch.as_tensor(K), torch.as_tensor(Y), nlam, [0, 1, 9, 40])
    assert out[0].shape == (0, 2)
    for t in (1, 9, 40):
        expected = np.linalg.solve(K[:t, :t] + nlam * np.eye(t), Y[:t])
        np.testing.assert_allclose(out[t].numpy(), expected, rtol=1e-9, atol=1e-12)
    at_zero = kernel_ridge_prefixes(torch.as_tensor(K), torch.as_tensor(Y), 0.0, [6])[6].numpy()
    np.testing.assert_allclose(at_zero, np.linalg.pinv(K[:6, :6]) @ Y[:6], rtol=1e-6, atol=1e-9)


def test_the_output_is_the_chosen_prefix_fit_truncated_to_the_targets_range():
    X, Y = _data()
    model = KTR3(lam=1e-3, lengthscale=0.3, seed=4, device="cpu").fit(X, Y)
    k, perm = model.k_, model.permutation_
    assert 0 < k < 80 and sorted(perm) == list(range(80))
    Xk, Yk = X[perm[:k]], Y[perm[:k]]
    alpha = np.linalg.solve(_gauss(Xk, Xk, 0.3) + 80 * 1e-3 * np.eye(k), Yk)
    Xq = np.random.default_rng(9).uniform(-0.5, 1.5, size=(50, 2))  # partly outside: f_k may overshoot
    f = _gauss(Xq, Xk, 0.3) @ alpha
    np.testing.assert_allclose(model.predict_untruncated(Xq), f, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.predict(Xq), np.clip(f, Y.min(0), Y.max(0)), rtol=1e-9, atol=1e-12)
    assert np.array_equal(model.bounds_, np.stack([Y.min(0), Y.max(0)]))


@pytest.mark.parametrize("kind", ["random", "nystrom", "slkl"])
def test_on_a_feature_map_the_prefix_model_is_the_batch_ridge_of_its_features(kind):
    X, Y = _data()
    fmap = {
        "random": RandomFourierFeatures(2, 40, bandwidth=0.3, seed=1),
        "nystrom": NystromFeatureMap(X[:15], 0.3),
        "slkl": SLKLFeatureMap(X[:10], 0.3, np.linspace(0.5, 2.0, 10)),
    }[kind]
    model = KTR3(lam=1e-3, feature_map=fmap, seed=2).fit(X, Y)
    k = model.k_
    Phi = fmap.transform(X[model.permutation_[:k]])
    W = np.linalg.solve(Phi.T @ Phi + 80 * 1e-3 * np.eye(fmap.n_features), Phi.T @ Y[model.permutation_[:k]])
    np.testing.assert_allclose(model.coef_, W, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(
        model.predict_untruncated(X[:5]), fmap.transform(X[:5]) @ W, rtol=1e-8, atol=1e-10
    )
    assert model.feature_map() is fmap


def test_lambda_zero_is_the_minimum_norm_fit():
    X, Y = _data(n=30)
    model = KTR3(lam=0.0, lengthscale=0.05, seed=3, device="cpu").fit(X, Y)  # narrow: K_k invertible
    Xk, Yk = model.prefix_rows_, model.prefix_targets_
    assert model.k_ > 3
    np.testing.assert_allclose(model.predict_untruncated(Xk), Yk, atol=1e-6)  # it interpolates
    np.testing.assert_allclose(model.coef_, np.linalg.pinv(_gauss(Xk, Xk, 0.05)) @ Yk, rtol=1e-6, atol=1e-8)
    features = KTR3(lam=0.0, feature_map=RandomFourierFeatures(2, 200, 0.3, seed=0), seed=3).fit(X, Y)
    Phi = features.feature_map().transform(Xk)
    np.testing.assert_allclose(features.coef_, np.linalg.pinv(Phi) @ Yk, rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="λ = 0"):
        model.engine_lam()


def test_bad_input_and_the_documented_limits():
    X, Y = _data(n=20)
    with pytest.raises(ValueError, match="lam"):
        KTR3(lam=-1.0)
    model = KTR3(lam=1e-3, lengthscale=0.3, device="cpu")
    for args in ((X[:1], Y[:1]), (X, Y[:-1])):
        with pytest.raises(ValueError):
            model.fit(*args)
    with pytest.raises(ValueError, match="length-scale is too small"):
        KTR3(lam=1e-3, lengthscale=1e-9, device="cpu").fit(X, Y)
    with pytest.raises(ValueError, match="columns"):
        KTR3(feature_map=RandomFourierFeatures(3, 10, seed=0)).fit(X, Y)
    assert not model.is_fitted
    constant = KTR3(lam=1e-3, lengthscale=0.3, device="cpu").fit(X, np.full(20, 2.5))
    assert np.array_equal(constant.predict(X), np.full((20, 1), 2.5))  # the range is one value
    empty = next(
        m for m in (KTR3(1e-3, 0.3, seed=s, device="cpu").fit(X[:2], Y[:2]) for s in range(50)) if m.k_ == 0
    )
    np.testing.assert_array_equal(empty.predict(X), np.clip(np.zeros((20, 2)), Y[:2].min(0), Y[:2].max(0)))
    with pytest.raises(ValueError, match="k = 0"):
        empty.feature_map()


def test_a_model_on_a_feature_map_round_trips_through_its_model_file(tmp_path):
    X, Y = _data()
    model = KTR3(lam=1e-3, feature_map=RandomFourierFeatures(2, 30, 0.3, seed=5), seed=1).fit(X, Y)
    model.save(tmp_path / "ktr3.llm")
    loaded = KTR3.load(tmp_path / "ktr3.llm")
    assert loaded.k_ == model.k_ and isinstance(loaded.feature_map(), RandomFourierFeatures)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
