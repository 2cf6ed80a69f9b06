"""Random affine / perspective transform of an image and its targets (border fill 114).

Composition (documented reference augmentation, hyper-parameters `degrees`, `translate`, `scale`, `shear`,
`perspective`; defaults 0, 0.1, 0.5, 0, 0): M = T · S · R · P · C with C moving the input centre to the origin,
P a perspective with P[2,0], P[2,1] ~ U(±perspective), R a rotation by U(±degrees) with isotropic scale
U(1 ± scale), S a shear by U(±shear) degrees on both axes and T a translation to U(0.5 ± translate) of the output
size. The output canvas is the input size plus 2·border (border = −imgsz/2 after a 2·imgsz mosaic). Pixels are
warped with cv2.warpAffine (cv2.warpPerspective when perspective ≠ 0), INTER_LINEAR, constant border 114: a
640x640 output from a 640x480 image takes 2.5 ms with cv2 vs 11.0 ms with Pillow's transform and 5.6 ms with
torch grid_sample on one thread (`tools/bench/data.py --libs`).
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from lucid_data.augment.geometry import warp_targets
from lucid_data.targets import Targets

__all__ = ["random_affine", "random_affine_matrix", "source_region", "warp_image"]


def random_affine_matrix(
    rng: np.random.Generator,
    in_hw: tuple[int, int],
    out_hw: tuple[int, int],
    *,
    degrees: float = 0.0,
    translate: float = 0.1,
    scale: float = 0.5,
    shear: float = 0.0,
    perspective: float = 0.0,
) -> np.ndarray:
    """Draw the 3x3 matrix M = T·S·R·P·C (see module docstring); every draw comes from `rng`."""
    c = np.eye(3)
    c[0, 2], c[1, 2] = -in_hw[1] / 2, -in_hw[0] / 2
    p = np.eye(3)
    p[2, 0], p[2, 1] = rng.uniform(-perspective, perspective), rng.uniform(-perspective, perspective)
    angle = rng.uniform(-degrees, degrees)
    s = rng.uniform(1 - scale, 1 + scale)
    r = np.eye(3)
    r[:2] = cv2.getRotationMatrix2D(center=(0, 0), angle=angle, scale=s)
    sh = np.eye(3)
    sh[0, 1] = math.tan(math.radians(rng.uniform(-shear, shear)))
    sh[1, 0] = math.tan(math.radians(rng.uniform(-shear, shear)))
    t = np.eye(3)
    t[0, 2] = rng.uniform(0.5 - translate, 0.5 + translate) * out_hw[1]
    t[1, 2] = rng.uniform(0.5 - translate, 0.5 + translate) * out_hw[0]
    return t @ sh @ r @ p @ c


def random_affine(
    image: np.ndarray,
    targets: Targets,
    rng: np.random.Generator,
    *,
    out_hw: tuple[int, int],
    degrees: float = 0.0,
    translate: float = 0.1,
    scale: float = 0.5,
    shear: float = 0.0,
    perspective: float = 0.0,
    fill: int = 114,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, Targets]:
    """Warp `image` (HWC uint8) and `targets` with a random matrix onto an `out_hw` canvas; filter degenerates.

    ``out``: a buffer of the output's shape (and the image's channel count) to warp into (see `warp_image`).
    """
    m = random_affine_matrix(
        rng,
        image.shape[:2],
        out_hw,
        degrees=degrees,
        translate=translate,
        scale=scale,
        shear=shear,
        perspective=perspective,
    )
    warped = warp_image(image, m, out_hw, fill=fill, perspective=bool(perspective), out=out)
    return warped, warp_targets(targets, m, out_hw)


def source_region(
    matrix: np.ndarray, out_hw: tuple[int, int], in_hw: tuple[int, int], *, margin: int = 3
) -> tuple[int, int, int, int]:
    """The part ``(x0, y0, x1, y1)`` of an ``in_hw`` image that warping it by ``matrix`` onto ``out_hw`` reads.

    An affine map sends the output rectangle's preimage to a parallelogram: its bounding box, widened by
    ``margin`` pixels (the bilinear neighbour and OpenCV's 1/32-pixel fixed-point coordinates need one), cut to
    the image. Pixels outside it never reach the output, so a caller may leave them unwritten (the pipeline's
    mosaic canvas). A perspective matrix gives the whole image (its preimage need not be bounded).
    """
    h, w = int(in_hw[0]), int(in_hw[1])
    m = np.asarray(matrix, dtype=np.float64)
    if m[2, 0] or m[2, 1] or m[2, 2] != 1:
        return 0, 0, w, h
    oh, ow = float(out_hw[0]), float(out_hw[1])
    corners = np.array([[0.0, 0.0], [ow, 0.0], [0.0, oh], [ow, oh]])
    inv = np.linalg.inv(m)
    pts = corners @ inv[:2, :2].T + inv[:2, 2]
    x0 = max(math.floor(pts[:, 0].min()) - margin, 0)
    y0 = max(math.floor(pts[:, 1].min()) - margin, 0)
    x1 = min(math.ceil(pts[:, 0].max()) + margin, w)
    y1 = min(math.ceil(pts[:, 1].max()) + margin, h)
    return x0, y0, max(x1, x0), max(y1, y0)


def warp_image(
    image: np.ndarray,
    matrix: np.ndarray,
    out_hw: tuple[int, int],
    *,
    fill: int = 114,
    perspective: bool | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``image`` warped by the 3x3 ``matrix`` onto an ``out_hw`` canvas (INTER_LINEAR, constant border ``fill``).

    A 3-channel uint8 image is warped as RGBA (an opaque alpha appended, dropped after): OpenCV's 4-channel
    bilinear path computes every channel with the same fixed-point weights, so the RGB bytes are identical
    (tested, `tests/data/test_data_cache.py`), and it is ~2x faster than the 3-channel path for a 640x640 output
    of a 1280x1280 mosaic (`tools/bench/data.py`). ``perspective`` picks cv2.warpPerspective (default: when the
    matrix's last row is not (0, 0, 1)). ``out`` (same channel count as ``image``, ``out_hw`` rows and columns)
    receives the warp instead of a new array; 4-channel images (the pipeline's RGBA mosaic) are warped as they are.
    """
    dsize = (int(out_hw[1]), int(out_hw[0]))
    rgba = image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.uint8 and out is None
    source = cv2.cvtColor(image, cv2.COLOR_RGB2RGBA) if rgba else image
    channels = source.shape[2] if source.ndim == 3 else 1
    border = (fill,) * min(channels, 4)
    if perspective is None:
        perspective = bool(matrix[2, 0] or matrix[2, 1] or matrix[2, 2] != 1)
    if perspective:
        warped = cv2.warpPerspective(
            source, matrix, dsize=dsize, dst=out, flags=cv2.INTER_LINEAR, borderValue=border
        )
    else:
        warped = cv2.warpAffine(
            source, matrix[:2], dsize=dsize, dst=out, flags=cv2.INTER_LINEAR, borderValue=border
        )
    return cv2.cvtColor(warped, cv2.COLOR_RGBA2RGB) if rgba else warped
