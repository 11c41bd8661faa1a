"""Camera images → CNN features (no ROS imports): a frozen ImageNet CNN feature extractor,
its preprocessing, and sensor_msgs/Image ↔ numpy conversion.

The names below are imported when first used: a module of this package that needs neither the
CNN nor OpenCV (:mod:`~lifelong_learning.vision.room_directions`, used by a command of the
ROS-free install) imports without them.
"""

from __future__ import annotations

import importlib
from typing import Any

#: each public name and the module that defines it
_HOMES = {
    "FeatureExtractor": "feature_extractor",
    "load_efficientnet_lite0": "feature_extractor",
    "Preprocessing": "preprocessing",
    "image_to_numpy": "image_conversion",
    "numpy_to_image": "image_conversion",
    "to_rgb8": "image_conversion",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
