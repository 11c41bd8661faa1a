"""sensor_msgs/Image ↔ numpy: every encoding, row padding, endianness, CDR bytes, rosbags-image."""

import numpy as np
import pytest
from rosbags.image import message_to_cvimage
from rosbags.typesys import Stores, get_typestore

from lifelong_learning.vision.image_conversion import (
    ImageFields,
    ImageTooLargeError,
    check_image_fields,
    encoding_layout,
    image_to_numpy,
    numpy_to_image,
    to_rgb8,
)

ENCODINGS = [
    "rgb8", "bgr8", "rgba8", "bgra8", "mono8", "mono16", "rgb16", "bgra16",
    "8UC1", "8UC3", "8SC2", "16UC1", "16UC3", "16SC1", "32SC1", "32FC1", "32FC3", "64FC1",
]  # fmt: skip

TYPESTORE = get_typestore(Stores.ROS2_KILTED)
Image = TYPESTORE.types["sensor_msgs/msg/Image"]
Header = TYPESTORE.types["std_msgs/msg/Header"]
Time = TYPESTORE.types["builtin_interfaces/msg/Time"]


def random_pixels(encoding: str, rng: np.random.Generator, height: int = 5, width: int = 7) -> np.ndarray:
    dtype, channels = encoding_layout(encoding)
    shape = (height, width) if channels == 1 else (height, width, channels)
    if dtype.kind == "f":
        return rng.normal(0, 100, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)


def rosbags_image(pixels: np.ndarray, encoding: str, row_padding: int = 0, bigendian: bool = False):
    fields = numpy_to_image(pixels, encoding, row_padding=row_padding, is_bigendian=bigendian)
    return Image(
        header=Header(stamp=Time(sec=1, nanosec=2), frame_id="camera"),
        height=fields.height,
        width=fields.width,
        encoding=fields.encoding,
        is_bigendian=fields.is_bigendian,
        step=fields.step,
        data=np.frombuffer(fields.data, dtype=np.uint8).copy(),
    )


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("row_padding", [0, 3])
@pytest.mark.parametrize("bigendian", [False, True])
def test_round_trip_through_cdr_bytes(encoding, row_padding, bigendian):
    rng = np.random.default_rng(len(encoding) + row_padding)
    pixels = random_pixels(encoding, rng)
    message = rosbags_image(pixels, encoding, row_padding, bigendian)
    raw = TYPESTORE.serialize_cdr(message, "sensor_msgs/msg/Image")
    decoded = TYPESTORE.deserialize_cdr(raw, "sensor_msgs/msg/Image")
    assert decoded.step == pixels.shape[1] * pixels[0, 0].nbytes + row_padding
    np.testing.assert_array_equal(image_to_numpy(decoded), pixels)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_agrees_with_rosbags_image(encoding):
    """rosbags-image ignores row padding, so compare on unpadded images."""
    pixels = random_pixels(encoding, np.random.default_rng(3))
    for bigendian in (False, True):
        message = rosbags_image(pixels, encoding, 0, bigendian)
        theirs = message_to_cvimage(message)
        np.testing.assert_array_equal(image_to_numpy(message), theirs.reshape(image_to_numpy(message).shape))


def test_colour_encodings_give_the_same_rgb8_picture():
    rgb = np.random.default_rng(0).integers(0, 256, (6, 9, 3), dtype=np.uint8)
    alpha = np.full((6, 9, 1), 200, dtype=np.uint8)
    variants = {
        "rgb8": rgb,
        "bgr8": rgb[:, :, ::-1],
        "rgba8": np.concatenate([rgb, alpha], axis=2),
        "bgra8": np.concatenate([rgb[:, :, ::-1], alpha], axis=2),
        "8UC3": rgb[:, :, ::-1],
    }
    for encoding, pixels in variants.items():
        message = numpy_to_image(np.ascontiguousarray(pixels), encoding, row_padding=5)
        np.testing.assert_array_equal(to_rgb8(message), rgb, err_msg=encoding)
    grey = rgb[:, :, 0]
    np.testing.assert_array_equal(to_rgb8(numpy_to_image(grey, "mono8")), np.stack([grey] * 3, axis=2))
    with pytest.raises(ValueError, match="cannot convert"):
        to_rgb8(numpy_to_image(grey.astype(np.uint16), "mono16"))


def test_bad_images_are_rejected():
    good = numpy_to_image(np.zeros((4, 5, 3), dtype=np.uint8), "rgb8", row_padding=1)
    with pytest.raises(ValueError, match="unsupported image encoding"):
        image_to_numpy(rosbags_like(good, encoding="yuv422_weird"))
    with pytest.raises(ValueError, match="expected height\\*step"):
        image_to_numpy(rosbags_like(good, data=good.data[:-1]))
    with pytest.raises(ValueError, match="shorter than one row"):
        image_to_numpy(rosbags_like(good, step=14))
    with pytest.raises(ValueError, match="zero size"):
        image_to_numpy(rosbags_like(good, height=0, data=b""))
    with pytest.raises(ValueError, match="needs shape"):
        numpy_to_image(np.zeros((4, 5, 3), dtype=np.uint8), "mono8")
    with pytest.raises(ValueError, match="needs dtype"):
        numpy_to_image(np.zeros((4, 5, 3), dtype=np.float32), "rgb8")


def test_image_fields_are_checked_without_touching_the_pixels():
    class Untouchable:
        """A data buffer of 10^8 bytes that fails if anything reads or copies it."""

        def __len__(self):
            return 10**8

        def __getitem__(self, index):
            raise AssertionError("the pixels were read")

        def __buffer__(self, flags):
            raise AssertionError("the pixels were copied")

    huge = ImageFields(10000, 10000, "mono8", 0, 10000, Untouchable())
    with pytest.raises(ImageTooLargeError, match="10000x10000 = 100000000 pixels is above the limit of 16"):
        check_image_fields(huge, max_pixels=16 * 2**20)
    assert check_image_fields(huge) == (np.dtype(np.uint8), 1, 10000)  # no limit: valid
    good = numpy_to_image(np.zeros((4, 5, 3), dtype=np.uint8), "rgb8", row_padding=1)
    assert check_image_fields(good, max_pixels=20) == (np.dtype(np.uint8), 3, 15)
    with pytest.raises(ImageTooLargeError):
        check_image_fields(good, max_pixels=19)
    with pytest.raises(ValueError, match="zero size"):
        check_image_fields(rosbags_like(good, height=0, width=0, step=0, data=b""), max_pixels=20)
    with pytest.raises(ValueError, match="expected height\\*step") as short:
        check_image_fields(rosbags_like(good, data=good.data[:-1]), max_pixels=20)
    assert not isinstance(short.value, ImageTooLargeError)
    wide = numpy_to_image(np.zeros((2, 3), dtype=np.uint16), "mono16")
    assert check_image_fields(rosbags_like(wide, data=memoryview(np.zeros(6, dtype=np.uint16))))[2] == 6


def rosbags_like(fields, **changes):
    values = {
        name: getattr(fields, name)
        for name in ("height", "width", "encoding", "is_bigendian", "step", "data")
    }
    values.update(changes)
    return type(fields)(**values)
