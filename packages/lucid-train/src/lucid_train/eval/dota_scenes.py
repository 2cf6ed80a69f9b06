"""Whole DOTA scenes: predict Task-1 detections on devkit tiles and merge tile detections back to scenes.

Tiles are named as the devkit names them (``scene__rate__left___up``, :mod:`lucid_data.dota_tiles`); merging maps
each tile's polygons back by offset and rate, then runs greedy polygon NMS per class at IoU 0.1.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lucid_core.geometry.rotated import rboxes_to_polygons
from lucid_core.inference import predict_prepared, prepare_inference_model
from lucid_data.dota_tiles import MERGE_NMS_IOU, merge_tile_detections, parse_tile_name, split_scene
from lucid_data.imageio import load_image
from lucid_train.eval.dota_io import TASK1_PREFIX, DotaFormatError, Task1Detections


def merge_task1_tiles(
    detections: Mapping[str, Task1Detections], *, iou_threshold: float | None = None
) -> dict[str, Task1Detections]:
    """Tile-level Task-1 detections (image = devkit tile name) → whole-scene detections, per class:
    mapped back by offset and rate, then greedy polygon NMS at IoU 0.1 (`lucid_data.dota_tiles`)."""
    thr = MERGE_NMS_IOU if iou_threshold is None else float(iou_threshold)
    out: dict[str, Task1Detections] = {}
    for name, dets in detections.items():
        rows: dict[str, list[int]] = {}
        for i, image in enumerate(dets.images):
            rows.setdefault(image, []).append(i)
        tiles = []
        for image, idx in rows.items():
            try:
                tile = parse_tile_name(image)
            except ValueError as exc:
                raise DotaFormatError(f"{TASK1_PREFIX}{name}.txt: {exc}") from exc
            sel = np.asarray(idx)
            tiles.append((tile, dets.polygons[sel], dets.scores[sel], np.zeros(sel.size, np.int64)))
        merged = merge_tile_detections(tiles, iou_threshold=thr)
        scenes = sorted(merged)
        out[name] = Task1Detections(
            images=[s for s in scenes for _ in range(len(merged[s].scores))],
            scores=np.concatenate([merged[s].scores for s in scenes]) if scenes else np.zeros(0),
            polygons=np.concatenate([merged[s].polygons for s in scenes]) if scenes else np.zeros((0, 4, 2)),
        )
    return out


def predict_task1(
    model: Any,
    images: Iterable[tuple[str, Any]],
    *,
    names: Sequence[str] | None = None,
    imgsz: int,
    conf: float,
    iou: float,
    max_det: int,
    device: str = "cpu",
    decode: str | None = None,
) -> dict[str, Task1Detections]:
    """Predict obb boxes on every ``(image name, image)`` (a path or an HWC uint8 RGB array) and return them as
    Task-1 detections (corners of each rotated box in that image's pixels, class = the model's class name)."""
    names = list(names) if names is not None else [str(i) for i in range(int(model.num_classes))]
    net, mode = prepare_inference_model(model, decode=decode, device=device)  # type: ignore[arg-type]
    per_class: dict[str, tuple[list[str], list[np.ndarray], list[np.ndarray]]] = {
        n: ([], [], []) for n in names
    }
    for image_name, image in images:
        (det,) = predict_prepared(
            net, image, mode=mode, imgsz=imgsz, conf=conf, iou=iou, max_det=max_det, device=device
        )
        if det.rboxes is None:
            raise ValueError(
                f"{image_name}: the model predicts no rotated boxes (task {model.task!r}, expected obb)"
            )
        polys = rboxes_to_polygons(det.rboxes.double()).numpy()
        scores = det.scores.double().numpy()
        labels = det.labels.numpy()
        for c in np.unique(labels):
            sel = labels == c
            names_out, ss, ps = per_class[names[int(c)]]
            names_out.extend([image_name] * int(sel.sum()))
            ss.append(scores[sel])
            ps.append(polys[sel])
    return {
        n: Task1Detections(
            names_out,
            np.concatenate(ss) if ss else np.zeros(0),
            np.concatenate(ps) if ps else np.zeros((0, 4, 2)),
        )
        for n, (names_out, ss, ps) in per_class.items()
    }


def split_scene_files(
    files: Sequence[Path], tile_size: int, gap: int, rates: Sequence[float]
) -> Iterator[tuple[str, np.ndarray]]:
    """Devkit tiles (name, RGB array) of every whole scene, in memory (`lucid_data.dota_tiles.split_scene`)."""
    if tile_size <= 0 or not 0 <= gap < tile_size:
        raise DotaFormatError(
            f"--tile-size {tile_size} --gap {gap}: need tile size > 0 and 0 <= gap < tile size"
        )
    if not rates or any(r <= 0 for r in rates):
        raise DotaFormatError(f"--rates {list(rates)}: need positive scale factors, e.g. --rates 1.0 0.5")
    for path in files:
        for name, tile in split_scene(load_image(path), path.stem, tile_size=tile_size, gap=gap, rates=rates):
            yield str(name), np.ascontiguousarray(tile)
