"""COCO run-length encoded masks in numpy: the compressed `counts` string codec, decode/encode, area, bbox.

Format (COCO data format, "Object Instance Annotations", and the COCO API `maskApi` documentation): a mask of
size (h, w) is flattened in column-major (Fortran) order and described by alternating run lengths, starting with
a run of zeros (possibly of length 0). The compressed form stores the runs as an ASCII string: each run (after
the third, minus the run two positions earlier) is written as a little-endian sequence of 5-bit groups, each
group in one character `48 + (group | 0x20 if more groups follow)`, the top data bit (0x10) of the last group
being the sign. Uncompressed RLE has `counts` as a list of ints (used for `iscrowd` annotations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

__all__ = [
    "area",
    "counts_from_string",
    "counts_to_string",
    "decode",
    "encode",
    "polygons_to_mask",
    "to_bbox",
]


def counts_to_string(counts: Sequence[int]) -> str:
    """Compress run lengths into the COCO RLE string."""
    out: list[str] = []
    cnts = [int(c) for c in counts]
    for i, run in enumerate(cnts):
        x = run - cnts[i - 2] if i > 2 else run
        more = True
        while more:
            c = x & 0x1F
            x >>= 5  # arithmetic shift: negative deltas end at -1
            more = x != -1 if c & 0x10 else x != 0
            if more:
                c |= 0x20
            out.append(chr(c + 48))
    return "".join(out)


def counts_from_string(text: str | bytes) -> list[int]:
    """Decompress a COCO RLE string into run lengths."""
    if isinstance(text, bytes):
        text = text.decode("ascii")
    counts: list[int] = []
    p, n = 0, len(text)
    while p < n:
        x, k, more = 0, 0, True
        while more:
            if p >= n:
                raise ValueError(f"RLE string ends inside a run (at character {p})")
            c = ord(text[p]) - 48
            if not 0 <= c < 64:
                raise ValueError(f"RLE string has an invalid character {text[p]!r} at {p}")
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and c & 0x10:
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts


def _counts(rle: dict[str, Any]) -> list[int]:
    counts = rle["counts"]
    if isinstance(counts, (str, bytes)):
        return counts_from_string(counts)
    return [int(c) for c in counts]


def decode(rle: dict[str, Any]) -> np.ndarray:
    """(h, w) bool mask from a COCO RLE dict (`size` [h, w], `counts` string or list)."""
    h, w = (int(v) for v in rle["size"])
    counts = np.asarray(_counts(rle), dtype=np.int64)
    if (counts < 0).any() or int(counts.sum()) != h * w:
        raise ValueError(f"RLE counts sum to {int(counts.sum())} (or are negative) for a {h}x{w} mask")
    values = (np.arange(counts.size) % 2).astype(bool)
    flat = np.repeat(values, counts)
    return flat.reshape(w, h).T.copy()


def encode(mask: np.ndarray) -> dict[str, Any]:
    """Compressed COCO RLE dict (`size`, `counts` str) of an (h, w) mask."""
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 2:
        raise ValueError(f"encode expects an (h, w) mask, got shape {mask.shape}")
    h, w = mask.shape
    flat = mask.T.reshape(-1)
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    edges = np.concatenate([[0], change, [flat.size]])
    runs = np.diff(edges).tolist()
    if flat.size and flat[0]:
        runs = [0, *runs]
    return {"size": [int(h), int(w)], "counts": counts_to_string(runs)}


def area(rle: dict[str, Any]) -> int:
    """Number of foreground pixels."""
    return int(sum(_counts(rle)[1::2]))


def to_bbox(rle: dict[str, Any]) -> list[float]:
    """COCO `[x, y, w, h]` of the foreground pixels (zeros for an empty mask)."""
    mask = decode(rle)
    ys, xs = np.nonzero(mask)
    if xs.size == 0:
        return [0.0, 0.0, 0.0, 0.0]
    x0, y0 = float(xs.min()), float(ys.min())
    return [x0, y0, float(xs.max()) + 1 - x0, float(ys.max()) + 1 - y0]


def polygons_to_mask(polygons: Sequence[np.ndarray], height: int, width: int) -> np.ndarray:
    """Rasterise pixel-coordinate polygons (each (P, 2)) into one (h, w) bool mask (union, cv2.fillPoly)."""
    canvas = np.zeros((height, width), dtype=np.uint8)
    pts = [
        np.round(np.asarray(p, dtype=np.float64).reshape(-1, 2)).astype(np.int32) for p in polygons if len(p)
    ]
    if pts:
        cv2.fillPoly(canvas, pts, 1)
    return canvas.astype(bool)
