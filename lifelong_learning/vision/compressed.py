"""sensor_msgs/CompressedImage (JPEG, PNG) → RGB pixels, without ROS imports.

A compressed frame of a few kilobytes can claim a picture of gigapixels (a decompression
bomb): :func:`compressed_image_size` reads the width and height from the header bytes alone
(PNG: the IHDR chunk; JPEG: the first start-of-frame segment, skipping the segments before it
by their lengths), so that a size limit is applied before anything is decoded.
:func:`decode_compressed` checks that limit, then decodes with OpenCV's ``cv2.imdecode``
(imported only then) and checks that the picture has the size the header announced.

Only JPEG and PNG are accepted (what image_transport's ``compressed`` plugin produces; its
``format`` field, e.g. ``"rgb8; jpeg compressed bgr8"``, is not needed: the data's own
signature tells the format). Anything else, such as another format OpenCV could decode,
or a ``compressedDepth`` frame, is refused as malformed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lifelong_learning.vision.image_conversion import ImageTooLargeError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SOI = b"\xff\xd8"

#: JPEG start-of-frame markers (baseline, extended, progressive, lossless; Huffman or arithmetic)
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
#: JPEG markers without a length field: TEM, RST0..7, SOI, EOI
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8), 0xD8, 0xD9})
_JPEG_SOS = 0xDA


class MalformedImageError(ValueError):
    """Compressed data that is not a JPEG or PNG picture this module can read."""


def compressed_image_size(data: Any) -> tuple[int, int, str]:
    """(width, height, format) of a JPEG or PNG picture, from its header bytes only.

    Args:
        data: the compressed bytes (bytes, bytearray, memoryview, array.array('B') or a uint8
            numpy array, as a CompressedImage's ``data`` field holds them).

    Returns:
        (width, height, ``"jpeg"`` or ``"png"``).

    Raises:
        MalformedImageError: neither a PNG nor a JPEG signature, a header cut short, a zero
            size, or a JPEG without a start-of-frame segment before its scan.
    """
    view = _bytes_view(data)
    if view[:8] == PNG_SIGNATURE:
        return (*_png_size(view), "png")
    if view[:2] == JPEG_SOI:
        return (*_jpeg_size(view), "jpeg")
    raise MalformedImageError("compressed image is neither PNG nor JPEG (unknown signature)")


def _png_size(view: memoryview) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which the PNG specification puts first."""
    if len(view) < 8 + 8 + 13 or view[12:16] != b"IHDR":
        raise MalformedImageError("PNG without an IHDR chunk at its start")
    width = int.from_bytes(view[16:20], "big")
    height = int.from_bytes(view[20:24], "big")
    if width == 0 or height == 0:
        raise MalformedImageError(f"PNG header gives a zero size ({width}x{height})")
    return width, height


def _jpeg_size(view: memoryview) -> tuple[int, int]:
    """Width and height from the first start-of-frame segment (segments before it skipped by length)."""
    pos, size = 2, len(view)
    while pos < size:
        if view[pos] != 0xFF:
            raise MalformedImageError(f"JPEG marker expected at byte {pos}")
        while pos < size and view[pos] == 0xFF:  # fill bytes may precede a marker
            pos += 1
        if pos >= size:
            break
        marker = view[pos]
        pos += 1
        if marker in _JPEG_STANDALONE:
            continue
        if pos + 2 > size:
            break
        length = int.from_bytes(view[pos : pos + 2], "big")
        if length < 2:
            raise MalformedImageError(f"JPEG segment length {length} at byte {pos}")
        if marker in _JPEG_SOF:
            if length < 8 or pos + 7 > size:
                break
            height = int.from_bytes(view[pos + 3 : pos + 5], "big")
            width = int.from_bytes(view[pos + 5 : pos + 7], "big")
            if width == 0 or height == 0:  # height 0: given later by a DNL segment, not supported
                raise MalformedImageError(f"JPEG frame header gives a zero size ({width}x{height})")
            return width, height
        if marker == _JPEG_SOS:
            raise MalformedImageError("JPEG scan before any frame header")
        pos += length
    raise MalformedImageError("JPEG cut short before its frame header")


def decode_compressed(data: Any, max_pixels: int | None = None) -> np.ndarray:
    """A JPEG or PNG picture as an (H, W, 3) uint8 RGB array, refusing it before decoding when too large.

    Grey pictures come back with the grey value in all three channels, alpha is dropped and
    16-bit PNG samples are reduced to 8 bits (OpenCV's ``IMREAD_COLOR``).

    Raises:
        ImageTooLargeError: the header's ``width * height`` is above ``max_pixels``.
        MalformedImageError: see :func:`compressed_image_size`; also data OpenCV cannot decode,
            or a decoded size that differs from the header's.
        ValueError: OpenCV is not installed.
    """
    width, height, kind = compressed_image_size(data)
    if max_pixels is not None and width * height > max_pixels:
        raise ImageTooLargeError(
            f"{kind} image of {width}x{height} = {width * height} pixels is above the limit of {max_pixels}"
        )
    try:
        import cv2
    except ImportError as error:
        raise ValueError(
            f"compressed images need OpenCV (pip install opencv-python-headless): {error}"
        ) from error
    buffer = np.frombuffer(_bytes_view(data), dtype=np.uint8)
    try:
        bgr = cv2.imdecode(buffer, cv2.IMREAD_COLOR)
    except cv2.error as error:
        raise MalformedImageError(f"OpenCV could not decode the {kind} image: {error}") from error
    if bgr is None:
        raise MalformedImageError(f"OpenCV could not decode the {kind} image")
    if bgr.shape[:2] != (height, width):
        raise MalformedImageError(
            f"decoded {kind} image is {bgr.shape[1]}x{bgr.shape[0]}, its header said {width}x{height}"
        )
    return np.ascontiguousarray(bgr[:, :, ::-1])


def _bytes_view(data: Any) -> memoryview:
    """A byte view of ``data`` without copying (bytes, bytearray, memoryview, array.array, uint8 array)."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise MalformedImageError(f"compressed image data must be uint8, got {data.dtype}")
        return memoryview(np.ascontiguousarray(data).reshape(-1))
    if isinstance(data, (list, tuple)):
        return memoryview(bytes(data))
    return memoryview(data).cast("B")
