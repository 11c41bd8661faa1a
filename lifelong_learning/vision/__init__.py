"""Camera images → CNN features (no ROS imports): a frozen ImageNet CNN feature extractor,
its preprocessing, and sensor_msgs/Image ↔ numpy conversion."""

from lifelong_learning.vision.feature_extractor import FeatureExtractor, load_efficientnet_lite0
from lifelong_learning.vision.image_conversion import image_to_numpy, numpy_to_image, to_rgb8
from lifelong_learning.vision.preprocessing import Preprocessing

__all__ = [
    "FeatureExtractor",
    "Preprocessing",
    "image_to_numpy",
    "load_efficientnet_lite0",
    "numpy_to_image",
    "to_rgb8",
]
