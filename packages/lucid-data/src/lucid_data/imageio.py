"""Image decoding: `load_image(path) -> (H, W, 3) uint8 RGB`, with corrupt/truncated files detected.

OpenCV `imdecode` with `IMREAD_COLOR` (`cv::ImreadModes`: grayscale and palette images to 3 channels, alpha dropped,
16-bit samples scaled to 8 bits, EXIF orientation applied), the decode the reference fixtures record
(`../shared/data/README.md`, "Integrity": OpenCV `imread` BGR pixels), swapped to RGB. OpenCV decodes a truncated
JPEG partially without an error, so JPEG files are also checked for the EOI marker `FF D9` near their end (JPEG,
ITU-T T.81 B.1.1.3; inside entropy-coded data `FF` is always stuffed or followed by a restart marker).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

__all__ = ["IMAGE_SUFFIXES", "CorruptImageError", "image_size", "load_image", "verify_image"]

IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".dng", ".mpo", ".pfm"}
)

_JPEG_SOI = b"\xff\xd8"
_JPEG_EOI = b"\xff\xd9"
_EOI_SEARCH_TAIL = 4096  # bytes after the EOI tolerated (some cameras append padding or trailers)


class CorruptImageError(ValueError):
    """An image file that cannot be decoded completely."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: corrupt image: {reason}")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CorruptImageError(path, f"cannot read file ({exc.strerror or exc})") from exc


def _check_container(path: Path, data: bytes) -> None:
    if not data:
        raise CorruptImageError(path, "empty file")
    if data[:2] == _JPEG_SOI and _JPEG_EOI not in data[-_EOI_SEARCH_TAIL:]:
        raise CorruptImageError(path, "truncated JPEG (no end-of-image marker FF D9)")


def load_image(path: str | Path) -> np.ndarray:
    """Decode an image file to (H, W, 3) uint8 RGB (EXIF orientation applied, alpha dropped, 16-bit → 8-bit).

    Raises `CorruptImageError(path, reason)` for unreadable, empty, truncated or undecodable files.
    """
    path = Path(path)
    data = _read_bytes(path)
    _check_container(path, data)
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None or image.size == 0:
        raise CorruptImageError(path, "not decodable as an image")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def image_size(path: str | Path) -> tuple[int, int]:
    """(h, w) of an image as `load_image` would return it (EXIF orientation applied), read from the header.

    Uses Pillow's lazy header parsing (no pixel decode); a 90°/270° EXIF orientation swaps h and w.
    """
    path = Path(path)
    try:
        with Image.open(path) as im:
            w, h = im.size
            orientation = im.getexif().get(0x0112, 1)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise CorruptImageError(path, f"unreadable header ({exc})") from exc
    if orientation in (5, 6, 7, 8):
        h, w = w, h
    return int(h), int(w)


def verify_image(path: str | Path) -> tuple[int, int]:
    """Fully decode `path` (as training will) and return its (h, w); raises `CorruptImageError`."""
    image = load_image(path)
    return int(image.shape[0]), int(image.shape[1])
