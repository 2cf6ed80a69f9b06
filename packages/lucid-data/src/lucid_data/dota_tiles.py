"""DOTA devkit split and merge for evaluation: whole scenes → named tiles, tile detections → whole scenes.

The tiling geometry (:func:`tile_windows`) and the greedy polygon NMS (:func:`polygon_nms`) come from
:mod:`lucid_core.tiles` and are re-exported here; ``readers.dota`` uses both to tile labelled scenes and merge
tile predictions.

Split (the DOTA devkit's ``ImgSplit`` / ``SplitOnlyImage``, github.com/CAPTAIN-WHU/DOTA_devkit): for every
``rate`` the scene is resized by that factor (bicubic; rate 1 leaves it untouched), then cut into ``tile_size``
windows stepping ``tile_size − gap`` with the last window flush with the edge (:func:`tile_windows` — the
devkit's loop gives the same windows); a tile is named ``<scene>__<rate>__<left>___<up>`` with ``left``/``up`` the
window origin in the RESIZED scene and ``rate`` written as ``%g`` (``1``, ``0.5``, ``1.5``). Defaults are the
devkit's: tile 1024, gap 200, rates ``(1.0,)``; several rates give the multi-scale split. Only images are split
here (evaluation scores whole scenes against their original labelTxt); `readers.dota.write_tiles` splits labelled
data for training.

Merge (the devkit's ``ResultMerge``): a tile detection polygon maps back as ``(p + (left, up)) / rate``
(``poly2origpoly``); the detections of each (scene, class) then go through greedy polygon NMS at IoU 0.1 (the
devkit's ``py_cpu_nms_poly``: highest score first, every remaining box whose exact polygon IoU with it is
``> 0.1`` is dropped, suppressed boxes suppress nothing).

Tile names: the middle field is the rate. The hub's dota8 crops (``P0861__1024__0___1648``) and
``lucid-data tile`` put the crop size there instead; a middle value of 64 or more is read as such a crop size,
i.e. rate 1 (no devkit rate is that large).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from lucid_core.tiles import MERGE_NMS_IOU as MERGE_NMS_IOU  # re-exported
from lucid_core.tiles import polygon_nms as polygon_nms
from lucid_core.tiles import tile_windows as tile_windows
from lucid_data.imageio import IMAGE_SUFFIXES, load_image

DEFAULT_TILE_SIZE = 1024
DEFAULT_GAP = 200
DEFAULT_RATES: tuple[float, ...] = (1.0,)
#: a middle name field at least this large is a crop size (hub / lucid-data tile naming), meaning rate 1
CROP_SIZE_FIELD_MIN = 64

_TILE_NAME = re.compile(r"^(?P<scene>.+)__(?P<rate>\d+(?:\.\d+)?)__(?P<left>\d+)___(?P<up>\d+)$")


@dataclass(frozen=True)
class TileName:
    """A devkit tile name ``<scene>__<rate>__<left>___<up>`` (origin in pixels of the scene resized by rate)."""

    scene: str
    rate: float
    left: int
    up: int

    def __str__(self) -> str:
        return f"{self.scene}__{self.rate:g}__{self.left}___{self.up}"


def parse_tile_name(stem: str) -> TileName:
    """Parse a tile file stem (module docstring for the crop-size reading of the middle field)."""
    m = _TILE_NAME.match(stem)
    if m is None:
        raise ValueError(
            f"tile name {stem!r} is not the DOTA devkit's '<scene>__<rate>__<left>___<up>' (e.g. P0001__1__0___824)"
        )
    rate = float(m["rate"])
    if rate <= 0:
        raise ValueError(f"tile name {stem!r}: rate must be positive, got {m['rate']}")
    if rate >= CROP_SIZE_FIELD_MIN:
        rate = 1.0
    return TileName(m["scene"], rate, int(m["left"]), int(m["up"]))


def split_scene(
    image: np.ndarray,
    scene: str,
    *,
    tile_size: int = DEFAULT_TILE_SIZE,
    gap: int = DEFAULT_GAP,
    rates: Sequence[float] = DEFAULT_RATES,
) -> Iterator[tuple[TileName, np.ndarray]]:
    """Tiles of one (H, W, C) scene for every rate, in devkit order (rate, then rows of windows)."""
    if not rates or any(r <= 0 for r in rates):
        raise ValueError(f"rates must be positive numbers, got {list(rates)}")
    for rate in rates:
        scaled = (
            image
            if rate == 1
            else cv2.resize(image, None, fx=float(rate), fy=float(rate), interpolation=cv2.INTER_CUBIC)
        )
        h, w = scaled.shape[:2]
        for x0, y0, x1, y1 in tile_windows(h, w, tile_size, gap):
            yield TileName(scene, float(rate), x0, y0), scaled[y0:y1, x0:x1]


def split_image_dir(
    images: str | Path | Iterable[Path],
    output: str | Path,
    *,
    tile_size: int = DEFAULT_TILE_SIZE,
    gap: int = DEFAULT_GAP,
    rates: Sequence[float] = DEFAULT_RATES,
    suffix: str = ".png",
) -> list[Path]:
    """Split every image of a folder (or the given files) into named tiles written under `output`."""
    if isinstance(images, str | Path):
        folder = Path(images)
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    else:
        files = list(images)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for path in files:
        rgb = load_image(path)
        for name, tile in split_scene(rgb, path.stem, tile_size=tile_size, gap=gap, rates=rates):
            target = output / f"{name}{suffix}"
            tmp = target.with_name(f".{target.stem}.tmp{suffix}")
            if not cv2.imwrite(str(tmp), np.ascontiguousarray(tile[..., ::-1])):
                raise OSError(f"cannot write tile {target}")
            tmp.replace(target)
            written.append(target)
    return written


def tile_to_scene(polygons: np.ndarray, name: TileName) -> np.ndarray:
    """(N, P, 2) tile-pixel polygons → scene pixels: ``(p + (left, up)) / rate`` (devkit ``poly2origpoly``)."""
    offset = np.array([name.left, name.up], dtype=np.float64)
    return (np.asarray(polygons, dtype=np.float64) + offset) / name.rate


@dataclass
class SceneDetections:
    """Detections of one whole scene: polygons (N, 4, 2) float64 pixels, scores (N,), labels (N,)."""

    polygons: np.ndarray
    scores: np.ndarray
    labels: np.ndarray


def merge_tile_detections(
    tiles: Iterable[tuple[TileName, np.ndarray, np.ndarray, np.ndarray]],
    *,
    iou_threshold: float = MERGE_NMS_IOU,
) -> dict[str, SceneDetections]:
    """Tile detections ``(name, polygons (M, 4, 2) tile px, scores (M,), labels (M,))`` → scene → merged
    detections (mapped back, then greedy polygon NMS per class; module docstring)."""
    grouped: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for name, polys, scores, labels in tiles:
        p = tile_to_scene(np.asarray(polys, dtype=np.float64).reshape(-1, 4, 2), name)
        s = np.asarray(scores, dtype=np.float64).reshape(-1)
        lab = np.asarray(labels, dtype=np.int64).reshape(-1)
        if not (len(p) == len(s) == len(lab)):
            raise ValueError(f"tile {name}: {len(p)} polygons, {len(s)} scores, {len(lab)} labels")
        grouped.setdefault(name.scene, []).append((p, s, lab))
    out: dict[str, SceneDetections] = {}
    for scene, parts in grouped.items():
        polys = np.concatenate([p for p, _, _ in parts])
        scores = np.concatenate([s for _, s, _ in parts])
        labels = np.concatenate([lab for _, _, lab in parts])
        keep_all = []
        for c in np.unique(labels):
            idx = np.flatnonzero(labels == c)
            keep_all.append(idx[polygon_nms(polys[idx], scores[idx], iou_threshold)])
        keep = np.concatenate(keep_all) if keep_all else np.zeros(0, np.int64)
        keep = keep[np.argsort(-scores[keep], kind="stable")]
        out[scene] = SceneDetections(polys[keep], scores[keep], labels[keep])
    return out
