"""Per-image detection results: the tensor core :class:`Detections` and the user-facing :class:`Results`.

``Results`` wraps one image's ``Detections`` (original-image pixels) with the image and its metadata. Its views
follow the fields the detections carry, never the task name: ``boxes`` always (the axis-aligned hull for rotated
boxes), ``masks`` / ``keypoints`` / ``obb`` / ``probs`` when ``masks`` / ``keypoints`` / ``rboxes`` / ``probs``
are present. Drawing is :mod:`lucid_core.plotting`; label lines follow what ``lucid_data.readers.yolo`` reads back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from lucid_core.atomic import atomic_write_text
from lucid_core.geometry.rotated import rboxes_to_polygons

__all__ = [
    "OBB",
    "Boxes",
    "Detections",
    "Keypoints",
    "Masks",
    "Probs",
    "Results",
    "mask_to_rle",
    "rle_to_mask",
]

#: a view's arrays: tensors, or NumPy arrays after :meth:`Results.numpy` (typed Any: the mode is a runtime choice)
Array = Any
#: keypoints scoring at least this are written visible (2) by :meth:`Results.save_txt`, the others 0
KEYPOINT_VISIBLE = 0.5


@dataclass
class Detections:
    """Detections of one image; all coordinates in one pixel frame (network input or original image)."""

    boxes: Tensor  # (N, 4) xyxy float32 (axis-aligned hull for rotated boxes)
    scores: Tensor  # (N,) float32
    labels: Tensor  # (N,) int64 contiguous class index
    masks: Tensor | None = None  # (N, H, W) bool
    keypoints: Tensor | None = None  # (N, K, 3) x, y, visibility score
    rboxes: Tensor | None = None  # (N, 5) cx, cy, w, h, theta (radians)
    ids: Tensor | None = None  # (N,) int64 track IDs, set by a tracker
    probs: Tensor | None = None  # (nc,) float32 class probabilities of the whole image (classification)

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    @classmethod
    def empty(cls, device: torch.device | str | None = None) -> Detections:
        return cls(
            boxes=torch.zeros((0, 4), device=device),
            scores=torch.zeros((0,), device=device),
            labels=torch.zeros((0,), dtype=torch.int64, device=device),
        )

    def to(self, device: torch.device | str) -> Detections:
        def mv(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(device)

        return Detections(
            boxes=self.boxes.to(device),
            scores=self.scores.to(device),
            labels=self.labels.to(device),
            masks=mv(self.masks),
            keypoints=mv(self.keypoints),
            rboxes=mv(self.rboxes),
            ids=mv(self.ids),
            probs=mv(self.probs),
        )

    def select(self, rows: Tensor) -> Detections:
        """The rows ``rows`` (int64 indices or a bool mask) of every field."""

        def pick(t: Tensor | None) -> Tensor | None:
            return None if t is None else t[rows.to(t.device)]

        return Detections(
            boxes=self.boxes[rows.to(self.boxes.device)],
            scores=self.scores[rows.to(self.scores.device)],
            labels=self.labels[rows.to(self.labels.device)],
            masks=pick(self.masks),
            keypoints=pick(self.keypoints),
            rboxes=pick(self.rboxes),
            ids=pick(self.ids),
            probs=self.probs,
        )


def mask_to_rle(mask: Tensor) -> dict[str, Any]:
    """Uncompressed COCO-style RLE of a ``(H, W)`` bool mask: run lengths in column-major order, zeros first."""
    flat = mask.t().reshape(-1).to(torch.int8)
    if flat.numel() == 0:
        return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": []}
    change = torch.nonzero(flat[1:] != flat[:-1]).flatten() + 1
    bounds = torch.cat((torch.zeros(1, dtype=torch.int64), change, torch.tensor([flat.numel()])))
    counts = (bounds[1:] - bounds[:-1]).tolist()
    if int(flat[0]) == 1:
        counts = [0, *counts]
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": counts}


def rle_to_mask(rle: Mapping[str, Any]) -> Tensor:
    """The ``(H, W)`` bool mask of an uncompressed RLE written by :func:`mask_to_rle`."""
    h, w = (int(v) for v in rle["size"])
    counts = np.asarray(rle["counts"], dtype=np.int64)
    values = np.arange(len(counts)) % 2 == 1  # runs alternate 0, 1, 0, ...
    flat = np.repeat(values, counts)
    if flat.size != h * w:
        raise ValueError(f"RLE counts sum to {flat.size}, expected {h}x{w} = {h * w}")
    return torch.from_numpy(np.ascontiguousarray(flat.reshape(w, h).T))


def _out(t: Tensor, as_numpy: bool) -> Array:
    return t.detach().cpu().numpy() if as_numpy else t


def _scale(orig_shape: tuple[int, int], like: Tensor, pairs: int) -> Tensor:
    """``(W0, H0) * pairs`` as a tensor like ``like``: divides x, y, x, y, ... coordinates into [0, 1]."""
    h, w = orig_shape
    return torch.tensor([float(w), float(h)] * pairs, dtype=like.dtype, device=like.device)


class Boxes:
    """Axis-aligned boxes (for rotated boxes: their hull), scores, classes and track IDs."""

    def __init__(self, detections: Detections, orig_shape: tuple[int, int], as_numpy: bool = False) -> None:
        self._det = detections
        self.orig_shape = orig_shape
        self._np = as_numpy

    def __len__(self) -> int:
        return len(self._det)

    @property
    def xyxy(self) -> Array:
        """(N, 4) x1, y1, x2, y2 pixels."""
        return _out(self._det.boxes, self._np)

    @property
    def xywh(self) -> Array:
        """(N, 4) centre x, centre y, width, height pixels."""
        b = self._det.boxes
        return _out(torch.cat(((b[:, :2] + b[:, 2:]) / 2, b[:, 2:] - b[:, :2]), 1), self._np)

    @property
    def xyxyn(self) -> Array:
        """(N, 4) ``xyxy`` divided by the image width/height."""
        b = self._det.boxes
        return _out(b / _scale(self.orig_shape, b, 2), self._np)

    @property
    def xywhn(self) -> Array:
        """(N, 4) ``xywh`` divided by the image width/height."""
        b = self._det.boxes
        xywh = torch.cat(((b[:, :2] + b[:, 2:]) / 2, b[:, 2:] - b[:, :2]), 1)
        return _out(xywh / _scale(self.orig_shape, b, 2), self._np)

    @property
    def conf(self) -> Array:
        """(N,) scores."""
        return _out(self._det.scores, self._np)

    @property
    def cls(self) -> Array:
        """(N,) int64 class indices."""
        return _out(self._det.labels, self._np)

    @property
    def id(self) -> Array | None:
        """(N,) int64 track IDs, or None when the detections were not tracked."""
        return None if self._det.ids is None else _out(self._det.ids, self._np)

    @property
    def data(self) -> Array:
        """(N, 6) float ``x1, y1, x2, y2, conf, cls``; (N, 7) ``x1, y1, x2, y2, id, conf, cls`` when tracked."""
        d = self._det
        cols = [d.boxes, d.scores[:, None].to(d.boxes.dtype), d.labels[:, None].to(d.boxes.dtype)]
        if d.ids is not None:
            cols.insert(1, d.ids[:, None].to(d.boxes.dtype))
        return _out(torch.cat(cols, 1), self._np)


class Masks:
    """Instance masks (N, H, W) bool and their outlines (``xy``: the largest outer contour of each mask)."""

    def __init__(self, masks: Tensor, orig_shape: tuple[int, int], as_numpy: bool = False) -> None:
        self._masks = masks
        self.orig_shape = orig_shape
        self._np = as_numpy

    def __len__(self) -> int:
        return int(self._masks.shape[0])

    @property
    def data(self) -> Array:
        """(N, H, W) bool masks (original-image size)."""
        return _out(self._masks, self._np)

    @cached_property
    def xy(self) -> list[NDArray[np.float32]]:
        """One (P, 2) float32 polygon per mask in pixels ((0, 2) for an empty mask); needs OpenCV."""
        # lucid_core.plotting holds the optional OpenCV import (the `video` extra)
        from lucid_core.plotting import mask_polygons

        polygons = mask_polygons(self._masks.detach().cpu().numpy())
        h0, w0 = self.orig_shape
        mh, mw = int(self._masks.shape[1]), int(self._masks.shape[2])
        if (mh, mw) != (h0, w0):  # masks at another resolution: outline in original pixels
            gain = np.array([w0 / max(mw, 1), h0 / max(mh, 1)], dtype=np.float32)
            polygons = [p * gain for p in polygons]
        return polygons

    @property
    def xyn(self) -> list[NDArray[np.float32]]:
        """:attr:`xy` divided by the image width/height."""
        h0, w0 = self.orig_shape
        scale = np.array([w0, h0], dtype=np.float32)
        return [p / scale for p in self.xy]


class Keypoints:
    """Keypoints (N, K, 3): x, y pixels and a visibility score."""

    def __init__(self, keypoints: Tensor, orig_shape: tuple[int, int], as_numpy: bool = False) -> None:
        self._kpts = keypoints
        self.orig_shape = orig_shape
        self._np = as_numpy

    def __len__(self) -> int:
        return int(self._kpts.shape[0])

    @property
    def data(self) -> Array:
        """(N, K, 3) x, y, score."""
        return _out(self._kpts, self._np)

    @property
    def xy(self) -> Array:
        """(N, K, 2) pixels."""
        return _out(self._kpts[..., :2], self._np)

    @property
    def xyn(self) -> Array:
        """(N, K, 2) divided by the image width/height."""
        xy = self._kpts[..., :2]
        return _out(xy / _scale(self.orig_shape, xy, 1), self._np)

    @property
    def conf(self) -> Array:
        """(N, K) visibility scores."""
        return _out(self._kpts[..., 2], self._np)


class OBB:
    """Rotated boxes: ``xywhr`` (cx, cy, w, h, θ radians), their corners, scores, classes and track IDs."""

    def __init__(self, detections: Detections, orig_shape: tuple[int, int], as_numpy: bool = False) -> None:
        assert detections.rboxes is not None
        self._det = detections
        self._rboxes: Tensor = detections.rboxes
        self.orig_shape = orig_shape
        self._np = as_numpy

    def __len__(self) -> int:
        return len(self._det)

    @property
    def xywhr(self) -> Array:
        """(N, 5) cx, cy, w, h pixels, θ radians."""
        return _out(self._rboxes, self._np)

    @property
    def xyxyxyxy(self) -> Array:
        """(N, 4, 2) corners in pixels (``lucid_core.geometry.rotated.rboxes_to_polygons`` order)."""
        return _out(rboxes_to_polygons(self._rboxes), self._np)

    @property
    def xyxyxyxyn(self) -> Array:
        """(N, 4, 2) corners divided by the image width/height."""
        corners = rboxes_to_polygons(self._rboxes)
        return _out(corners / _scale(self.orig_shape, corners, 1), self._np)

    @property
    def xyxy(self) -> Array:
        """(N, 4) axis-aligned hull of each rotated box."""
        return _out(self._det.boxes, self._np)

    @property
    def conf(self) -> Array:
        return _out(self._det.scores, self._np)

    @property
    def cls(self) -> Array:
        return _out(self._det.labels, self._np)

    @property
    def id(self) -> Array | None:
        return None if self._det.ids is None else _out(self._det.ids, self._np)


def _rows(index: int | slice | Sequence[int] | Tensor | NDArray[Any], n: int) -> Tensor:
    """Row indices (int64) or a bool mask selecting ``index`` out of ``n`` rows."""
    if isinstance(index, int):
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for {n} detections")
        return torch.tensor([index % n], dtype=torch.int64)
    if isinstance(index, slice):
        return torch.arange(n, dtype=torch.int64)[index]
    rows = torch.as_tensor(np.asarray(index) if not isinstance(index, Tensor) else index)
    return rows if rows.dtype == torch.bool else rows.to(torch.int64).reshape(-1)


def _format(values: Sequence[float] | NDArray[Any]) -> str:
    return " ".join(f"{float(v):.6f}" for v in np.asarray(values, dtype=np.float64).reshape(-1))


class Probs:
    """Class probabilities of one image (classification): ``data`` (nc,), ``top1``/``top5`` class indices,
    ``top1conf``/``top5conf`` their probabilities (top-5: the up to five best, most probable first)."""

    def __init__(self, probs: Tensor, as_numpy: bool = False) -> None:
        self._data = probs
        self._np = as_numpy

    def __len__(self) -> int:
        return int(self._data.shape[0])

    @property
    def data(self) -> Array:
        return _out(self._data, self._np)

    @property
    def top1(self) -> int:
        return int(self._data.argmax())

    @property
    def top5(self) -> list[int]:
        return [int(i) for i in self._data.topk(min(5, len(self))).indices]

    @property
    def top1conf(self) -> Array:
        return _out(self._data.max(), self._np)

    @property
    def top5conf(self) -> Array:
        return _out(self._data.topk(min(5, len(self))).values, self._np)


class Results:
    """The detections of one image or video frame, in original-image pixels, with views, drawing and saving.

    ``detections`` must be in the frame of ``orig_shape`` (H0, W0). ``orig_img`` is the H0×W0×3 uint8 BGR image
    (None when not kept: ``plot``/``save``/``save_crop`` then need an ``img``). ``names`` maps class index to
    name. ``speed`` holds milliseconds under ``preprocess``, ``inference``, ``postprocess``. ``probs`` is the
    class-probability view of a classifier's image (None for the other tasks).
    """

    def __init__(
        self,
        detections: Detections,
        *,
        names: Sequence[str] | Mapping[int, str],
        orig_img: NDArray[np.uint8] | None,
        orig_shape: tuple[int, int],
        path: str | None = None,
        frame: int | None = None,
        speed: Mapping[str, float] | None = None,
        task: str | None = None,
    ) -> None:
        if orig_img is not None and tuple(orig_img.shape[:2]) != tuple(orig_shape):
            raise ValueError(
                f"Results: orig_img is {orig_img.shape[0]}x{orig_img.shape[1]} but orig_shape is "
                f"{orig_shape[0]}x{orig_shape[1]}"
            )
        self.detections = detections
        self.names: dict[int, str] = dict(names) if isinstance(names, Mapping) else dict(enumerate(names))
        self.orig_img = orig_img
        self.orig_shape: tuple[int, int] = (int(orig_shape[0]), int(orig_shape[1]))
        self.path = path
        self.frame = frame
        self.speed: dict[str, float] = dict(speed) if speed is not None else {}
        self.task = task
        self._np = False

    # -- views ---------------------------------------------------------------------------------------------------

    @cached_property
    def boxes(self) -> Boxes:
        return Boxes(self.detections, self.orig_shape, self._np)

    @cached_property
    def masks(self) -> Masks | None:
        m = self.detections.masks
        return None if m is None else Masks(m, self.orig_shape, self._np)

    @cached_property
    def keypoints(self) -> Keypoints | None:
        k = self.detections.keypoints
        return None if k is None else Keypoints(k, self.orig_shape, self._np)

    @cached_property
    def obb(self) -> OBB | None:
        return None if self.detections.rboxes is None else OBB(self.detections, self.orig_shape, self._np)

    @cached_property
    def probs(self) -> Probs | None:
        p = self.detections.probs
        return None if p is None else Probs(p, self._np)

    def __len__(self) -> int:
        return len(self.detections)

    def __getitem__(self, index: int | slice | Sequence[int] | Tensor | NDArray[Any]) -> Results:
        """A Results holding the selected detections (an int keeps one row)."""
        rows = _rows(index, len(self))
        return self._new(self.detections.select(rows))

    def __repr__(self) -> str:
        where = (self.path or "image") + (f" frame {self.frame}" if self.frame is not None else "")
        return f"Results({where}: {self.orig_shape[0]}x{self.orig_shape[1]}, {self.describe()})"

    def _new(self, detections: Detections, *, as_numpy: bool | None = None) -> Results:
        out = Results(
            detections,
            names=self.names,
            orig_img=self.orig_img,
            orig_shape=self.orig_shape,
            path=self.path,
            frame=self.frame,
            speed=self.speed,
            task=self.task,
        )
        out._np = self._np if as_numpy is None else as_numpy
        return out

    def cpu(self) -> Results:
        """The same results with every tensor on the CPU."""
        return self._new(self.detections.to("cpu"))

    def to(self, device: torch.device | str) -> Results:
        """The same results with every tensor on ``device``."""
        return self._new(self.detections.to(device))

    def numpy(self) -> Results:
        """The same results whose views return NumPy arrays (``detections`` stays tensors, on the CPU)."""
        return self._new(self.detections.to("cpu"), as_numpy=True)

    # -- text ----------------------------------------------------------------------------------------------------

    def name(self, label: int) -> str:
        """Class name of ``label`` (its index as text when unnamed)."""
        return self.names.get(int(label), str(int(label)))

    def describe(self) -> str:
        """Counts per class, most frequent first: ``"4 person, 1 bus"`` (``"no detections"`` when empty)."""
        if len(self) == 0:
            return "no detections"
        labels, counts = torch.unique(self.detections.labels.cpu(), return_counts=True)
        order = sorted(zip(counts.tolist(), labels.tolist(), strict=True), key=lambda p: (-p[0], p[1]))
        return ", ".join(f"{n} {self.name(c)}" for n, c in order)

    def summary(self) -> list[dict[str, Any]]:
        """One JSON-ready record per detection (original pixels): ``box``, ``score``, ``label``, ``name``, and
        ``id``, ``keypoints`` ([x, y, score] per keypoint), ``rbox`` + ``polygon`` (4 corners), ``mask``
        (:func:`mask_to_rle`) where the detections carry them."""
        det = self.detections.to("cpu")
        polygons = rboxes_to_polygons(det.rboxes) if det.rboxes is not None else None
        records: list[dict[str, Any]] = []
        for i in range(len(det)):
            label = int(det.labels[i])
            rec: dict[str, Any] = {
                "box": [float(v) for v in det.boxes[i]],
                "score": float(det.scores[i]),
                "label": label,
                "name": self.name(label),
            }
            if det.ids is not None:
                rec["id"] = int(det.ids[i])
            if det.keypoints is not None:
                rec["keypoints"] = det.keypoints[i].tolist()
            if det.rboxes is not None and polygons is not None:
                rec["rbox"] = det.rboxes[i].tolist()
                rec["polygon"] = polygons[i].tolist()
            if det.masks is not None:
                rec["mask"] = mask_to_rle(det.masks[i])
            records.append(rec)
        return records

    def to_dict(self) -> dict[str, Any]:
        """The image's metadata and :meth:`summary` records (what :meth:`to_json` serialises); a classifier's
        image also has ``probs``: ``data`` (every class probability), ``top1``, ``top1_name``, ``top1conf``,
        ``top5``, ``top5conf``."""
        data: dict[str, Any] = {
            "path": self.path,
            "frame": self.frame,
            "orig_shape": list(self.orig_shape),
            "task": self.task,
            "speed": self.speed,
            "detections": self.summary(),
        }
        if self.detections.probs is not None:
            probs = Probs(self.detections.probs.detach().float().cpu())
            data["probs"] = {
                "data": [float(v) for v in probs._data],
                "top1": probs.top1,
                "top1_name": self.name(probs.top1),
                "top1conf": float(probs.top1conf),
                "top5": probs.top5,
                "top5conf": [float(v) for v in probs.top5conf],
            }
        return data

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON (one line when ``indent`` is None: a JSONL line); :meth:`from_json` reads it."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        names: Sequence[str] | Mapping[int, str] | None = None,
        orig_img: NDArray[np.uint8] | None = None,
    ) -> Results:
        """Rebuild a Results from :meth:`to_dict` (names default to those of the records)."""
        records = list(data["detections"])
        orig_shape = (int(data["orig_shape"][0]), int(data["orig_shape"][1]))
        det = Detections(
            boxes=torch.tensor([r["box"] for r in records], dtype=torch.float32).reshape(-1, 4),
            scores=torch.tensor([r["score"] for r in records], dtype=torch.float32).reshape(-1),
            labels=torch.tensor([r["label"] for r in records], dtype=torch.int64).reshape(-1),
        )
        if records and "id" in records[0]:
            det.ids = torch.tensor([r["id"] for r in records], dtype=torch.int64)
        if records and "keypoints" in records[0]:
            det.keypoints = torch.tensor([r["keypoints"] for r in records], dtype=torch.float32)
        if records and "rbox" in records[0]:
            det.rboxes = torch.tensor([r["rbox"] for r in records], dtype=torch.float32).reshape(-1, 5)
        if records and "mask" in records[0]:
            det.masks = torch.stack([rle_to_mask(r["mask"]) for r in records])
        if data.get("probs") is not None:
            det.probs = torch.tensor(data["probs"]["data"], dtype=torch.float32)
        if names is None:
            names = {int(r["label"]): str(r["name"]) for r in records}
        return cls(
            det,
            names=names,
            orig_img=orig_img,
            orig_shape=orig_shape,
            path=data.get("path"),
            frame=data.get("frame"),
            speed=data.get("speed"),
            task=data.get("task"),
        )

    @classmethod
    def from_json(
        cls,
        text: str,
        *,
        names: Sequence[str] | Mapping[int, str] | None = None,
        orig_img: NDArray[np.uint8] | None = None,
    ) -> Results:
        """Rebuild a Results from :meth:`to_json` text."""
        return cls.from_dict(json.loads(text), names=names, orig_img=orig_img)

    def to_df(self) -> Any:
        """A pandas DataFrame, one row per detection: ``name``, ``label``, ``score``, ``x1 y1 x2 y2`` and, where
        present, ``id``, ``cx cy w h theta`` (rotated boxes) and ``keypoints`` (a K×3 list). Needs pandas."""
        try:  # optional: pandas is not a dependency of lucid-core
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "Results.to_df needs pandas (pip install 'lucid-core[pandas]' or pip install pandas)"
            ) from exc
        det = self.detections.to("cpu")
        columns: dict[str, Any] = {
            "name": [self.name(int(c)) for c in det.labels],
            "label": det.labels.numpy(),
            "score": det.scores.numpy(),
        }
        for j, key in enumerate(("x1", "y1", "x2", "y2")):
            columns[key] = det.boxes[:, j].numpy()
        if det.ids is not None:
            columns["id"] = det.ids.numpy()
        if det.rboxes is not None:
            for j, key in enumerate(("cx", "cy", "w", "h", "theta")):
                columns[key] = det.rboxes[:, j].numpy()
        if det.keypoints is not None:
            columns["keypoints"] = det.keypoints.tolist()
        return pd.DataFrame(columns)

    # -- files ---------------------------------------------------------------------------------------------------

    def label_lines(self, *, save_conf: bool = False) -> list[str]:
        """YOLO label lines, coordinates normalised by the image size, the format chosen by the fields present:
        keypoints ``cls cx cy w h`` + K·``x y v`` (v = 2 where the score is at least 0.5, else 0); rotated boxes
        ``cls`` + 4 corners; masks ``cls`` + the polygon of :attr:`Masks.xyn` (skipped when empty); otherwise
        ``cls cx cy w h``. ``save_conf`` appends the score (such a file is not a training label)."""
        det = self.detections.to("cpu")
        h0, w0 = self.orig_shape
        labels = det.labels.tolist()
        boxes = Boxes(det, self.orig_shape).xywhn
        assert isinstance(boxes, Tensor)
        fields: list[str] = []
        if det.keypoints is not None:
            kpts = det.keypoints.double()
            xy = (kpts[..., :2] / torch.tensor([w0, h0], dtype=torch.float64)).numpy()
            visible = (kpts[..., 2] >= KEYPOINT_VISIBLE).numpy()
            for i in range(len(det)):
                points = " ".join(
                    f"{_format(p)} {2 if v else 0}" for p, v in zip(xy[i], visible[i], strict=True)
                )
                fields.append(f"{_format(boxes[i].numpy())} {points}")
        elif det.rboxes is not None:
            corners = rboxes_to_polygons(det.rboxes.double()) / torch.tensor([w0, h0], dtype=torch.float64)
            fields = [_format(c.numpy()) for c in corners]
        elif det.masks is not None:
            # an empty mask has no polygon to write (a polygon needs 3 points)
            fields = [_format(p) if len(p) >= 3 else "" for p in Masks(det.masks, self.orig_shape).xyn]
        else:
            fields = [_format(b.numpy()) for b in boxes]
        lines = []
        for i, coords in enumerate(fields):
            if coords:
                conf = f" {float(det.scores[i]):.6f}" if save_conf else ""
                lines.append(f"{labels[i]} {coords}{conf}")
        return lines

    def save_txt(self, path: str | os.PathLike[str], *, save_conf: bool = False) -> Path:
        """Write :meth:`label_lines` to ``path`` (atomically; an empty file when nothing was detected)."""
        lines = self.label_lines(save_conf=save_conf)
        return atomic_write_text(path, "".join(f"{line}\n" for line in lines))

    def _image(self, img: NDArray[np.uint8] | None) -> NDArray[np.uint8]:
        image = img if img is not None else self.orig_img
        if image is None:
            raise ValueError(
                f"{self.path or 'Results'}: the original image was not kept (orig_img=None); pass img=<BGR array>"
            )
        return image

    def plot(self, *, img: NDArray[np.uint8] | None = None, **options: Any) -> NDArray[np.uint8]:
        """A copy of the BGR image (``orig_img``, or ``img``) with the detections drawn; ``options`` are
        :func:`lucid_core.plotting.draw_detections`'s keywords (e.g. ``conf=False``, ``line_width=3``)."""
        from lucid_core.plotting import draw_detections  # OpenCV: the `video` extra

        return draw_detections(self._image(img), self.detections, names=self.names, **options)

    def save(
        self, path: str | os.PathLike[str], *, img: NDArray[np.uint8] | None = None, **options: Any
    ) -> Path:
        """Write :meth:`plot` to ``path`` (format by its suffix, atomically); returns the path."""
        from lucid_core.plotting import write_image  # OpenCV: the `video` extra

        return write_image(path, self.plot(img=img, **options))

    def save_crop(
        self,
        directory: str | os.PathLike[str],
        *,
        stem: str | None = None,
        img: NDArray[np.uint8] | None = None,
    ) -> list[Path]:
        """Write each detection's box crop of the image to ``directory/<class name>/<stem>_<i>.jpg`` (``stem``
        defaults to the image's file stem, with the frame index for a video frame); returns the paths."""
        from lucid_core.plotting import write_image  # OpenCV: the `video` extra

        image = self._image(img)
        if stem is None:
            stem = Path(self.path).stem if self.path else "image"
            if self.frame is not None:
                stem = f"{stem}_{self.frame}"
        h0, w0 = image.shape[:2]
        boxes = self.detections.boxes.detach().cpu()
        written: list[Path] = []
        for i in range(len(self)):
            x1, y1, x2, y2 = boxes[i].tolist()
            left, top = max(int(np.floor(x1)), 0), max(int(np.floor(y1)), 0)
            right, bottom = min(int(np.ceil(x2)), w0), min(int(np.ceil(y2)), h0)
            if right <= left or bottom <= top:
                continue
            label = int(self.detections.labels[i])
            target = Path(directory) / self.name(label) / f"{stem}_{i}.jpg"
            written.append(write_image(target, np.ascontiguousarray(image[top:bottom, left:right])))
        return written
