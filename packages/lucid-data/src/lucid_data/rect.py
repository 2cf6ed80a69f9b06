"""Rectangular validation batches: aspect-sorted batches, each letterboxed to its own stride-aligned shape.

The reference validates with ``rect=True`` (docs/TRAINING.md, "Validation protocol"): images are sorted by aspect ratio
``h / w`` and cut into batches of ``batch_size``; batch ``i`` gets the shape (in units of ``imgsz``)

* ``[max_ar, 1]`` when every aspect ratio in it is < 1 (all landscape),
* ``[1, 1 / min_ar]`` when every aspect ratio in it is > 1 (all portrait),
* ``[1, 1]`` otherwise,

and its network input is ``ceil(shape · imgsz / stride + pad) · stride`` pixels (h, w) with ``pad = 0.5``: a
stride-aligned rectangle at least half a stride larger than the resized image. Each image is resized so its long side
is ``imgsz`` and padded (centred, never up-scaled again) to its batch's shape (:func:`rect_letterbox`), so a batch
holds much less padding than square letterboxes while boxes still map back to original pixels.
:class:`RectBatchSampler` yields those batches, optionally sharded over DDP ranks (whole batches, so an image's
input shape does not depend on the world size).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from torch.utils.data import Sampler

__all__ = ["RectBatchSampler", "RectBatches", "rect_batches", "rect_letterbox"]

DEFAULT_STRIDE = 32
DEFAULT_PAD = 0.5


@dataclass(frozen=True)
class RectBatches:
    """Aspect-sorted batches of dataset indices and the (h, w) network input of each batch."""

    batches: tuple[tuple[int, ...], ...]
    shapes: tuple[tuple[int, int], ...]

    def shape_of(self) -> dict[int, tuple[int, int]]:
        """Dataset index → its batch's (h, w)."""
        return {i: shape for batch, shape in zip(self.batches, self.shapes, strict=True) for i in batch}


def rect_batches(
    sizes_hw: Sequence[tuple[int, int]],
    batch_size: int,
    imgsz: int,
    *,
    stride: int = DEFAULT_STRIDE,
    pad: float = DEFAULT_PAD,
) -> RectBatches:
    """Sort images by ``h / w`` (stable, so equal ratios keep dataset order), batch them, compute each shape.

    ``sizes_hw`` are the original (h, w) of the dataset's images in index order. See the module docstring for the
    shape rule.
    """
    if batch_size < 1:
        raise ValueError(f"rect_batches: batch_size must be >= 1, got {batch_size}")
    if imgsz < 1 or stride < 1:
        raise ValueError(f"rect_batches: imgsz and stride must be >= 1, got {imgsz} and {stride}")
    if not sizes_hw:
        return RectBatches((), ())
    sizes = np.asarray(sizes_hw, dtype=np.float64).reshape(-1, 2)
    if (sizes <= 0).any():
        bad = int(np.nonzero((sizes <= 0).any(1))[0][0])
        raise ValueError(
            f"rect_batches: image {bad} has size {tuple(sizes_hw[bad])}; expected positive (h, w)"
        )
    aspect = sizes[:, 0] / sizes[:, 1]
    order = np.argsort(aspect, kind="stable")
    batches: list[tuple[int, ...]] = []
    shapes: list[tuple[int, int]] = []
    for start in range(0, len(order), batch_size):
        members = order[start : start + batch_size]
        ratios = aspect[members]
        low, high = float(ratios.min()), float(ratios.max())
        if high < 1:
            unit = (high, 1.0)
        elif low > 1:
            unit = (1.0, 1.0 / low)
        else:
            unit = (1.0, 1.0)
        shape = tuple(math.ceil(u * imgsz / stride + pad) * stride for u in unit)
        batches.append(tuple(int(i) for i in members))
        shapes.append((shape[0], shape[1]))
    return RectBatches(tuple(batches), tuple(shapes))


def rect_letterbox(
    image: np.ndarray, imgsz: int, shape_hw: tuple[int, int], fill: int = 114
) -> tuple[np.ndarray, tuple[int, int], tuple[int, int, int, int]]:
    """Resize ``image`` (HWC uint8) so its long side is ``imgsz``, then pad it centred to ``shape_hw``.

    The resize is the reference's load step: ``(min(ceil(w0·r), imgsz), min(ceil(h0·r), imgsz))`` with
    ``r = imgsz / max(h0, w0)``, ``cv2.INTER_AREA`` when shrinking and ``INTER_LINEAR`` when enlarging; the
    letterbox after it never scales up (``scaleup=False``) and splits the padding ``round(d − 0.1)`` before /
    ``round(d + 0.1)`` after (fixtures README "Input pipeline"). Returns the padded image, the resized
    ``(new_w, new_h)`` and ``(top, bottom, left, right)``.
    """
    h0, w0 = image.shape[:2]
    r = imgsz / max(h0, w0)
    new_w, new_h = w0, h0
    if r != 1:
        new_w, new_h = min(math.ceil(w0 * r), imgsz), min(math.ceil(h0 * r), imgsz)
    th, tw = int(shape_hw[0]), int(shape_hw[1])
    fit = min(th / new_h, tw / new_w, 1.0)  # scaleup=False: only shrink if the batch shape were smaller
    if fit < 1:
        new_w, new_h = max(round(new_w * fit), 1), max(round(new_h * fit), 1)
    if (new_w, new_h) != (w0, h0):
        interpolation = cv2.INTER_AREA if new_w < w0 else cv2.INTER_LINEAR
        image = cv2.resize(image, (new_w, new_h), interpolation=interpolation)
    dw, dh = (tw - new_w) / 2, (th - new_h) / 2
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    if top or bottom or left or right:
        image = cv2.copyMakeBorder(
            image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(fill, fill, fill)
        )
    return image, (new_w, new_h), (top, bottom, left, right)


class RectBatchSampler(Sampler[list[int]]):
    """Yields the batches of :class:`RectBatches` in order; rank ``r`` of ``world_size`` takes ``batches[r::world]``.

    Sharding whole batches keeps every image in the batch (and so the input shape) it has on one process; the
    ranks may get one batch more or less (validation needs no equal counts; results are gathered by image id).
    """

    def __init__(self, batches: RectBatches, *, rank: int = 0, world_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        self.batches = batches
        self.rank = rank
        self.world_size = world_size

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.batches.batches[self.rank :: self.world_size]:
            yield list(batch)

    def __len__(self) -> int:
        return len(self.batches.batches[self.rank :: self.world_size])
