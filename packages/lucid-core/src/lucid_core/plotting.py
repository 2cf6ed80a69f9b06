"""OpenCV drawing of one image's detections (boxes, labels, masks, rotated boxes, skeletons) and mask outlines.

What is drawn follows the fields the detections carry, never the task name. Colours depend on the class index
only (on the track ID when the detections are tracked), from the 20-colour palette lucid-viz uses. Everything
works on H×W×3 uint8 BGR arrays (what OpenCV reads and writes). Needs OpenCV: the ``lucid-core[video]`` extra.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from lucid_core.atomic import atomic_write_bytes
from lucid_core.geometry.rotated import rboxes_to_polygons

if TYPE_CHECKING:  # results.py imports this module lazily; no runtime import back
    from lucid_core.results import Detections

try:
    import cv2
except ImportError as exc:  # optional: the `video` extra
    raise ModuleNotFoundError(
        "drawing results needs OpenCV: pip install 'lucid-core[video]'", name="cv2"
    ) from exc

__all__ = ["COCO_SKELETON", "PALETTE_BGR", "color", "draw_detections", "mask_polygons", "write_image"]

_PALETTE_HEX = (
    "ff3838", "2c99a8", "ff9d1f", "1f5cff", "48f90a", "cb38ff", "ffd21f", "00c2ff", "ff37c7", "1a9334",
    "8438ff", "00d4bb", "ff7060", "3d2fb0", "b7e000", "a52a6e", "ff8000", "0071a8", "6ee07b", "c46a00",
)  # fmt: skip
#: the class colours of ``lucid_viz.colors.PALETTE``, as BGR 0..255
PALETTE_BGR: tuple[tuple[int, int, int], ...] = tuple(
    (int(h[4:6], 16), int(h[2:4], 16), int(h[0:2], 16)) for h in _PALETTE_HEX
)

#: the 19 edges of the COCO person skeleton, 0-based keypoint indices (drawn when K == 17)
COCO_SKELETON: tuple[tuple[int, int], ...] = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7), (6, 8),
    (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip


def color(index: int) -> tuple[int, int, int]:
    """BGR colour of class (or track) ``index``: ``PALETTE_BGR[index % 20]``."""
    return PALETTE_BGR[int(index) % len(PALETTE_BGR)]


def mask_polygons(masks: NDArray[np.bool_]) -> list[NDArray[np.float32]]:
    """The largest outer contour of each (H, W) mask of ``masks`` (N, H, W) as (P, 2) float32 pixel coordinates
    (OpenCV's ``findContours``, simple chain approximation); (0, 2) for an empty mask."""
    out: list[NDArray[np.float32]] = []
    for mask in np.asarray(masks, dtype=bool):
        rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
        if rows.size == 0:
            out.append(np.zeros((0, 2), np.float32))
            continue
        top, left = int(rows[0]), int(cols[0])
        crop = np.ascontiguousarray(mask[top : int(rows[-1]) + 1, left : int(cols[-1]) + 1], dtype=np.uint8)
        contours, _ = cv2.findContours(crop, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE, offset=(left, top))
        best = max(contours, key=lambda c: (cv2.contourArea(c), len(c)))
        out.append(best.reshape(-1, 2).astype(np.float32))
    return out


def _text_color(bgr: tuple[int, int, int]) -> tuple[int, int, int]:
    b, g, r = bgr
    return (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 150 else (255, 255, 255)


def _label(
    image: NDArray[np.uint8],
    text: str,
    x: int,
    y: int,
    bgr: tuple[int, int, int],
    font_scale: float,
    thickness: int,
) -> None:
    """``text`` on a filled box of colour ``bgr`` above (x, y), or below it when there is no room above."""
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, thickness)
    h, w = image.shape[:2]
    x = min(max(x, 0), max(w - tw, 0))
    top = y - th - base - 2 if y - th - base - 2 >= 0 else min(y, max(h - th - base - 2, 0))
    cv2.rectangle(image, (x, top), (x + tw + 2, top + th + base + 2), bgr, -1)
    cv2.putText(
        image,
        text,
        (x + 1, top + th + 1),
        cv2.FONT_HERSHEY_SIMPLEX,
        font_scale,
        _text_color(bgr),
        thickness,
        cv2.LINE_AA,
    )


def draw_detections(
    image: NDArray[np.uint8],
    detections: Detections,
    *,
    names: Mapping[int, str] | Sequence[str] | None = None,
    boxes: bool = True,
    labels: bool = True,
    conf: bool = True,
    masks: bool = True,
    keypoints: bool = True,
    line_width: int | None = None,
    font_scale: float | None = None,
    mask_alpha: float = 0.45,
    keypoint_threshold: float = 0.5,
    skeleton: Sequence[tuple[int, int]] | None = None,
) -> NDArray[np.uint8]:
    """A copy of ``image`` (H×W×3 uint8 BGR) with ``detections`` (pixels of that image) drawn.

    Masks are blended at ``mask_alpha`` (highest score on top); rotated boxes are drawn as their rectangle, other
    detections as their box; labels read ``"<name> <score>"`` (``"#<id> ..."`` when tracked). Keypoints scoring
    at least ``keypoint_threshold`` are dots, joined by ``skeleton`` (default: COCO's when K == 17, else none).
    ``line_width`` defaults to about 0.3 % of the image size (at least 2 px).
    """
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(
            f"draw_detections: expected an H×W×3 uint8 BGR image, got {image.shape} {image.dtype}"
        )
    out = np.ascontiguousarray(image).copy()
    h, w = out.shape[:2]
    det = detections.to("cpu")
    n = len(det)
    if n == 0:
        return out
    lw = line_width or max(round((h + w) / 2 * 0.003), 2)
    fs = font_scale if font_scale is not None else max(lw / 3, 0.35)
    ft = max(lw - 1, 1)
    lookup: Mapping[int, str] = dict(enumerate(names)) if isinstance(names, Sequence) else (names or {})
    class_ids = det.labels.tolist()
    ids = det.ids.tolist() if det.ids is not None else None
    colours = [color(ids[i] if ids is not None else class_ids[i]) for i in range(n)]
    order = np.argsort(det.scores.numpy(), kind="stable")  # ascending: the best is drawn last (on top)

    if masks and det.masks is not None:
        m = det.masks.numpy().astype(bool)
        if m.shape[1:] != (h, w):
            m = (
                np.stack([cv2.resize(x.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) for x in m])
                > 0
            )
        top = np.zeros((h, w), np.int32)  # 1 + rank by score of the mask drawn at each pixel, 0 = none
        for rank, i in enumerate(order, start=1):
            rows, cols = np.flatnonzero(m[i].any(1)), np.flatnonzero(m[i].any(0))
            if rows.size:
                window = np.s_[int(rows[0]) : int(rows[-1]) + 1, int(cols[0]) : int(cols[-1]) + 1]
                top[window][m[i][window]] = rank
        if top.any():
            lut = np.array([(0, 0, 0), *(colours[i] for i in order)], dtype=np.uint8)
            blended = cv2.addWeighted(out, 1.0 - mask_alpha, lut[top], mask_alpha, 0.0)
            cv2.copyTo(blended, (top > 0).astype(np.uint8), out)

    xyxy = det.boxes.numpy()
    corners = rboxes_to_polygons(det.rboxes.double()).numpy() if det.rboxes is not None else None
    if boxes:
        for i in order:
            if corners is not None:
                pts = np.round(corners[i]).astype(np.int32).reshape(-1, 1, 2)
                cv2.polylines(out, [pts], True, colours[i], lw, cv2.LINE_AA)
            else:
                x1, y1, x2, y2 = np.rint(xyxy[i]).astype(np.int64).tolist()
                cv2.rectangle(out, (x1, y1), (x2, y2), colours[i], lw, cv2.LINE_AA)

    if keypoints and det.keypoints is not None:
        kpts = det.keypoints.numpy()
        k = kpts.shape[1]
        edges = skeleton if skeleton is not None else (COCO_SKELETON if k == 17 else ())
        radius = max(lw + 1, 3)
        for i in order:
            visible = kpts[i, :, 2] >= keypoint_threshold
            pts = [(x, y) for x, y in np.rint(kpts[i, :, :2]).astype(np.int64).tolist()]
            for a, b in edges:
                if a < k and b < k and visible[a] and visible[b]:
                    cv2.line(out, pts[a], pts[b], colours[i], max(lw // 2, 1), cv2.LINE_AA)
            for j in range(k):
                if visible[j]:
                    cv2.circle(out, pts[j], radius, color(j), -1, cv2.LINE_AA)

    if labels:
        scores = det.scores.tolist()
        for i in order:
            text = lookup.get(class_ids[i], str(class_ids[i]))
            if ids is not None:
                text = f"#{ids[i]} {text}"
            if conf:
                text = f"{text} {scores[i]:.2f}"
            if corners is not None:
                x, y = corners[i][:, 0].min(), corners[i][:, 1].min()
            else:
                x, y = xyxy[i][0], xyxy[i][1]
            _label(out, text, int(np.rint(x)), int(np.rint(y)), colours[i], fs, ft)
    return out


def write_image(path: str | os.PathLike[str], image: NDArray[np.uint8]) -> Path:
    """Encode ``image`` (BGR) in the format of ``path``'s suffix (JPEG without one) and write it atomically."""
    target = Path(path)
    ok, encoded = cv2.imencode(target.suffix or ".jpg", image)
    if not ok:
        raise OSError(f"{target}: OpenCV cannot encode an image as {target.suffix or '.jpg'}")
    return atomic_write_bytes(target, encoded.tobytes())
