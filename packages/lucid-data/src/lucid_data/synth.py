"""Synthetic shapes: the embedded default dataset (`lucid-data synth`, default dataset of `lucid-train fit`).

`synthesize(task, output)` writes a YOLO-format dataset (`images/{train,val}`, `labels/{train,val}`, `data.yaml`)
of coloured shapes on textured backgrounds; the class is the shape kind (circle, square, triangle, star, cross,
ellipse, hexagon, pentagon — the first `num_classes`). Every annotation is exact because it is computed from the
polygon that is drawn (cv2.fillPoly with 4 fractional bits). The labels follow the task's target field
(`LABEL_FORMATS`): boxes are the polygon's hull (a task without target fields, e.g. detect), masks the drawn
outline, rboxes the shape's own rectangle (its local bounding box rotated with it; the shapes are then squashed
along their local y axis by U(0.35, 0.75), so no rectangle is a square whose direction could not be seen — a
rotated circle is an ellipse) and keypoints are 5 per instance — the leftmost, rightmost, topmost and bottommost
vertices and the centre — with `flip_idx = [1, 0, 2, 3, 4]` (left ↔ right on a horizontal flip).

An image-level task (classify, `Task.image_level`) gets the folder-per-class layout instead
(`lucid_data.readers.folders`: `train/<shape>/*.jpg`, `val/<shape>/*.jpg`, no labels): one shape per image, image i
of a split showing class `i mod num_classes` (balanced classes), on the same backgrounds (`synthesize_classify`).
Each image is a crop around its object, as a second-stage classifier sees one: the shape spans 70–95 % of the side
(`CLASSIFY_SIZE`; the smaller detection sizes make a from-scratch classifier learn far slower, docs/TRAINING.md
"Classification").

Objects are large (15–50 % of the image side by default), 1–4 per image, never overlapping, in saturated colours
over a low-saturation textured background, so a small detector separates them quickly; all knobs are keyword
arguments. Image i of a split is a function of (seed, split, i) only. JPEG quality 95 is the default format:
measured for the default 2,000 + 200 segment images at 160 px (shared 2-core machine, load ~4): JPEG 9.1 s /
26 MiB vs PNG 12.0 s / 105 MiB (the noise texture makes PNG large); most of the time is rendering, not encoding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import cv2
import numpy as np
import yaml

from lucid_core.atomic import atomic_write_bytes
from lucid_core.tasks import TASKS, get_task
from lucid_data.readers.geometry import canonical_rboxes

__all__ = [
    "BOX_FORMAT",
    "CLASSIFY_SIZE",
    "FLIP_IDX",
    "KEYPOINT_NAMES",
    "LABEL_FORMATS",
    "SHAPE_KINDS",
    "LabelFormat",
    "SynthConfig",
    "label_format",
    "synthesize",
    "synthesize_classify",
]

SHAPE_KINDS = ("circle", "square", "triangle", "star", "cross", "ellipse", "hexagon", "pentagon")
KEYPOINT_NAMES = ("leftmost", "rightmost", "topmost", "bottommost", "centre")
FLIP_IDX = [1, 0, 2, 3, 4]
OBB_ASPECT = (0.35, 0.75)  # default `aspect` of the obb synthesis (squashed shapes, non-square rectangles)
#: default (min_size, max_size) of the classify synthesis: a crop around one object (module docstring)
CLASSIFY_SIZE = (0.7, 0.95)


def _regular(n: int, radius_y: float = 1.0, start: float = -math.pi / 2) -> np.ndarray:
    a = start + np.arange(n) * 2 * math.pi / n
    return np.stack((np.cos(a), radius_y * np.sin(a)), -1)


def _star() -> np.ndarray:
    a = -math.pi / 2 + np.arange(10) * math.pi / 5
    r = np.where(np.arange(10) % 2 == 0, 1.0, 0.45)
    return np.stack((r * np.cos(a), r * np.sin(a)), -1)


def _cross(arm: float = 0.34) -> np.ndarray:
    a = arm
    return np.array(
        [
            [-a, -1],
            [a, -1],
            [a, -a],
            [1, -a],
            [1, a],
            [a, a],
            [a, 1],
            [-a, 1],
            [-a, a],
            [-1, a],
            [-1, -a],
            [-a, -a],
        ],
        dtype=np.float64,
    )


# Unit shapes in a local frame whose bounding box is [-1, 1] x [-1, 1] (ellipse: [-1, 1] x [-0.55, 0.55]).
_UNIT_SHAPES: dict[str, np.ndarray] = {
    "circle": _regular(32),
    "square": np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=np.float64),
    "triangle": np.array([[0, -1], [1, 1], [-1, 1]], dtype=np.float64),
    "star": _star(),
    "cross": _cross(),
    "ellipse": _regular(32, radius_y=0.55),
    "hexagon": _regular(6, start=0.0),
    "pentagon": _regular(5),
}


@dataclass
class SynthConfig:
    """Knobs of the generator (defaults tuned for a quick CPU fit at imgsz 160)."""

    imgsz: int = 160
    num_classes: int = 3
    min_objects: int = 1
    max_objects: int = 4
    min_size: float = 0.15  # object side as a fraction of the image side
    max_size: float = 0.5
    rotate: bool = True
    background_contrast: float = 40.0  # amplitude of the low-frequency background texture (0..255)
    noise: float = 8.0  # amplitude of the per-pixel noise added to the whole image
    image_format: Literal["jpg", "png"] = "jpg"
    jpeg_quality: int = 95
    # height/width ratio range of a shape's local frame: each shape is squashed along its local y axis by
    # U(*aspect) ((1, 1) = never; obb uses OBB_ASPECT so that every labelled rectangle shows its direction)
    aspect: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self) -> None:
        if not 1 <= self.num_classes <= len(SHAPE_KINDS):
            raise ValueError(
                f"num_classes must be in 1..{len(SHAPE_KINDS)} ({', '.join(SHAPE_KINDS)}), got {self.num_classes}"
            )
        if not 1 <= self.min_objects <= self.max_objects:
            raise ValueError(
                f"need 1 <= min_objects <= max_objects, got {self.min_objects}, {self.max_objects}"
            )
        if not 0 < self.min_size <= self.max_size < 1:
            raise ValueError(f"need 0 < min_size <= max_size < 1, got {self.min_size}, {self.max_size}")
        if self.imgsz < 32:
            raise ValueError(f"imgsz must be >= 32, got {self.imgsz}")
        if not 0 < self.aspect[0] <= self.aspect[1] <= 1:
            raise ValueError(f"aspect must satisfy 0 < low <= high <= 1, got {self.aspect}")
        if self.image_format not in ("jpg", "png"):
            raise ValueError(f'image_format must be "jpg" or "png", got {self.image_format!r}')


@dataclass
class _Instance:
    label: int
    polygon: np.ndarray  # (P, 2) pixels
    rbox: np.ndarray  # (5,) cx, cy, w, h, θ
    color: tuple[int, int, int]


def _background(rng: np.random.Generator, cfg: SynthConfig) -> np.ndarray:
    s = cfg.imgsz
    base = rng.uniform(70, 185)
    tint = rng.uniform(-15, 15, 3)  # low saturation
    grid = rng.uniform(-1, 1, (4, 4, 3)) * cfg.background_contrast
    field: np.ndarray = cv2.resize(grid.astype(np.float32), (s, s), interpolation=cv2.INTER_LINEAR)
    period = rng.uniform(6, 24)
    angle = rng.uniform(0, math.pi)
    amplitude = rng.uniform(4, 14)
    # sin(a·x + b·y) = sin(a·x)·cos(b·y) + cos(a·x)·sin(b·y): two outer products instead of a 2-D sin
    coord = np.arange(s, dtype=np.float32) * np.float32(2 * math.pi / period)
    ax, by = coord * np.float32(math.cos(angle)), coord * np.float32(math.sin(angle))
    stripes = np.outer(np.cos(by), np.sin(ax)) + np.outer(np.sin(by), np.cos(ax))
    field += (stripes * np.float32(amplitude))[..., None]
    field += (base + tint).astype(np.float32)
    return field


def _random_color(rng: np.random.Generator) -> tuple[int, int, int]:
    hsv = np.array([[[rng.integers(0, 180), rng.integers(170, 256), rng.integers(150, 256)]]], dtype=np.uint8)
    rgb = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0]
    return int(rgb[0]), int(rgb[1]), int(rgb[2])


def _place(rng: np.random.Generator, cfg: SynthConfig, fixed: int | None = None) -> list[_Instance]:
    """Up to a drawn number of non-overlapping shapes; ``fixed`` fixes every shape's class (else drawn)."""
    s = cfg.imgsz
    count = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    placed: list[_Instance] = []
    boxes: list[np.ndarray] = []
    for _ in range(count):
        for _attempt in range(12):
            label = int(rng.integers(0, cfg.num_classes)) if fixed is None else fixed
            unit = _UNIT_SHAPES[SHAPE_KINDS[label]]
            if cfg.aspect != (1.0, 1.0):  # squashed shapes (obb): the rectangle's direction is visible
                unit = unit * np.array([1.0, rng.uniform(*cfg.aspect)])
            half = rng.uniform(cfg.min_size, cfg.max_size) * s / 2
            theta = rng.uniform(0, 2 * math.pi) if cfg.rotate else 0.0
            cos, sin = math.cos(theta), math.sin(theta)
            rot = np.array([[cos, -sin], [sin, cos]])
            local = unit * half
            pts = local @ rot.T
            lmin, lmax = unit.min(0) * half, unit.max(0) * half
            frame = (
                np.array([[lmin[0], lmin[1]], [lmax[0], lmin[1]], [lmax[0], lmax[1]], [lmin[0], lmax[1]]])
                @ rot.T
            )
            # keep both the shape and its rotated rectangle (the OBB label) inside the image
            extent = np.concatenate((pts, frame))
            lo, hi = extent.min(0), extent.max(0)
            if (hi - lo).max() >= s - 2:
                continue
            centre = np.array([rng.uniform(1 - lo[0], s - 1 - hi[0]), rng.uniform(1 - lo[1], s - 1 - hi[1])])
            poly = pts + centre
            box = np.concatenate((lo + centre, hi + centre))
            margin = 2.0
            if any(
                box[0] < b[2] + margin
                and b[0] < box[2] + margin
                and box[1] < b[3] + margin
                and b[1] < box[3] + margin
                for b in boxes
            ):
                continue
            lc = (lmin + lmax) / 2
            rc = centre + rot @ lc
            w, h = lmax - lmin
            # the reference's canonical form: w the longer side, θ ∈ [−π/4, 3π/4) (lucid_data.readers.geometry)
            rbox = canonical_rboxes(np.array([rc[0], rc[1], w, h, theta]))[0]
            placed.append(_Instance(label, poly, rbox, _random_color(rng)))
            boxes.append(box)
            break
    return placed


def _keypoints(poly: np.ndarray) -> np.ndarray:
    pts = [
        poly[poly[:, 0].argmin()],
        poly[poly[:, 0].argmax()],
        poly[poly[:, 1].argmin()],
        poly[poly[:, 1].argmax()],
    ]
    pts.append(poly.mean(0))
    return np.asarray(pts)


def _rbox_corners(r: np.ndarray) -> np.ndarray:
    cx, cy, w, h, t = r
    v1 = np.array([w / 2 * math.cos(t), w / 2 * math.sin(t)])
    v2 = np.array([-h / 2 * math.sin(t), h / 2 * math.cos(t)])
    c = np.array([cx, cy])
    return np.stack((c + v1 + v2, c + v1 - v2, c - v1 - v2, c - v1 + v2))


def _box_values(inst: _Instance, box: list[float], s: int) -> list[float]:
    return box


def _polygon_values(inst: _Instance, box: list[float], s: int) -> list[float]:
    return list((inst.polygon / s).reshape(-1))


def _keypoint_values(inst: _Instance, box: list[float], s: int) -> list[float]:
    kpt = _keypoints(inst.polygon) / s
    return box + [v for x, y in kpt for v in (x, y, 2.0)]


def _corner_values(inst: _Instance, box: list[float], s: int) -> list[float]:
    return list((_rbox_corners(inst.rbox) / s).reshape(-1))


def _keypoint_yaml() -> dict[str, object]:
    return {
        "kpt_shape": [len(KEYPOINT_NAMES), 3],
        "flip_idx": list(FLIP_IDX),
        "kpt_names": list(KEYPOINT_NAMES),
    }


@dataclass(frozen=True)
class LabelFormat:
    """How the labels of one target field are synthesised.

    ``values(instance, box, imgsz)`` gives the numbers of a label line after the class id (``box`` = normalised
    cx, cy, w, h of the drawn polygon); ``defaults`` are `SynthConfig` defaults; ``yaml()`` the data-YAML keys.
    """

    values: Callable[[_Instance, list[float], int], list[float]]
    defaults: Mapping[str, object] = field(default_factory=dict)
    yaml: Callable[[], dict[str, object]] = dict


#: A task without extra target fields writes boxes.
BOX_FORMAT = LabelFormat(_box_values)
#: Target field -> its label format (YOLO txt lines of `lucid_data.readers.yolo`).
LABEL_FORMATS: dict[str, LabelFormat] = {
    "masks": LabelFormat(_polygon_values),
    "keypoints": LabelFormat(_keypoint_values, yaml=_keypoint_yaml),
    "rboxes": LabelFormat(_corner_values, defaults={"aspect": OBB_ASPECT}),
}


def label_format(task: str) -> LabelFormat:
    """The label format of `task`: the one of its target field, boxes when it declares none."""
    fields = get_task(task).target_fields
    unknown = [f for f in fields if f not in LABEL_FORMATS]
    if unknown or len(fields) > 1:
        raise ValueError(
            f"synthesize: task {task!r} needs the target fields {list(fields)}; synthetic shapes give boxes and "
            f"at most one of {sorted(LABEL_FORMATS)}"
        )
    return LABEL_FORMATS[fields[0]] if fields else BOX_FORMAT


def _label_lines(fmt: LabelFormat, instances: list[_Instance], s: int) -> list[str]:
    lines = []
    for inst in instances:
        poly = inst.polygon
        x1, y1 = poly.min(0)
        x2, y2 = poly.max(0)
        box = [(x1 + x2) / 2 / s, (y1 + y2) / 2 / s, (x2 - x1) / s, (y2 - y1) / s]
        values = fmt.values(inst, box, s)
        lines.append(f"{inst.label} " + " ".join(f"{v:.6f}" for v in values))
    return lines


def render_image(
    rng: np.random.Generator, cfg: SynthConfig, label: int | None = None
) -> tuple[np.ndarray, list[_Instance]]:
    """One RGB uint8 image and its instances (polygons in pixels); with ``label``, at least one shape, all of
    that class (placement is drawn again until one fits)."""
    image = _background(rng, cfg)
    instances = _place(rng, cfg, label)
    while label is not None and not instances:
        instances = _place(rng, cfg, label)
    canvas = np.clip(image, 0, 255).astype(np.uint8)
    for inst in instances:
        cv2.fillPoly(canvas, [np.round(inst.polygon * 16).astype(np.int32)], inst.color, cv2.LINE_AA, shift=4)
    if cfg.noise > 0:
        noise = rng.random(canvas.shape, dtype=np.float32)
        noise *= np.float32(2 * cfg.noise)
        noise += canvas
        noise -= np.float32(cfg.noise)
        canvas = np.clip(noise, 0, 255, out=noise).astype(np.uint8)
    return canvas, instances


def _write_atomic(path: Path, data: bytes) -> None:
    atomic_write_bytes(path, data)


def synthesize(
    task: str,
    output: str | Path,
    *,
    n_train: int = 2000,
    n_val: int = 200,
    imgsz: int = 160,
    num_classes: int = 3,
    seed: int = 0,
    **options: object,
) -> Path:
    """Write a synthetic YOLO dataset for `task` under `output`; return the path of its data YAML.

    Extra keyword options are `SynthConfig` fields (min_objects, max_objects, min_size, max_size, rotate,
    background_contrast, noise, image_format, jpeg_quality, aspect — default `OBB_ASPECT` for rboxes). The labels
    follow the task's target field (`LABEL_FORMATS`; boxes for a task without one). An image-level task
    (classify) gets :func:`synthesize_classify`'s folder-per-class dataset and its root folder is returned.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {tuple(TASKS)}, got {task!r}")
    if n_train < 1 or n_val < 0:
        raise ValueError(f"need n_train >= 1 and n_val >= 0, got {n_train}, {n_val}")
    if get_task(task).image_level:
        return synthesize_classify(
            output, n_train=n_train, n_val=n_val, imgsz=imgsz, num_classes=num_classes, seed=seed, **options
        )
    fmt = label_format(task)
    for key, value in fmt.defaults.items():
        options.setdefault(key, value)
    cfg = SynthConfig(imgsz=imgsz, num_classes=num_classes, **options)  # type: ignore[arg-type]
    root = Path(output).resolve()
    suffix = ".jpg" if cfg.image_format == "jpg" else ".png"
    params = [int(cv2.IMWRITE_JPEG_QUALITY), int(cfg.jpeg_quality)] if suffix == ".jpg" else []
    for split_id, (split, count) in enumerate((("train", n_train), ("val", n_val))):
        image_dir, label_dir = root / "images" / split, root / "labels" / split
        image_dir.mkdir(parents=True, exist_ok=True)
        label_dir.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            rng = np.random.default_rng(np.random.SeedSequence([seed, split_id, i]))
            image, instances = render_image(rng, cfg)
            ok, encoded = cv2.imencode(suffix, cv2.cvtColor(image, cv2.COLOR_RGB2BGR), params)
            if not ok:  # pragma: no cover - cv2 always encodes a valid uint8 image
                raise RuntimeError(f"cv2 could not encode {suffix} image {i}")
            stem = f"{split}_{i:06d}"
            (image_dir / f"{stem}{suffix}").write_bytes(encoded.tobytes())
            (label_dir / f"{stem}.txt").write_text("\n".join(_label_lines(fmt, instances, cfg.imgsz)) + "\n")
    data: dict[str, object] = {
        "path": ".",  # relative to this YAML (readers resolve it so), so the folder can be moved
        "train": "images/train",
        "val": "images/val",
        "task": task,
        "names": {i: SHAPE_KINDS[i] for i in range(cfg.num_classes)},
    }
    data.update(fmt.yaml())
    yaml_path = root / "data.yaml"
    _write_atomic(yaml_path, yaml.safe_dump(data, sort_keys=False).encode())
    return yaml_path


def synthesize_classify(
    output: str | Path,
    *,
    n_train: int = 2000,
    n_val: int = 200,
    imgsz: int = 160,
    num_classes: int = 3,
    seed: int = 0,
    **options: object,
) -> Path:
    """Write a synthetic folder-per-class classification dataset under ``output``; return its root folder.

    ``output/<split>/<shape>/<split>_<i>.jpg``: one shape per image (``min_objects``/``max_objects`` are fixed at
    1) spanning ``min_size``–``max_size`` of the side (default `CLASSIFY_SIZE`), image i of a split of class
    ``i mod num_classes``; the other keyword options are `SynthConfig` fields.
    Image i of a split is a function of (seed, split, i) only. The layout is the one
    `lucid_data.readers.folders` reads (class names = the sorted folder names, so the shape kinds are written with
    a two-digit index prefix only when their names would sort out of class order).
    """
    if n_train < 1 or n_val < 0:
        raise ValueError(f"need n_train >= 1 and n_val >= 0, got {n_train}, {n_val}")
    for key in ("min_objects", "max_objects"):
        if options.get(key, 1) != 1:
            raise ValueError(
                f"synthesize_classify: one shape per image; {key} must be 1, got {options[key]!r}"
            )
        options.pop(key, None)
    options.setdefault("min_size", CLASSIFY_SIZE[0])
    options.setdefault("max_size", CLASSIFY_SIZE[1])
    cfg = SynthConfig(imgsz=imgsz, num_classes=num_classes, min_objects=1, max_objects=1, **options)  # type: ignore[arg-type]
    root = Path(output).resolve()
    names = class_folder_names(cfg.num_classes)
    suffix = ".jpg" if cfg.image_format == "jpg" else ".png"
    params = [int(cv2.IMWRITE_JPEG_QUALITY), int(cfg.jpeg_quality)] if suffix == ".jpg" else []
    for split_id, (split, count) in enumerate((("train", n_train), ("val", n_val))):
        for name in names:
            (root / split / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            label = i % cfg.num_classes
            rng = np.random.default_rng(np.random.SeedSequence([seed, split_id, i]))
            image, _ = render_image(rng, cfg, label)
            ok, encoded = cv2.imencode(suffix, cv2.cvtColor(image, cv2.COLOR_RGB2BGR), params)
            if not ok:  # pragma: no cover - cv2 always encodes a valid uint8 image
                raise RuntimeError(f"cv2 could not encode {suffix} image {i}")
            (root / split / names[label] / f"{split}_{i:06d}{suffix}").write_bytes(encoded.tobytes())
    return root


def class_folder_names(num_classes: int) -> list[str]:
    """The class folder names of the first ``num_classes`` shape kinds, in class order once sorted (the folder
    reader's rule): the kinds themselves when they already sort so, else ``"<index:02d>_<kind>"``."""
    kinds = list(SHAPE_KINDS[:num_classes])
    return kinds if kinds == sorted(kinds) else [f"{i:02d}_{kind}" for i, kind in enumerate(kinds)]
