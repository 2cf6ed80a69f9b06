"""Still images to BGR uint8 arrays: image files, image URLs, numpy arrays, PIL images and torch tensors.

Every function returns an H×W×3 uint8 array in **BGR** order (OpenCV's, and what ``Results.orig_img`` holds);
the pixels are those the file decoder gives, so converting back to RGB for the network is exact. Files with a
torchvision-decodable extension (:data:`IMAGE_SUFFIXES`) are decoded by ``torchvision.io.decode_image`` with EXIF
orientation applied; the other training extensions (BMP, TIFF, …) by torchvision's PIL loader. For predict,
JPEG files are decoded straight to BGR by OpenCV when it is installed (:func:`read_image_bgr`, the same pixels).
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torchvision.datasets.folder import pil_loader
from torchvision.io import ImageReadMode, decode_image
from torchvision.transforms.functional import pil_to_tensor

from lucid_core.sources.errors import ImageLoadError
from lucid_core.sources.video import optional_cv2

__all__ = [
    "IMAGE_SUFFIXES",
    "JPEG_SUFFIXES",
    "TRAINING_SUFFIXES",
    "URL_TIMEOUT_S",
    "ImageLoadError",
    "array_to_bgr",
    "decode_image_bytes",
    "fetch_url_image",
    "load_image_rgb",
    "pil_to_bgr",
    "read_image_bgr",
    "read_image_file",
    "rgb_chw_to_bgr",
    "tensor_to_bgr",
]

#: JPEG file extensions (:func:`read_image_bgr` decodes them with OpenCV when it is installed).
JPEG_SUFFIXES = frozenset({".jpg", ".jpeg"})
#: what ``torchvision.io.decode_image`` decodes itself.
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".avif", ".heic"})
#: the image extensions lucid-data trains on (``lucid_data.imageio.IMAGE_SUFFIXES``; lucid-core cannot import
#: lucid-data, a test keeps the two equal).
TRAINING_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".dng", ".mpo", ".pfm"}
)
#: seconds an image URL may take to answer.
URL_TIMEOUT_S = 30.0


def _decode(data: str | Tensor, what: str) -> Tensor:
    try:
        with warnings.catch_warnings():  # torchvision >= 0.29 announces a future move to torchcodec
            warnings.simplefilter("ignore", DeprecationWarning)
            image: Tensor = decode_image(data, mode=ImageReadMode.RGB, apply_exif_orientation=True)
    except (RuntimeError, ValueError, OSError) as exc:
        raise ImageLoadError(f"{what}: cannot decode image ({exc})") from exc
    return image


def load_image_rgb(path: str | os.PathLike[str]) -> Tensor:
    """Decode an image file to an RGB uint8 CHW tensor with EXIF orientation applied (torchvision)."""
    return _decode(str(path), str(path))


def read_image_file(path: str | os.PathLike[str]) -> Tensor:
    """RGB uint8 CHW of an image file: torchvision's decoder for :data:`IMAGE_SUFFIXES`, its PIL loader for the
    other formats (BMP, TIFF, …)."""
    if Path(path).suffix.lower() in IMAGE_SUFFIXES:
        return load_image_rgb(path)
    try:
        image: Tensor = pil_to_tensor(pil_loader(str(path)))
    except (OSError, ValueError, SyntaxError) as exc:  # PIL raises these for undecodable files
        raise ImageLoadError(f"{path}: cannot decode image ({exc})") from exc
    return image


def read_image_bgr(path: str | os.PathLike[str]) -> np.ndarray:
    """H×W×3 BGR uint8 of an image file. JPEG files go straight to BGR through OpenCV's decoder when it is
    installed (the ``video`` extra): the pixels of :func:`read_image_file`, EXIF orientation included (a test
    holds the two equal on the shared JPEGs; a CMYK JPEG may differ by one level), without the channel-order copy.
    Other files, and every file without OpenCV or that OpenCV cannot read, go through :func:`read_image_file`."""
    cv2 = optional_cv2() if Path(path).suffix.lower() in JPEG_SUFFIXES else None
    if cv2 is not None:
        image: np.ndarray | None = cv2.imread(os.fspath(path), cv2.IMREAD_COLOR)
        if image is not None and image.ndim == 3 and image.shape[2] == 3:
            return image
    return rgb_chw_to_bgr(read_image_file(path))


def decode_image_bytes(data: bytes, what: str) -> Tensor:
    """RGB uint8 CHW of an encoded image held in memory (JPEG, PNG, WebP, GIF, …); ``what`` names it in errors."""
    if not data:
        raise ImageLoadError(f"{what}: empty image data")
    return _decode(torch.frombuffer(bytearray(data), dtype=torch.uint8), what)


def fetch_url_image(url: str, timeout: float = URL_TIMEOUT_S) -> Tensor:
    """Download the image at an ``http(s)`` ``url`` (only ever because the caller named it) and decode it."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ImageLoadError(f"{url}: cannot download image ({exc})") from exc
    return decode_image_bytes(data, url)


def rgb_chw_to_bgr(image: Tensor) -> np.ndarray:
    """An RGB uint8 CHW tensor (1, 3 or 4 channels) as a contiguous H×W×3 BGR array."""
    if image.ndim == 2:
        image = image[None]
    channels = int(image.shape[0])
    if channels == 1:
        image = image.expand(3, -1, -1)
    elif channels == 4:
        image = image[:3]
    elif channels != 3:
        raise ImageLoadError(f"expected 1, 3 or 4 channels, got {channels}")
    planes = image.cpu().numpy()
    bgr = np.empty((*planes.shape[1:], 3), dtype=np.uint8)
    for channel in range(3):  # one strided pass per plane: faster than a flip followed by a transposing copy
        bgr[..., channel] = planes[2 - channel]
    return bgr


def array_to_bgr(array: np.ndarray, what: str = "array image") -> np.ndarray:
    """A numpy image as OpenCV gives it: H×W×3 BGR, H×W×4 BGRA or H×W gray, uint8 (bool: 0/255)."""
    if array.dtype == np.bool_:
        array = array.astype(np.uint8) * 255
    if array.dtype != np.uint8:
        raise ImageLoadError(f"{what}: expected uint8 pixels, got {array.dtype}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim == 2:
        return np.ascontiguousarray(np.repeat(array[:, :, None], 3, axis=2))
    if array.ndim != 3 or array.shape[2] not in (3, 4):
        raise ImageLoadError(f"{what}: expected H×W, H×W×3 (BGR) or H×W×4 (BGRA), got shape {array.shape}")
    return np.ascontiguousarray(array[:, :, :3])


def pil_to_bgr(image: Any, what: str = "PIL image") -> np.ndarray:
    """A PIL image (any mode; EXIF orientation of an in-memory image is not applied) as H×W×3 BGR."""
    mode = getattr(image, "mode", None)
    if mode not in ("RGB", "L", "RGBA"):
        image = image.convert("RGB")
    try:
        array = np.asarray(image)
    except Exception as exc:
        raise ImageLoadError(f"{what}: cannot convert {type(image).__name__} to an array ({exc})") from exc
    if array.dtype == np.bool_:
        array = array.astype(np.uint8) * 255
    if array.ndim == 2:
        array = array[:, :, None]
    if array.dtype != np.uint8 or array.ndim != 3:
        raise ImageLoadError(f"{what}: expected 8-bit pixels, got {array.dtype} of shape {array.shape}")
    return rgb_chw_to_bgr(torch.from_numpy(np.array(array)).permute(2, 0, 1))


def tensor_to_bgr(image: Tensor, what: str = "tensor image") -> np.ndarray:
    """A CHW RGB tensor as H×W×3 BGR: uint8 pixels as they are, floating-point ones in [0, 1] scaled by 255 and
    rounded (values outside [0, 1] are clipped)."""
    if image.ndim == 2:
        image = image[None]
    if image.ndim != 3:
        raise ImageLoadError(f"{what}: expected a CHW image, got shape {tuple(image.shape)}")
    image = image.detach()
    if image.is_floating_point():
        image = (image.float() * 255).round_().clamp_(0, 255).to(torch.uint8)
    elif image.dtype == torch.bool:
        image = image.to(torch.uint8) * 255
    elif image.dtype != torch.uint8:
        raise ImageLoadError(f"{what}: expected uint8 pixels or floats in [0, 1], got {image.dtype}")
    if int(image.shape[0]) not in (1, 3, 4):
        raise ImageLoadError(f"{what}: expected 1, 3 or 4 channels, got {int(image.shape[0])}")
    return rgb_chw_to_bgr(image)
