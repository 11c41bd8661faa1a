"""int8 features: agreement with fp32, the cache of quantized files, corrupt files, the precision setting.

Tolerance (stated in docs/benchmarks/vision.md and docs/robot.md): on rendered objects the int8
features of EfficientNet-Lite0 have a median cosine similarity ≥ 0.92 to the fp32 ones (0.95
measured) and ≥ 0.75 for every view (0.85 measured); a nearest-class-mean classifier gives the
same answers on both, and the fp32 ImageNet classifier reads the same classes from both.
"""

import pickle

import cv2
import numpy as np
import pytest
import torch
from skimage import data

from lifelong_learning.sim.objects import render_object_views
from lifelong_learning.vision import FeatureExtractor, Preprocessing, load_efficientnet_lite0
from lifelong_learning.vision.preprocessing import preprocess, preprocess_array
from lifelong_learning.vision.quantization import (
    cached_int8_path,
    calibration_images,
    dead_leaves,
    quantize_onnx,
)


def cosine(a, b):
    return np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def objects():
    """8 rendered objects, 6 views each: (images, labels)."""
    return render_object_views(8, 6, size=(160, 160), seed=11)


def test_auto_is_int8_for_the_default_model_on_onnxruntime(onnx_cache, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(onnx_cache.dir))
    extractor = FeatureExtractor(num_threads=1)
    assert extractor.precision == "int8" and extractor.onnx_path == onnx_cache.int8.onnx_path
    assert FeatureExtractor(backend="torch").precision == "fp32"


def test_int8_features_agree_with_fp32(onnx_cache, objects):
    images, labels = objects
    fp32, int8 = onnx_cache.fp32.extract_batch(images), onnx_cache.int8.extract_batch(images)
    assert int8.shape == fp32.shape == (48, 1280) and int8.dtype == np.float32
    similarity = cosine(int8, fp32)
    assert np.median(similarity) >= 0.92 and similarity.min() >= 0.75
    # nearest class mean (means of fp32 training views): the same answer for every held-out view
    train = np.arange(len(labels)) % 6 < 3
    means = np.stack([fp32[train & (labels == c)].mean(axis=0) for c in range(8)])

    def nearest(features):
        return np.argmin(((features[~train, None, :] - means[None]) ** 2).sum(axis=2), axis=1)

    np.testing.assert_array_equal(nearest(int8), nearest(fp32))
    assert np.mean(nearest(fp32) == labels[~train]) >= 0.75


def test_int8_features_keep_the_imagenet_classes(onnx_cache):
    """The ImageNet classifier of the fp32 network on int8 features: the same top-1 classes."""
    network = load_efficientnet_lite0(with_classifier=True)
    weight, bias = network._fc.weight.detach().numpy(), network._fc.bias.detach().numpy()
    photos = [data.coffee(), data.chelsea(), data.rocket(), data.astronaut()]
    with torch.inference_mode():
        expected = network(preprocess(photos, Preprocessing())).argmax(dim=1).numpy()
    for extractor in (onnx_cache.fp32, onnx_cache.int8):
        logits = extractor.extract_batch(photos) @ weight.T + bias
        np.testing.assert_array_equal(logits.argmax(axis=1), expected, err_msg=extractor.precision)
    assert expected[0] == 967  # coffee → espresso


def test_int8_file_is_cached_beside_the_export_and_reused(onnx_cache, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(onnx_cache.dir))
    path = onnx_cache.int8.onnx_path
    assert path.parent == onnx_cache.fp32.onnx_path.parent
    assert path.name.startswith(onnx_cache.fp32.onnx_path.stem + "-int8-")
    stamp = path.stat().st_mtime_ns
    again = FeatureExtractor(precision="int8", num_threads=1)
    assert again.onnx_path == path and path.stat().st_mtime_ns == stamp
    assert not list(path.parent.glob("*.tmp"))
    # the name is a hash of what the file is made from: another preprocessing, another file
    other = cached_int8_path(onnx_cache.fp32.onnx_path, Preprocessing(crop_fraction=1.0), path.parent)
    assert other != path and other.parent == path.parent


def test_corrupt_cached_files_are_rebuilt_without_running_them(onnx_cache, tmp_path, monkeypatch):
    """A cached file that is not an ONNX model (here a pickle that would run a command) is made again."""
    cache = tmp_path / "cache" / "lifelong_learning"
    cache.mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache.parent))
    fp32_path = cache / onnx_cache.fp32.onnx_path.name
    fp32_path.write_bytes(onnx_cache.fp32.onnx_path.read_bytes())
    int8_path = cache / onnx_cache.int8.onnx_path.name
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').close()",))

    int8_path.write_bytes(pickle.dumps(Payload()))
    with pytest.warns(RuntimeWarning, match="quantizing again"):
        rebuilt = FeatureExtractor(precision="int8", num_threads=1)
    assert rebuilt.onnx_path == int8_path and not marker.exists()
    coffee = data.coffee()
    np.testing.assert_allclose(rebuilt(coffee), onnx_cache.int8(coffee), rtol=1e-5, atol=1e-5)
    # the fp32 export, truncated: exported again
    fp32_path.write_bytes(fp32_path.read_bytes()[:1000])
    with pytest.warns(RuntimeWarning, match="exporting it again"):
        exported = FeatureExtractor(precision="fp32", num_threads=1)
    np.testing.assert_allclose(exported(coffee), onnx_cache.fp32(coffee), rtol=1e-4, atol=1e-4)
    assert not marker.exists() and not list(cache.glob("*.tmp"))


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2)

    def forward(self, images):
        return torch.clamp(self.conv(images), 0.0, 6.0)


def test_a_model_of_your_own_is_quantized_on_request(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    preprocessing = Preprocessing(input_size=(32, 32))
    model = tmp_path / "tiny.onnx"
    torch.onnx.export(TinyNet().eval(), (torch.zeros(1, 3, 32, 32),), str(model), dynamo=False,
                      input_names=["x"], dynamic_axes={"x": {0: "n"}})  # fmt: skip
    fp32 = FeatureExtractor(model_path=model, preprocessing=preprocessing)
    int8 = FeatureExtractor(model_path=model, preprocessing=preprocessing, precision="int8")
    assert fp32.precision == "fp32" and int8.precision == "int8"
    assert (tmp_path / "cache" / "lifelong_learning") in int8.onnx_path.parents
    pictures = [data.astronaut(), data.coffee(), data.chelsea()]
    assert cosine(int8.extract_batch(pictures), fp32.extract_batch(pictures)).min() > 0.99
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="cannot quantize"):
        FeatureExtractor(model_path=garbage, precision="int8")


def test_precision_is_validated():
    with pytest.raises(ValueError, match="precision must be one of"):
        FeatureExtractor(precision="int16")
    with pytest.raises(ValueError, match="needs backend 'onnxruntime'"):
        FeatureExtractor(backend="torch", precision="int8")
    with pytest.raises(ValueError, match="on device 'cpu'"):
        FeatureExtractor(device="cuda", precision="int8")
    with pytest.raises(ValueError, match="quant_format"):
        quantize_onnx("unused.onnx", "unused-int8.onnx", Preprocessing(), quant_format="qint4")


def test_calibration_pictures_are_deterministic_dead_leaves():
    first, second = calibration_images(3), calibration_images(3)
    assert len(first) == 3 and first[0].shape == (256, 256, 3) and first[0].dtype == np.uint8
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1])
    picture = dead_leaves(np.random.default_rng(0), size=64)
    assert picture.shape == (64, 64, 3) and picture.std() > 20  # not a flat picture
    with pytest.raises(ValueError):
        calibration_images(0)


def test_preprocessing_with_opencv():
    """Centre crop → INTER_AREA (shrinking) or INTER_LINEAR (enlarging) → (x - mean) / std, RGB."""
    picture = data.coffee()  # 400 x 600: the centre 350 x 350 square, shrunk
    batch = preprocess_array([picture], Preprocessing())
    assert batch.shape == (1, 3, 224, 224) and batch.dtype == np.float32
    square = picture[25:375, 125:475]
    expected = (cv2.resize(square, (224, 224), interpolation=cv2.INTER_AREA).astype(np.float32) - 127) / 128
    np.testing.assert_allclose(batch[0], expected.transpose(2, 0, 1), atol=1e-6)
    np.testing.assert_array_equal(
        preprocess_array([np.ascontiguousarray(picture[:, :, ::-1])], Preprocessing(), bgr=True), batch
    )
    small = preprocess_array([picture[:20, :30]], Preprocessing())  # enlarged
    assert small.shape == (1, 3, 224, 224) and np.all(np.abs(small) <= 1.0)
    np.testing.assert_array_equal(preprocess([picture], Preprocessing()).numpy(), batch)
