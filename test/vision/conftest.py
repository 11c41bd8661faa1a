"""Shared by the vision tests: one user cache with the fp32 export and its int8 version, built once."""

from types import SimpleNamespace

import pytest

from lifelong_learning.vision import FeatureExtractor


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory):
    """``dir``: an XDG cache home holding the exported and the quantized default model (built here,
    once per session: export + calibration take seconds); ``fp32`` and ``int8``: extractors on them."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        fp32 = FeatureExtractor(precision="fp32", num_threads=1)
        int8 = FeatureExtractor(precision="int8", num_threads=1)
    return SimpleNamespace(dir=cache, fp32=fp32, int8=int8)
