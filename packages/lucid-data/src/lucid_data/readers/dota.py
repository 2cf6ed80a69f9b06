"""DOTA labelTxt datasets, and tiling of large scenes into overlapping tiles with merging of tile predictions.

Format (DOTA, Xia et al., CVPR 2018, and the DOTA devkit description; see `../shared/data/README.md`):
optional header lines `imagesource:...` and `gsd:...`, then one object per line
`x1 y1 x2 y2 x3 y3 x4 y4 category difficult` in absolute pixels (corners clockwise; `difficult` 0/1, may be
missing in some releases → 0). Category names use hyphens (`large-vehicle`). Layout: `<split>/images/*.png`
and `<split>/labelTxt/*.txt`, or `images/` and `labelTxt/` directly in the folder given.

Tiling: scenes larger than the network input are cut into `tile_size` windows with `overlap` pixels shared by
neighbours (stride = tile_size − overlap; the last window is aligned to the scene edge). An object is kept in a
tile when at least `min_visibility` of its polygon area lies inside; cut objects are clipped to the tile and
their rotated box refitted (`cv2.intersectConvexConvex` + `cv2.minAreaRect`). Merging shifts tile predictions
back by the tile origin and removes duplicates with class-wise rotated NMS on the exact polygon IoU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
import yaml

from lucid_core.geometry.polygon_iou import paired_polygon_iou
from lucid_data.dota_tiles import polygon_nms, tile_windows
from lucid_data.imageio import IMAGE_SUFFIXES, CorruptImageError, image_size, load_image
from lucid_data.readers.common import LabelError, LabelProblem, corners_to_rbox, polygon_area, rbox_to_corners
from lucid_data.records import DatasetSource, ImageRecord
from lucid_data.targets import Targets

__all__ = [
    "DOTA_V1_NAMES",
    "DOTA_V2_NAMES",
    "DOTA_V15_NAMES",
    "DotaLabelFile",
    "merge_tile_predictions",
    "parse_dota_file",
    "polygon_iou",
    "read_dota",
    "tile_targets",
    "tile_windows",
    "write_tiles",
]

# Class lists in the order of the DOTA releases (DOTA v1.0 paper table; v1.5 adds container-crane; v2.0 adds
# airport and helipad).
DOTA_V1_NAMES = (
    "plane", "ship", "storage-tank", "baseball-diamond", "tennis-court", "basketball-court",
    "ground-track-field", "harbor", "bridge", "large-vehicle", "small-vehicle", "helicopter", "roundabout",
    "soccer-ball-field", "swimming-pool",
)  # fmt: skip
DOTA_V15_NAMES = (*DOTA_V1_NAMES, "container-crane")
DOTA_V2_NAMES = (*DOTA_V15_NAMES, "airport", "helipad")


@dataclass
class DotaLabelFile:
    """One parsed labelTxt: header values, corners (N, 4, 2) pixels, category names, difficult flags."""

    header: dict[str, str]
    corners: np.ndarray
    categories: list[str]
    difficult: np.ndarray
    problems: list[LabelProblem]
    lines: list[int]


def parse_dota_file(path: Path) -> DotaLabelFile:
    header: dict[str, str] = {}
    corners: list[list[float]] = []
    cats: list[str] = []
    diff: list[bool] = []
    line_numbers: list[int] = []
    problems: list[LabelProblem] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) == 1 and ":" in tokens[0]:
            key, _, value = tokens[0].partition(":")
            header[key] = value
            continue
        if len(tokens) not in (9, 10):
            problems.append(
                LabelProblem(
                    path, lineno, f"expected 8 coordinates, category, difficult; got {len(tokens)} fields"
                )
            )
            continue
        try:
            xy = [float(t) for t in tokens[:8]]
        except ValueError:
            problems.append(
                LabelProblem(path, lineno, f"coordinates must be numbers: {' '.join(tokens[:8])!r}")
            )
            continue
        if not np.isfinite(xy).all():
            problems.append(LabelProblem(path, lineno, "non-finite coordinate"))
            continue
        d = tokens[9] if len(tokens) == 10 else "0"
        if d not in ("0", "1"):
            problems.append(LabelProblem(path, lineno, f"difficult flag must be 0 or 1, got {d!r}"))
            continue
        if polygon_area(np.array(xy).reshape(4, 2)) <= 0:
            problems.append(LabelProblem(path, lineno, "polygon has zero area"))
            continue
        corners.append(xy)
        cats.append(tokens[8])
        diff.append(d == "1")
        line_numbers.append(lineno)
    return DotaLabelFile(
        header=header,
        corners=np.array(corners, dtype=np.float64).reshape(-1, 4, 2),
        categories=cats,
        difficult=np.array(diff, dtype=bool),
        problems=problems,
        lines=line_numbers,
    )


def _dota_dirs(path: Path, split: str) -> tuple[Path, Path]:
    for base in (path / split, path):
        if (base / "labelTxt").is_dir():
            return base / "images", base / "labelTxt"
    raise FileNotFoundError(
        f"{path}: expected a DOTA folder with labelTxt/ and images/ (or {split}/labelTxt/)"
    )


def read_dota(
    path: str | Path, split: str = "train", *, names: list[str] | None = None, strict: bool = True
) -> DatasetSource:
    """Read a DOTA split as an obb `DatasetSource` (polygons = the labelled corners, rboxes fitted to them).

    `names` defaults to the smallest DOTA class list (v1.0, v1.5, v2.0) holding every category found.
    """
    path = Path(path)
    image_dir, label_dir = _dota_dirs(path, split)
    images = (
        {p.stem: p for p in image_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}
        if image_dir.is_dir()
        else {}
    )
    parsed: dict[str, DotaLabelFile] = {}
    problems: list[LabelProblem] = []
    other: list[str] = []
    corrupt: list[str] = []
    for label in sorted(label_dir.glob("*.txt")):
        f = parse_dota_file(label)
        problems.extend(f.problems)
        if label.stem not in images:
            other.append(f"{label}: no image {label.stem}.* in {image_dir}")
            continue
        parsed[label.stem] = f
    found = {c for f in parsed.values() for c in f.categories}
    if names is None:
        class_list = next(
            (list(v) for v in (DOTA_V1_NAMES, DOTA_V15_NAMES, DOTA_V2_NAMES) if found <= set(v)), None
        )
        if class_list is None:
            class_list = list(DOTA_V2_NAMES)
    else:
        class_list = list(names)
    index = {n: i for i, n in enumerate(class_list)}
    records: list[ImageRecord] = []
    for stem, f in parsed.items():
        keep = np.ones(len(f.categories), dtype=bool)
        for i, cat in enumerate(f.categories):
            if cat not in index:
                problems.append(
                    LabelProblem(label_dir / f"{stem}.txt", f.lines[i], f"unknown category {cat!r}")
                )
                keep[i] = False
        try:
            size = image_size(images[stem])
        except CorruptImageError as exc:
            corrupt.append(str(exc))
            continue
        corners = f.corners[keep]
        targets = Targets(
            boxes=np.concatenate([corners.min(1), corners.max(1)], axis=1)
            if len(corners)
            else np.zeros((0, 4)),
            labels=np.array([index[c] for c, k in zip(f.categories, keep, strict=True) if k], dtype=np.int64),
            polygons=list(corners),
            rboxes=corners_to_rbox(corners),
            difficult=f.difficult[keep],
            image_id=stem,
            orig_size=size,
        )
        records.append(ImageRecord(path=images[stem], targets=targets, image_id=stem, size_hw=size))
    if problems and strict:
        raise LabelError(problems)
    return DatasetSource(
        records=records,
        names=dict(enumerate(class_list)),
        task="obb",
        root=path,
        split=split,
        problems=[str(p) for p in problems] + other,
        corrupt_images=corrupt,
    )


def _clip_convex(poly: np.ndarray, window: tuple[int, int, int, int]) -> np.ndarray:
    x0, y0, x1, y1 = window
    rect = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
    hull = cv2.convexHull(poly.astype(np.float32))
    area, inter = cv2.intersectConvexConvex(hull, rect)
    if inter is None or area <= 0:
        return np.zeros((0, 2), np.float32)
    return inter.reshape(-1, 2)


def tile_targets(
    targets: Targets, window: tuple[int, int, int, int], min_visibility: float = 0.7
) -> tuple[Targets, np.ndarray]:
    """Objects of `targets` (obb, with polygons) inside `window`, in tile pixels, and their visible fraction.

    Objects entirely inside keep their polygon and rbox exactly (shifted); cut objects are clipped to the tile and
    refitted; objects with less than `min_visibility` of their area inside are dropped.
    """
    if targets.polygons is None:
        raise ValueError("tile_targets needs polygons (read DOTA or YOLO obb labels)")
    x0, y0, x1, y1 = window
    offset = np.array([x0, y0], dtype=np.float32)
    keep, polys, vis = [], [], []
    for i, poly in enumerate(targets.polygons):
        inside = (poly[:, 0] >= x0) & (poly[:, 0] <= x1) & (poly[:, 1] >= y0) & (poly[:, 1] <= y1)
        if inside.all():
            keep.append(i)
            polys.append(poly - offset)
            vis.append(1.0)
            continue
        clipped = _clip_convex(poly, window)
        full = polygon_area(poly)
        frac = polygon_area(clipped) / full if full > 0 else 0.0
        if len(clipped) >= 3 and frac >= min_visibility:
            keep.append(i)
            polys.append(clipped - offset)
            vis.append(frac)
    sub = targets.select(np.array(keep, dtype=np.int64))
    rboxes = sub.rboxes.copy() if sub.rboxes is not None else np.zeros((len(keep), 5), np.float32)
    boxes = np.zeros((len(keep), 4), np.float32)
    for j, poly in enumerate(polys):
        if vis[j] == 1.0 and sub.rboxes is not None:
            rboxes[j, :2] -= offset
        else:
            rboxes[j] = corners_to_rbox(poly[None])[0]
        boxes[j] = np.concatenate([poly.min(0), poly.max(0)])
    sub.polygons = [p.astype(np.float32) for p in polys]
    sub.rboxes = rboxes
    sub.boxes = boxes
    sub.orig_size = (y1 - y0, x1 - x0)
    return sub, np.array(vis, dtype=np.float32)


def polygon_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two convex polygons (P, 2), exact in float64 (`lucid_core.geometry.polygon_iou`)."""
    pa = torch.as_tensor(np.asarray(a, dtype=np.float64).reshape(1, -1, 2))
    pb = torch.as_tensor(np.asarray(b, dtype=np.float64).reshape(1, -1, 2))
    return float(paired_polygon_iou(pa, pb)[0])


def merge_tile_predictions(
    tiles: list[tuple[tuple[int, int], np.ndarray, np.ndarray, np.ndarray]], iou_threshold: float = 0.1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge per-tile predictions into scene predictions.

    `tiles`: ((x0, y0) tile origin, rboxes (M, 5) tile pixels, scores (M,), labels (M,)). Returns scene
    (rboxes, scores, labels) after class-wise greedy rotated NMS (polygon IoU > iou_threshold suppresses; ties
    in score keep the earlier tile).
    """
    rbs, scs, lbs = [], [], []
    for (x0, y0), rb, sc, lb in tiles:
        rb = np.asarray(rb, dtype=np.float32).reshape(-1, 5).copy()
        rb[:, 0] += x0
        rb[:, 1] += y0
        rbs.append(rb)
        scs.append(np.asarray(sc, dtype=np.float32).reshape(-1))
        lbs.append(np.asarray(lb, dtype=np.int64).reshape(-1))
    if not rbs:
        return np.zeros((0, 5), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64)
    rboxes, scores, labels = np.concatenate(rbs), np.concatenate(scs), np.concatenate(lbs)
    corners = rbox_to_corners(rboxes).astype(np.float64)
    kept = [np.zeros(0, np.int64)]
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        kept.append(members[polygon_nms(corners[members], scores[members], iou_threshold)])
    idx = np.concatenate(kept)
    idx = idx[np.lexsort((idx, -scores[idx]))]  # descending score, ties in input order
    return rboxes[idx], scores[idx], labels[idx]


def write_tiles(
    source: DatasetSource,
    output: str | Path,
    *,
    tile_size: int = 1024,
    overlap: int = 200,
    min_visibility: float = 0.7,
) -> Path:
    """Cut every scene of an obb `source` into tiles and write them as a YOLO obb dataset under `output`.

    Tiles are named `<scene>__<tile_size>__<x0>___<y0>.png` (the DOTA tile naming of `../shared/data/README.md`)
    in `output/images/<split>/` with labels in `output/labels/<split>/`; returns `output/data.yaml`.
    """
    output = Path(output)
    split = source.split
    (output / "images" / split).mkdir(parents=True, exist_ok=True)
    (output / "labels" / split).mkdir(parents=True, exist_ok=True)
    for record in source.records:
        image = load_image(record.path)
        h, w = image.shape[:2]
        for window in tile_windows(h, w, tile_size, overlap):
            x0, y0, x1, y1 = window
            sub, _ = tile_targets(record.targets, window, min_visibility)
            name = f"{record.path.stem}__{tile_size}__{x0}___{y0}"
            tile = np.ascontiguousarray(image[y0:y1, x0:x1, ::-1])
            if not cv2.imwrite(str(output / "images" / split / f"{name}.png"), tile):
                raise OSError(f"cannot write tile {name}.png under {output}")
            scale = np.array([x1 - x0, y1 - y0], dtype=np.float64)
            lines = []
            for i in range(len(sub)):
                assert sub.rboxes is not None and sub.polygons is not None
                polygon = sub.polygons[i]
                corners = rbox_to_corners(sub.rboxes[i : i + 1])[0] if len(polygon) != 4 else polygon
                coords = " ".join(f"{v:.10g}" for v in (corners.astype(np.float64) / scale).reshape(-1))
                lines.append(f"{int(sub.labels[i])} {coords}\n")
            (output / "labels" / split / f"{name}.txt").write_text("".join(lines), encoding="utf-8")
    yaml_path = output / "data.yaml"
    data = yaml.safe_load(yaml_path.read_text(encoding="utf-8")) if yaml_path.is_file() else {}
    data = data or {}
    data.update({"path": ".", split: f"images/{split}", "task": "obb", "names": dict(source.names)})
    tmp = yaml_path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    tmp.replace(yaml_path)
    return yaml_path
