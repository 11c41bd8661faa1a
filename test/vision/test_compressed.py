"""sensor_msgs/CompressedImage data (JPEG, PNG): sizes from the header bytes, decompression bombs
refused before decoding, pictures decoded back to RGB, anything else a MalformedImageError."""

import array
import struct
import zlib

import cv2
import numpy as np
import pytest

from lifelong_learning.vision.compressed import (
    MalformedImageError,
    compressed_image_size,
    decode_compressed,
)
from lifelong_learning.vision.image_conversion import ImageTooLargeError


def smooth_picture(height: int = 48, width: int = 64) -> np.ndarray:
    """An RGB picture of gentle gradients (what JPEG keeps well)."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 255 // (width - 1), y * 255 // (height - 1), np.full_like(x, 90)], axis=2).astype(
        np.uint8
    )


def encode(rgb: np.ndarray, ext: str, *params: int) -> bytes:
    ok, buffer = cv2.imencode(ext, np.ascontiguousarray(rgb[..., ::-1]) if rgb.ndim == 3 else rgb, params)
    assert ok
    return buffer.tobytes()


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def png_claiming(width: int, height: int) -> bytes:
    """A small PNG whose IHDR claims width x height (8-bit RGB) and whose data is one empty row."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 4)
    return (
        b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b"")
    )


def with_jpeg_size(jpeg: bytes, width: int, height: int) -> bytes:
    """The same JPEG with the size in its (first) SOF0 frame header replaced."""
    sof = jpeg.index(b"\xff\xc0")
    return jpeg[: sof + 5] + struct.pack(">HH", height, width) + jpeg[sof + 9 :]


@pytest.fixture
def no_decoding(monkeypatch):
    """cv2.imdecode fails the test if called: a refusal must come from the header alone."""

    def imdecode(*args, **kwargs):
        raise AssertionError("cv2.imdecode was called")

    monkeypatch.setattr(cv2, "imdecode", imdecode)


def test_png_is_decoded_exactly_in_every_data_form():
    rgb = smooth_picture()
    data = encode(rgb, ".png")
    for form in (
        data,
        bytearray(data),
        memoryview(data),
        array.array("B", data),
        np.frombuffer(data, np.uint8),
    ):
        assert compressed_image_size(form) == (64, 48, "png")
        np.testing.assert_array_equal(decode_compressed(form, max_pixels=64 * 48), rgb)


def test_jpeg_is_decoded_close_to_the_picture():
    rgb = smooth_picture()
    data = encode(rgb, ".jpg", cv2.IMWRITE_JPEG_QUALITY, 95)
    assert compressed_image_size(data) == (64, 48, "jpeg")
    got = decode_compressed(array.array("B", data))
    assert got.shape == rgb.shape and got.dtype == np.uint8
    assert np.abs(got.astype(int) - rgb).mean() < 2.0
    assert np.abs(got.astype(int) - rgb).max() < 16


def test_progressive_jpeg_and_grey_and_16_bit_and_alpha_png():
    rgb = smooth_picture()
    progressive = encode(rgb, ".jpg", cv2.IMWRITE_JPEG_PROGRESSIVE, 1)
    assert compressed_image_size(progressive) == (64, 48, "jpeg")  # SOF2
    assert progressive.find(b"\xff\xc0") < 0 and progressive.find(b"\xff\xc2") > 0
    assert decode_compressed(progressive).shape == (48, 64, 3)
    grey = rgb[:, :, 0].copy()
    np.testing.assert_array_equal(decode_compressed(encode(grey, ".png")), np.stack([grey] * 3, axis=2))
    deep = rgb.astype(np.uint16) * 257  # 16-bit samples v * 257: 8 bits v after reduction
    np.testing.assert_array_equal(decode_compressed(encode(deep, ".png")), rgb)
    bgra = np.concatenate([rgb[..., ::-1], np.full((48, 64, 1), 7, np.uint8)], axis=2)
    np.testing.assert_array_equal(decode_compressed(cv2.imencode(".png", bgra)[1].tobytes()), rgb)


def test_jpeg_size_comes_from_the_frame_not_from_an_embedded_thumbnail():
    """An APP1 segment (where EXIF keeps a thumbnail) holding a JPEG of another size is skipped by
    its length; fill bytes before a marker are allowed."""
    rgb = smooth_picture()
    main = encode(rgb, ".jpg")
    thumbnail = encode(smooth_picture(8, 16), ".jpg")
    app1 = b"\xff\xe1" + struct.pack(">H", len(thumbnail) + 8) + b"Exif\x00\x00" + thumbnail
    data = main[:2] + b"\xff" + app1 + main[2:]
    assert compressed_image_size(data) == (64, 48, "jpeg")
    assert decode_compressed(data).shape == (48, 64, 3)


def test_decompression_bombs_are_refused_before_decoding(no_decoding):
    bomb = png_claiming(100_000, 100_000)  # 10^10 pixels in about 70 bytes
    assert len(bomb) < 100
    assert compressed_image_size(bomb) == (100_000, 100_000, "png")
    with pytest.raises(ImageTooLargeError, match="100000x100000 = 10000000000 pixels is above the limit"):
        decode_compressed(bomb, max_pixels=4096 * 4096)
    jpeg = with_jpeg_size(encode(smooth_picture(), ".jpg"), 65_000, 65_000)
    with pytest.raises(ImageTooLargeError, match="jpeg image of 65000x65000"):
        decode_compressed(jpeg, max_pixels=4096 * 4096)
    with pytest.raises(ImageTooLargeError):  # the limit is inclusive: one pixel above it
        decode_compressed(encode(smooth_picture(), ".png"), max_pixels=64 * 48 - 1)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "neither PNG nor JPEG"),
        (b"GIF89a" + bytes(20), "neither PNG nor JPEG"),
        (b"BM" + bytes(60), "neither PNG nor JPEG"),  # BMP: OpenCV could decode it, we do not
        (b"\x89PNG\r\n\x1a\n" + bytes(10), "IHDR"),
        (png_claiming(0, 5), "zero size"),
        (b"\xff\xd8", "cut short"),
        (b"\xff\xd8\xff\xe0\x00", "cut short"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "cut short"),
        (b"\xff\xd8\x00\x01", "marker expected"),
        (b"\xff\xd8\xff\xe0\x00\x01", "segment length 1"),
        (b"\xff\xd8\xff\xda\x00\x08" + bytes(6), "scan before any frame header"),
        (b"\xff\xd8\xff\xc0\x00\x11\x08\x00\x00\x00\x10\x03", "zero size"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_malformed_headers_are_refused_before_decoding(no_decoding, data, message):
    with pytest.raises(MalformedImageError, match=message):
        compressed_image_size(data)
    with pytest.raises(MalformedImageError, match=message):
        decode_compressed(data, max_pixels=100)


def test_data_that_does_not_decode_is_malformed(monkeypatch):
    png = encode(smooth_picture(), ".png")
    broken = png[:40] + bytes(len(png) - 40)  # a valid header, a destroyed body
    with pytest.raises(MalformedImageError, match="could not decode"):
        decode_compressed(broken)
    jpeg = encode(smooth_picture(), ".jpg")
    sos = jpeg.index(b"\xff\xda")
    with pytest.raises(MalformedImageError):  # header and frame, no scan data at all
        decode_compressed(jpeg[: sos - 1])
    with pytest.raises(MalformedImageError, match="uint8"):
        compressed_image_size(np.zeros(4, dtype=np.float32))
    # a decoder that returns another size than the header's (the limit was applied to the header)
    monkeypatch.setattr(cv2, "imdecode", lambda *args: np.zeros((4096, 4096, 3), np.uint8))
    with pytest.raises(MalformedImageError, match="decoded jpeg image is 4096x4096, its header said 64x48"):
        decode_compressed(jpeg, max_pixels=64 * 48)
