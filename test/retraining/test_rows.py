"""The temporary row files of the retraining jobs."""

import numpy as np
import pytest

from lifelong_learning.retraining.rows import FeatureStore


def test_a_feature_store_gives_back_any_rows_a_block_of_the_file_at_a_time():
    X = np.arange(50 * 3, dtype=np.float64).reshape(50, 3)
    labels = [f"c{i % 4}" for i in range(50)]
    with FeatureStore(block=8) as store:
        store.append(X[:20], labels[:20])
        store.append(X[20:], labels[20:])
        assert (store.n, store.d, store.vocabulary) == (50, 3, ["c0", "c1", "c2", "c3"])
        np.testing.assert_array_equal(store.read(0, 50), X)
        index = np.array([0, 1, 9, 17, 18, 40, 49])  # sparse, across blocks of the file
        parts = list(store.blocks(index))
        assert all(len(p) <= 8 for p in parts) and sum(map(len, parts)) == index.size
        np.testing.assert_array_equal(np.vstack(parts), X[index])
        np.testing.assert_array_equal(store.take(index), X[index])
        assert store.labels(index).tolist() == [labels[i] for i in index]
        assert store.take(np.array([], dtype=np.int64)).shape == (0, 3)
        with pytest.raises(ValueError, match="width 3"):
            store.append(np.zeros((2, 4)), ["a", "b"])
        with pytest.raises(ValueError, match="2 labels"):
            store.append(np.zeros((3, 3)), ["a", "b"])
        assert store.n == 50  # a refused append adds nothing
