"""Image preprocessing for ImageNet CNNs: centre crop, resize, normalise (no ROS imports).

The default matches how EfficientNet-Lite was trained and evaluated (TensorFlow TPU
reference, ``efficientnet/lite``): RGB, a centre square of 224/256 = 0.875 of the shorter
side, resized to 224×224, then ``(x - 127) / 128`` per channel (NOT the torchvision
ImageNet mean/std, although the docstring of ``efficientnet_lite_pytorch`` shows that one).
Of the normalisations and crops tried with the shipped efficientnet-lite0 weights on six
labelled photos, it gives the right ImageNet classes the highest probability (coffee →
espresso: p = 0.94, 0.71–0.82 with ImageNet mean/std; the table: docs/design.md,
vision/preprocessing.py).

Implementation: numpy and OpenCV only. The crop is a view of the uint8 picture, ``cv2.resize``
shrinks it with ``INTER_AREA`` (the box filter OpenCV recommends for shrinking: no aliasing;
``INTER_LINEAR`` when enlarging), BGR pictures are swapped to RGB on the small result, and only
the h×w×3 result is converted to float32 (why not torch, and how close the features stay to the
former torch resize: docs/design.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Preprocessing:
    """How raw uint8 pictures become the network's input tensor.

    Attributes:
        input_size: (height, width) of the network input.
        mean: per-channel value subtracted, in 0..255 units, in RGB order.
        std: per-channel divisor, in 0..255 units, in RGB order.
        crop_fraction: side of the centre square cut out, as a fraction of the shorter
            image side, before resizing (1.0: the largest centre square).
    """

    input_size: tuple[int, int] = (224, 224)
    mean: tuple[float, float, float] = (127.0, 127.0, 127.0)
    std: tuple[float, float, float] = (128.0, 128.0, 128.0)
    crop_fraction: float = 0.875

    def __post_init__(self) -> None:
        if len(self.input_size) != 2 or min(self.input_size) < 1:
            raise ValueError(f"input_size must be (height, width) >= 1, got {self.input_size}")
        if len(self.mean) != 3 or len(self.std) != 3:
            raise ValueError("mean and std need 3 values (R, G, B)")
        if not all(np.isfinite(self.std)) or min(self.std) <= 0 or not all(np.isfinite(self.mean)):
            raise ValueError(f"std must be finite and > 0, mean finite; got mean={self.mean}, std={self.std}")
        if not 0.0 < self.crop_fraction <= 1.0:
            raise ValueError(f"crop_fraction must be in (0, 1], got {self.crop_fraction}")


def check_image(image: np.ndarray) -> np.ndarray:
    """Validate one H×W×3 uint8 picture; return it as a numpy array.

    Raises:
        ValueError: not a 3-D uint8 array with 3 channels, or zero size.
    """
    array = np.asarray(image)
    if array.dtype != np.uint8:
        raise ValueError(f"image must be uint8, got dtype {array.dtype}")
    if array.ndim != 3 or array.shape[2] != 3:
        raise ValueError(f"image must have shape (H, W, 3), got {array.shape}")
    if array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(f"image has zero size {array.shape}")
    return array


def preprocess_array(
    images: Sequence[np.ndarray], preprocessing: Preprocessing, *, bgr: bool = False
) -> np.ndarray:
    """A float32 (n, 3, h, w) network input from n uint8 H×W×3 pictures (sizes may differ).

    Centre square of ``crop_fraction`` of the shorter side, ``cv2.resize`` to ``input_size``
    (``INTER_AREA`` when shrinking, ``INTER_LINEAR`` when enlarging), RGB order, then
    ``(x - mean) / std`` per channel in float32.
    """
    height, width = preprocessing.input_size
    scale = (1.0 / np.asarray(preprocessing.std, dtype=np.float32)).reshape(3, 1, 1)
    offset = (np.asarray(preprocessing.mean, dtype=np.float32)).reshape(3, 1, 1)
    batch = np.empty((len(images), 3, height, width), dtype=np.float32)
    for index, image in enumerate(images):
        array = check_image(image)
        rows, cols = array.shape[:2]
        side = max(1, round(min(rows, cols) * preprocessing.crop_fraction))
        top, left = (rows - side) // 2, (cols - side) // 2
        square = array[top : top + side, left : left + side]
        shrinking = side >= height and side >= width
        small = cv2.resize(
            square, (width, height), interpolation=cv2.INTER_AREA if shrinking else cv2.INTER_LINEAR
        )
        if bgr:
            small = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)
        planes = batch[index]
        np.subtract(small.transpose(2, 0, 1), offset, out=planes, dtype=np.float32)
        planes *= scale
    return batch


def preprocess(
    images: Sequence[np.ndarray], preprocessing: Preprocessing, *, bgr: bool = False
) -> torch.Tensor:
    """:func:`preprocess_array` as a torch tensor (for the torch backend and torch models)."""
    import torch

    return torch.from_numpy(preprocess_array(images, preprocessing, bgr=bgr))
