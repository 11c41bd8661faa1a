"""The frozen CNN feature extractor: real weights, real pictures, both backends."""

import numpy as np
import pytest
import torch
from skimage import data

from lifelong_learning.vision import FeatureExtractor, Preprocessing, load_efficientnet_lite0, to_rgb8
from lifelong_learning.vision.image_conversion import numpy_to_image
from lifelong_learning.vision.preprocessing import preprocess

ESPRESSO = 967  # ImageNet class index


@pytest.fixture(scope="module")
def torch_extractor():
    return FeatureExtractor(backend="torch", num_threads=1)


def test_coffee_is_espresso_with_the_documented_preprocessing():
    network = load_efficientnet_lite0(with_classifier=True)
    with torch.inference_mode():
        probabilities = torch.softmax(network(preprocess([data.coffee()], Preprocessing())), dim=1)[0]
        imagenet_norm = Preprocessing(mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375))
        other = torch.softmax(network(preprocess([data.coffee()], imagenet_norm)), dim=1)[0]
    assert int(probabilities.argmax()) == ESPRESSO
    assert probabilities[ESPRESSO] > 0.9
    assert probabilities[ESPRESSO] > other[ESPRESSO]  # (x-127)/128 beats torchvision's mean/std


def test_features_shape_dtype_and_batch(torch_extractor):
    coffee, cat = data.coffee(), data.chelsea()
    single = torch_extractor(coffee)
    assert single.shape == (1280,) and single.dtype == np.float32 and np.all(np.isfinite(single))
    batch = torch_extractor.extract_batch([coffee, cat])  # different sizes in one batch
    assert batch.shape == (2, 1280)
    np.testing.assert_allclose(batch[0], single, rtol=1e-4, atol=1e-4)
    assert np.linalg.norm(batch[0] - batch[1]) > 0.1 * np.linalg.norm(batch[0])
    assert torch_extractor.extract_batch([]).shape == (0, 1280)


def test_same_features_from_every_colour_encoding(torch_extractor):
    rgb = np.ascontiguousarray(data.coffee()[::2, ::2])
    alpha = np.full((*rgb.shape[:2], 1), 255, dtype=np.uint8)
    messages = [
        numpy_to_image(rgb, "rgb8"),
        numpy_to_image(np.ascontiguousarray(rgb[:, :, ::-1]), "bgr8", row_padding=4),
        numpy_to_image(np.concatenate([rgb, alpha], axis=2), "rgba8"),
        numpy_to_image(np.concatenate([rgb[:, :, ::-1], alpha], axis=2), "bgra8", row_padding=8),
    ]
    features = torch_extractor.extract_batch([to_rgb8(message) for message in messages])
    for row in features[1:]:
        np.testing.assert_array_equal(row, features[0])
    # mono8 is replicated to three grey channels: a valid input with different features
    grey = numpy_to_image(rgb.mean(axis=2).astype(np.uint8), "mono8")
    assert torch_extractor(to_rgb8(grey)).shape == (1280,)


def test_bgr_parameter(torch_extractor):
    coffee = data.coffee()
    bgr_extractor = FeatureExtractor(backend="torch", bgr=True)
    np.testing.assert_allclose(bgr_extractor(coffee[:, :, ::-1]), torch_extractor(coffee), atol=1e-5)


def test_onnxruntime_export_is_cached_and_agrees_with_torch(torch_extractor, onnx_cache, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(onnx_cache.dir))
    first = onnx_cache.fp32
    assert first.precision == "fp32" and first.onnx_path.is_file()
    assert onnx_cache.dir in first.onnx_path.parents
    stamp = first.onnx_path.stat().st_mtime_ns
    second = FeatureExtractor(backend="onnxruntime", num_threads=1, precision="fp32")
    assert second.onnx_path == first.onnx_path and second.onnx_path.stat().st_mtime_ns == stamp
    assert not list(first.onnx_path.parent.glob("*.tmp"))
    pictures = [data.coffee(), data.astronaut()]
    np.testing.assert_allclose(
        second.extract_batch(pictures), torch_extractor.extract_batch(pictures), atol=1e-3
    )


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 6, 3, stride=2)

    def forward(self, images):
        return torch.relu(self.conv(images))  # (n, 6, h, w): the extractor pools it


def test_other_models_from_files(tmp_path):
    preprocessing = Preprocessing(input_size=(32, 48), mean=(0, 0, 0), std=(255, 255, 255), crop_fraction=1.0)
    network = TinyNet().eval()
    scripted = tmp_path / "tiny.pt"
    torch.jit.save(torch.jit.script(network), str(scripted))
    onnx_file = tmp_path / "tiny.onnx"
    example = torch.zeros(1, 3, 32, 48)
    torch.onnx.export(network, (example,), str(onnx_file), dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "n"}})  # fmt: skip
    picture = data.astronaut()
    expected = network(preprocess([picture], preprocessing)).mean(dim=(2, 3)).detach().numpy()[0]
    for backend, path in (("torch", scripted), ("onnxruntime", onnx_file)):
        extractor = FeatureExtractor(backend=backend, model_path=path, preprocessing=preprocessing)
        assert extractor.dim == 6 and extractor.precision == "fp32"  # 'auto' quantizes only the default model
        np.testing.assert_allclose(extractor(picture), expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"onnxruntime backend loads \.onnx"):
        FeatureExtractor(backend="onnxruntime", model_path=scripted)
    with pytest.raises(ValueError, match="not a TorchScript"):
        FeatureExtractor(backend="torch", model_path=_garbage(tmp_path / "bad.pt"))
    with pytest.raises(ValueError, match="cannot load ONNX"):
        FeatureExtractor(backend="onnxruntime", model_path=_garbage(tmp_path / "bad.onnx"))
    with pytest.raises(ValueError, match="does not exist"):
        FeatureExtractor(backend="torch", model_path=tmp_path / "missing.pt")


def _garbage(path):
    path.write_bytes(b"not a model at all")
    return path


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((10, 10, 3), dtype=np.float32),
        np.zeros((10, 10), dtype=np.uint8),
        np.zeros((10, 10, 4), dtype=np.uint8),
        np.zeros((0, 10, 3), dtype=np.uint8),
    ],
)
def test_bad_images_are_rejected(torch_extractor, bad):
    with pytest.raises(ValueError):
        torch_extractor(bad)
    with pytest.raises(ValueError):
        torch_extractor.extract_batch([data.coffee(), bad])


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="backend"):
        FeatureExtractor(backend="tensorflow")
    with pytest.raises(ValueError, match="device"):
        FeatureExtractor(device="tpu")
    with pytest.raises(ValueError):
        Preprocessing(std=(0.0, 1.0, 1.0))
    with pytest.raises(ValueError):
        Preprocessing(crop_fraction=1.5)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            FeatureExtractor(backend="torch", device="cuda")
