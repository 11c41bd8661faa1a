"""sensor_msgs/Image ↔ numpy: every encoding, row padding, endianness, CDR bytes, rosbags-image;
YUV 4:2:2 and Bayer pictures of known colours back to RGB."""

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


# --------------------------------------------------------------------------- YUV 4:2:2 and Bayer
# Known colours (RGB), each filling two horizontally adjacent pixels so that a 4:2:2 pair shares it.
COLOURS = np.array(
    [[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255], [0, 0, 0], [128, 128, 128],
     [200, 120, 40], [30, 90, 210], [250, 220, 10], [12, 160, 150]],
    dtype=np.uint8,
)  # fmt: skip


def paired_picture(height: int = 4, pairs: int = 5) -> np.ndarray:
    """(height, 2*pairs, 3) RGB: every colour of COLOURS in turn, two pixels wide."""
    index = (np.arange(height)[:, None] * pairs + np.arange(pairs)[None, :]) % len(COLOURS)
    return np.repeat(COLOURS[index], 2, axis=1)


def bt601_video_range(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y, U (Cb), V (Cr) of 8-bit RGB by ITU-R BT.601 with video-range levels (Y 16..235,
    U and V 16..240 around 128), the YCbCr of 4:2:2 camera streams:
    Y = 16 + (65.481 R + 128.553 G + 24.966 B) / 255, U = 128 + (-37.797 R - 74.203 G + 112 B) / 255,
    V = 128 + (112 R - 93.786 G - 18.214 B) / 255."""
    r, g, b = (rgb[..., i].astype(np.float64) for i in range(3))
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    u = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    v = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255
    return tuple(np.clip(np.rint(c), 0, 255).astype(np.uint8) for c in (y, u, v))


def pack_422(rgb: np.ndarray, order: str) -> np.ndarray:
    """(H, W, 2) bytes of a packed 4:2:2 picture: 'YUYV' (Y0 U Y1 V) or 'UYVY' (U Y0 V Y1).
    U and V of each pair are taken from its first pixel (the pairs of paired_picture share a colour)."""
    y, u, v = bt601_video_range(rgb)
    height, width = y.shape
    out = np.empty((height, width // 2, 4), dtype=np.uint8)
    samples = {"Y0": y[:, 0::2], "Y1": y[:, 1::2], "U": u[:, 0::2], "V": v[:, 0::2]}
    names = ["Y0", "U", "Y1", "V"] if order == "YUYV" else ["U", "Y0", "V", "Y1"]
    for k, name in enumerate(names):
        out[:, :, k] = samples[name]
    return out.reshape(height, width, 2)


@pytest.mark.parametrize(
    ("encoding", "order"),
    [("yuv422", "UYVY"), ("uyvy", "UYVY"), ("yuv422_yuy2", "YUYV"), ("yuyv", "YUYV")],
)
def test_yuv422_encodings_recover_known_colours(encoding, order):
    rgb = paired_picture()
    message = numpy_to_image(pack_422(rgb, order), encoding, row_padding=6)
    assert message.step == rgb.shape[1] * 2 + 6
    got = to_rgb8(message)
    assert got.shape == rgb.shape and got.dtype == np.uint8
    # 8-bit Y, U, V quantize each colour by about 1 level; OpenCV's fixed point adds a little
    np.testing.assert_allclose(got.astype(int), rgb.astype(int), atol=3, err_msg=encoding)
    # the other byte order would give other colours: the test tells UYVY from YUYV
    swapped = numpy_to_image(pack_422(rgb, "YUYV" if order == "UYVY" else "UYVY"), encoding)
    assert np.abs(to_rgb8(swapped).astype(int) - rgb).max() > 50


BAYER_INDEX = {"r": 0, "g": 1, "b": 2}


def mosaic(rgb: np.ndarray, pattern: str, scale: int = 1, dtype: type = np.uint8) -> np.ndarray:
    """The Bayer mosaic of an RGB picture: ``pattern`` (e.g. 'rggb') names the colour sampled at
    (0, 0), (0, 1), (1, 0), (1, 1) of every 2x2 block; values times ``scale`` in ``dtype``."""
    out = np.empty(rgb.shape[:2], dtype=dtype)
    for k, colour in enumerate(pattern):
        dy, dx = divmod(k, 2)
        out[dy::2, dx::2] = rgb[dy::2, dx::2, BAYER_INDEX[colour]].astype(dtype) * scale
    return out


def block_picture() -> np.ndarray:
    """(16, 24, 3) RGB of six 8x8 blocks of known colours."""
    blocks = COLOURS[[6, 7, 8, 9, 0, 5]].reshape(2, 3, 3)
    return np.repeat(np.repeat(blocks, 8, axis=0), 8, axis=1)


@pytest.mark.parametrize("pattern", ["rggb", "bggr", "gbrg", "grbg"])
@pytest.mark.parametrize("bits", [8, 16])
def test_bayer_encodings_recover_known_colours(pattern, bits):
    rgb = block_picture()
    scale, dtype = (1, np.uint8) if bits == 8 else (257, np.uint16)  # 16-bit: v * 257 keeps v on top
    message = numpy_to_image(mosaic(rgb, pattern, scale, dtype), f"bayer_{pattern}{bits}", is_bigendian=True)
    got = to_rgb8(message)
    assert got.shape == rgb.shape and got.dtype == np.uint8
    # demosaicing interpolates across block edges: compare each block's inside (2 pixels in)
    inside = np.zeros(rgb.shape[:2], dtype=bool)
    for y0 in (0, 8):
        for x0 in (0, 8, 16):
            inside[y0 + 2 : y0 + 6, x0 + 2 : x0 + 6] = True
    np.testing.assert_array_equal(got[inside], rgb[inside], err_msg=pattern)
    # every other pattern would swap colours: the mapping is pinned down
    for other in {"rggb", "bggr", "gbrg", "grbg"} - {pattern}:
        wrong = numpy_to_image(mosaic(rgb, pattern, scale, dtype), f"bayer_{other}{bits}")
        assert np.abs(to_rgb8(wrong)[inside].astype(int) - rgb[inside]).max() > 50, other


@pytest.mark.parametrize(
    "encoding",
    ["yuv422", "uyvy", "yuv422_yuy2", "yuyv", "bayer_rggb8", "bayer_bggr8", "bayer_gbrg8", "bayer_grbg8"],
)
def test_yuv_and_bayer_agree_with_rosbags_image(encoding):
    """rosbags-image (cv_bridge's conversion table) gives the same RGB picture."""
    channels = encoding_layout(encoding)[1]
    shape = (6, 8, channels) if channels > 1 else (6, 8)
    pixels = np.random.default_rng(5).integers(16, 235, shape, dtype=np.uint8)
    message = rosbags_image(pixels, encoding)
    np.testing.assert_array_equal(to_rgb8(message), message_to_cvimage(message, "rgb8"))


def test_yuv_and_bayer_byte_layout_is_checked_from_the_header():
    """2 bytes per pixel for packed 4:2:2, 1 for 8-bit Bayer, 2 for 16-bit Bayer; an odd 4:2:2 width
    is refused; all without reading the pixels."""

    class Untouchable:
        def __init__(self, size):
            self.size = size

        def __len__(self):
            return self.size

        def __getitem__(self, index):
            raise AssertionError("the pixels were read")

    for encoding, per_pixel in [("yuv422", 2), ("yuyv", 2), ("bayer_rggb8", 1), ("bayer_grbg16", 2)]:
        fields = ImageFields(480, 640, encoding, 0, 640 * per_pixel, Untouchable(480 * 640 * per_pixel))
        assert check_image_fields(fields, max_pixels=640 * 480)[2] == 640 * per_pixel, encoding
        with pytest.raises(ImageTooLargeError):
            check_image_fields(fields, max_pixels=640 * 480 - 1)
        short = ImageFields(
            480, 640, encoding, 0, 640 * per_pixel - 1, Untouchable(480 * (640 * per_pixel - 1))
        )
        with pytest.raises(ValueError, match="shorter than one row"):
            check_image_fields(short)
    odd = ImageFields(2, 5, "yuv422_yuy2", 0, 10, Untouchable(20))
    with pytest.raises(ValueError, match="even width"):
        check_image_fields(odd)
    with pytest.raises(ValueError, match="even width"):
        to_rgb8(numpy_to_image(np.zeros((2, 5, 2), dtype=np.uint8), "uyvy"))
