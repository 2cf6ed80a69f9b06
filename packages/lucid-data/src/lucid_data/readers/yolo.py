"""YOLO txt datasets: a data YAML (`path`, `train`/`val`/`test`, `names`, `kpt_shape`, `flip_idx`) and one label
file per image, found by replacing the last `images` folder of the image path with `labels` and the suffix with
`.txt` (format as described in `../shared/data/README.md`, "Formats").

Label lines (coordinates normalised by image width/height, class id first); the line format follows the target
fields the task declares (`lucid_core.tasks.get_task(task).target_fields`):
- no extra field (detect): `cls cx cy w h`; polygon / corner lines are also accepted (box = their hull);
- masks (segment): `cls x1 y1 ... xn yn` (n ≥ 3), or a 5-number box (polygon = the box rectangle);
- keypoints (pose): `cls cx cy w h` + K·(x y v) or K·(x y) per `kpt_shape` (for D = 2, v = 2 unless x = y = 0,
  then 0);
- rboxes (obb): `cls x1 y1 x2 y2 x3 y3 x4 y4` corners → rbox fitted with `cv2.minAreaRect` (see `readers.common`).

Boxes/polygons of detect/segment/pose may exceed [0, 1] by at most `COORD_TOLERANCE` (then clipped to the
image); OBB corners are kept as labelled (rotated objects at the border stick out). Extra YAML keys read here:
`task` (a name of the `lucid_core.tasks` table) and `category_ids` (label → original dataset category id, written by
`lucid_data.convert` so a COCO → YOLO conversion keeps the COCO ids), and for pose `kpt_sigmas` (alias
`kpt_oks_sigmas`): the dataset's own per-keypoint OKS sigmas, K positive numbers, used by the pose loss and the
keypoint metric (fixture README "pose_loss_*.pt", step 5; defaults there when absent).

Image ids are the file stems, unique within a split: stems shared by images in different sub-folders become
relative paths (`image_ids_for`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import yaml

from lucid_core.tasks import TASKS, get_task
from lucid_data.imageio import IMAGE_SUFFIXES, CorruptImageError, image_size
from lucid_data.readers.common import LabelError, LabelProblem, corners_to_rbox
from lucid_data.records import DatasetSource, ImageRecord, Task
from lucid_data.targets import Targets

__all__ = [
    "COORD_TOLERANCE",
    "YoloDataConfig",
    "image_ids_for",
    "infer_yolo_task",
    "label_path_for",
    "list_images",
    "parse_label_file",
    "read_data_yaml",
    "read_yolo",
]

COORD_TOLERANCE = 0.01  # normalised coordinates in [-0.01, 1.01] are clipped, beyond that they are an error


class YoloDataConfig:
    """The parsed data YAML: root folder, split specs, names and the task extras."""

    def __init__(self, yaml_path: Path, raw: dict[str, Any]) -> None:
        self.yaml_path = yaml_path
        self.raw = raw
        root = raw.get("path")
        base = yaml_path.parent
        self.root = (base / root).resolve() if root not in (None, "") else base.resolve()
        if not self.root.is_dir() and base.resolve().is_dir():
            # `path` written for another machine (e.g. `../datasets/coco8`): fall back to the YAML's folder
            self.root = base.resolve()
        names = raw.get("names")
        if names is None:
            raise ValueError(f"{yaml_path}: data YAML has no `names`")
        if isinstance(names, list):
            self.names = {i: str(n) for i, n in enumerate(names)}
        elif isinstance(names, dict):
            self.names = {int(k): str(v) for k, v in names.items()}
        else:
            raise ValueError(f"{yaml_path}: `names` must be a list or a mapping, got {type(names).__name__}")
        if sorted(self.names) != list(range(len(self.names))):
            raise ValueError(f"{yaml_path}: `names` keys must be 0..nc-1, got {sorted(self.names)}")
        nc = raw.get("nc")
        if nc is not None and int(nc) != len(self.names):
            raise ValueError(f"{yaml_path}: nc={nc} but `names` has {len(self.names)} entries")
        kpt = raw.get("kpt_shape")
        self.kpt_shape: tuple[int, int] | None = None
        if kpt is not None:
            if len(kpt) != 2 or int(kpt[1]) not in (2, 3):
                raise ValueError(f"{yaml_path}: kpt_shape must be [K, 2 or 3], got {kpt}")
            self.kpt_shape = (int(kpt[0]), int(kpt[1]))
        flip = raw.get("flip_idx")
        self.flip_idx = [int(i) for i in flip] if flip is not None else None
        kpt_count = self.kpt_shape[0] if self.kpt_shape else None
        if (
            self.flip_idx is not None
            and kpt_count is not None
            and sorted(self.flip_idx) != list(range(kpt_count))
        ):
            raise ValueError(f"{yaml_path}: flip_idx {self.flip_idx} is not a permutation of 0..K-1")
        self.kpt_sigmas = _read_kpt_sigmas(yaml_path, raw, kpt_count)
        cat = raw.get("category_ids")
        self.category_ids = [int(c) for c in cat] if cat is not None else list(range(len(self.names)))
        task = raw.get("task")
        if task is not None and task not in TASKS:
            raise ValueError(f"{yaml_path}: task must be one of {tuple(TASKS)}, got {task!r}")
        self.task = cast(Task | None, task)

    def split_spec(self, split: str) -> Any:
        spec = self.raw.get(split)
        if spec in (None, ""):
            available = [s for s in ("train", "val", "test") if self.raw.get(s)]
            raise ValueError(f"{self.yaml_path}: no `{split}` split (available: {available})")
        return spec


def _read_kpt_sigmas(yaml_path: Path, raw: dict[str, Any], num_keypoints: int | None) -> list[float] | None:
    """`kpt_sigmas` / `kpt_oks_sigmas` of a data YAML: None when absent, else exactly K finite positive numbers."""
    given = {key: raw[key] for key in ("kpt_sigmas", "kpt_oks_sigmas") if raw.get(key) is not None}
    if not given:
        return None
    field, value = next(iter(given.items()))
    where = f"{yaml_path}: `{field}`"
    if num_keypoints is None:
        raise ValueError(
            f"{where} is given but the YAML has no `kpt_shape` (keypoint sigmas belong to pose data)"
        )
    try:
        sigmas = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(
            f"{where} must be a list of {num_keypoints} positive numbers, got {value!r}"
        ) from None
    if len(sigmas) != num_keypoints:
        raise ValueError(
            f"{where} has {len(sigmas)} values for kpt_shape's {num_keypoints} keypoints; give one positive "
            f"OKS sigma per keypoint, got {sigmas}"
        )
    if not all(np.isfinite(v) and v > 0 for v in sigmas):
        raise ValueError(f"{where}: every keypoint sigma must be a finite number > 0, got {sigmas}")
    if len(given) == 2 and given["kpt_oks_sigmas"] != value:
        raise ValueError(
            f"{yaml_path}: `kpt_sigmas` {value!r} and `kpt_oks_sigmas` {given['kpt_oks_sigmas']!r} disagree; "
            "give one of them"
        )
    return sigmas


def read_data_yaml(path: str | Path) -> YoloDataConfig:
    path = Path(path)
    with path.open("r", encoding="utf-8-sig") as f:
        raw = yaml.safe_load(f)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a data YAML must be a mapping with path/train/val/names")
    return YoloDataConfig(path, raw)


def list_images(spec: str | Path | Sequence[str | Path], root: Path) -> list[Path]:
    """Images of a split spec: a folder (searched recursively), a .txt list of paths, one image, or a list."""
    if not isinstance(spec, (str, Path)):
        return [p for s in spec for p in list_images(s, root)]
    p = Path(spec)
    p = p if p.is_absolute() else root / p
    if p.is_dir():
        return sorted(q for q in p.rglob("*") if q.suffix.lower() in IMAGE_SUFFIXES and q.is_file())
    if p.suffix == ".txt" and p.is_file():
        out = []
        for line in p.read_text(encoding="utf-8-sig").splitlines():
            line = line.strip()
            if line:
                q = Path(line)
                out.append(q if q.is_absolute() else (p.parent / q))
        return out
    if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES:
        return [p]
    raise FileNotFoundError(f"image source {p} does not exist (expected a folder of images or a .txt list)")


def image_ids_for(images: Sequence[Path]) -> list[str]:
    """One id per image, unique within the split: the file stem, or, when stems repeat, the relative path.

    A folder split is listed recursively, so ``val/a/0001.png`` and ``val/b/0001.png`` share the stem ``0001``;
    ids keyed on the stem would make the two collide and one image would never be scored. Every image whose stem
    is shared gets its path relative to the images' common folder instead (``a/0001``, POSIX separators, suffix
    dropped, or kept when two files differ only by suffix); unique stems stay stems (ids of existing datasets are
    unchanged). The same file listed twice (a ``.txt`` list) is refused with both entries named.
    """
    seen: dict[Path, int] = {}
    for index, image in enumerate(images):
        key = Path(os.path.abspath(image))
        if key in seen:
            raise ValueError(
                f"image {image} is listed twice in the split (entries {seen[key] + 1} and {index + 1}); "
                "expected every image once (its id would be scored twice)"
            )
        seen[key] = index
    stems = Counter(image.stem for image in images)
    if all(count == 1 for count in stems.values()):
        return [image.stem for image in images]
    absolute = [Path(os.path.abspath(image)) for image in images]
    common = Path(os.path.commonpath([str(p.parent) for p in absolute]))
    relative = [p.relative_to(common) for p in absolute]
    without_suffix = Counter(r.with_suffix("").as_posix() for r in relative)
    ids: list[str] = []
    for image, rel in zip(images, relative, strict=True):
        if stems[image.stem] == 1:
            ids.append(image.stem)
        elif without_suffix[rel.with_suffix("").as_posix()] == 1:
            ids.append(rel.with_suffix("").as_posix())
        else:
            ids.append(rel.as_posix())
    taken = Counter(
        ids
    )  # a stem equal to another image's relative id ("a/0001" is a stem only if oddly named)
    clash = next((i for i, n in taken.items() if n > 1), None)
    if clash is not None:
        both = [str(p) for p, i in zip(images, ids, strict=True) if i == clash]
        raise ValueError(f"images {both} resolve to the same image id {clash!r}; rename one of them")
    return ids


def label_path_for(image: Path) -> Path:
    """`.../images/<rest>.jpg` → `.../labels/<rest>.txt` (the last `images` component is replaced)."""
    parts = list(image.parts)
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == "images":
            parts[i] = "labels"
            return Path(*parts).with_suffix(".txt")
    return image.with_suffix(".txt")


def _numbers(tokens: list[str]) -> np.ndarray | str:
    try:
        values = np.array([float(t) for t in tokens], dtype=np.float64)
    except ValueError:
        bad = next(t for t in tokens if not _is_float(t))
        return f"not a number: {bad!r}"
    if not np.isfinite(values).all():
        return "non-finite value (nan/inf)"
    return values


def _is_float(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _check_range(values: np.ndarray, what: str) -> str | None:
    lo, hi = float(values.min()), float(values.max())
    if lo < -COORD_TOLERANCE or hi > 1 + COORD_TOLERANCE:
        v = lo if lo < -COORD_TOLERANCE else hi
        return f"{what} coordinate {v:g} outside [0, 1] (labels are normalised by the image size)"
    return None


def parse_label_file(
    label_path: Path,
    task: Task,
    size_hw: tuple[int, int],
    *,
    num_classes: int | None,
    kpt_shape: tuple[int, int] | None = None,
    image_id: int | str = 0,
) -> tuple[Targets, list[LabelProblem]]:
    """Targets (pixels) of one label file and every bad line as a `LabelProblem` (bad lines are skipped).

    The line format and the optional `Targets` fields follow `task`'s target fields (module docstring).
    """
    fields = get_task(task).target_fields
    h, w = size_hw
    problems: list[LabelProblem] = []
    boxes: list[np.ndarray] = []
    labels: list[int] = []
    polygons: list[np.ndarray] = []
    keypoints: list[np.ndarray] = []
    corners: list[np.ndarray] = []
    scale = np.array([w, h], dtype=np.float64)
    # polygons scale with float32 operands, as the reference scales its labels: the last bit decides borders
    # after a flip
    polygon_scale = scale.astype(np.float32)
    # utf-8-sig: a label file saved with a UTF-8 byte-order mark (Windows editors) reads like one without
    lines = label_path.read_text(encoding="utf-8-sig").splitlines() if label_path.is_file() else []
    if "keypoints" in fields and kpt_shape is None:
        raise ValueError(f"{label_path}: pose labels need kpt_shape (set it in the data YAML)")
    for lineno, line in enumerate(lines, start=1):
        tokens = line.split()
        if not tokens:
            continue

        def bad(reason: str, lineno: int = lineno) -> None:
            problems.append(LabelProblem(label_path, lineno, reason))

        values = _numbers(tokens)
        if isinstance(values, str):
            bad(values)
            continue
        cls = values[0]
        if cls != int(cls) or cls < 0:
            bad(f"class id {tokens[0]!r} is not a non-negative integer")
            continue
        if num_classes is not None and cls >= num_classes:
            bad(f"class id {int(cls)} >= nc={num_classes}")
            continue
        coords = values[1:]
        n = coords.size
        poly: np.ndarray | None = None
        kpts: np.ndarray | None = None
        if "keypoints" in fields:
            assert kpt_shape is not None
            k, d = kpt_shape
            if n != 4 + k * d:
                bad(f"expected {5 + k * d} numbers (cls cx cy w h + {k}x{d} keypoints), got {n + 1}")
                continue
            box_n = coords[:4]
            kp = coords[4:].reshape(k, d)
            kpts = np.zeros((k, 3), dtype=np.float64)
            kpts[:, :2] = kp[:, :2] * scale
            if d == 3:
                if not np.isin(kp[:, 2], (0.0, 1.0, 2.0)).all():
                    bad(f"keypoint visibility must be 0, 1 or 2, got {sorted(set(kp[:, 2].tolist()))}")
                    continue
                kpts[:, 2] = kp[:, 2]
            else:
                # nd = 2 (fixtures README, pose section): the reference's dataset appends visibility 1, or 0 where
                # a label coordinate is negative (its "unlabelled" marker); (0, 0) is a labelled corner keypoint.
                kpts[:, 2] = np.where((kp[:, 0] < 0) | (kp[:, 1] < 0), 0.0, 1.0)
        elif "rboxes" in fields:
            if n != 8:
                bad(f"expected 9 numbers (cls x1 y1 x2 y2 x3 y3 x4 y4), got {n + 1}")
                continue
            quad = coords.reshape(4, 2) * scale
            corners.append(quad)
            box_px = np.concatenate([quad.min(0), quad.max(0)])
            if box_px[2] - box_px[0] <= 0 or box_px[3] - box_px[1] <= 0:
                bad("oriented box has zero area")
                corners.pop()
                continue
            boxes.append(box_px)
            labels.append(int(cls))
            continue
        else:
            if n == 4:
                box_n = coords
            elif n >= 6 and n % 2 == 0:
                poly = coords.reshape(-1, 2)
                msg = _check_range(poly, "polygon")
                if msg:
                    bad(msg)
                    continue
                poly = np.clip(poly, 0.0, 1.0)
                lo, hi = poly.min(0), poly.max(0)
                box_n = np.concatenate([(lo + hi) / 2, hi - lo])
            else:
                expected = (
                    "cls x1 y1 ... xn yn (n >= 3)" if "masks" in fields else "5 numbers (cls cx cy w h)"
                )
                bad(f"expected {expected}, got {n + 1} numbers")
                continue
        cx, cy, bw, bh = box_n
        if bw <= 0 or bh <= 0:
            bad(f"box width/height must be > 0, got w={bw:g} h={bh:g}")
            continue
        xyxy_n = np.array([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2])
        msg = _check_range(xyxy_n, "box")
        if msg:
            bad(msg)
            continue
        xyxy = np.clip(xyxy_n, 0.0, 1.0) * np.tile(scale, 2)
        if poly is None:
            poly = np.array([[xyxy_n[0], xyxy_n[1]], [xyxy_n[2], xyxy_n[1]], [xyxy_n[2], xyxy_n[3]],
                             [xyxy_n[0], xyxy_n[3]]]).clip(0.0, 1.0)  # fmt: skip
        boxes.append(xyxy)
        labels.append(int(cls))
        polygons.append(poly.astype(np.float32) * polygon_scale)
        if kpts is not None:
            keypoints.append(kpts)
    n_inst = len(labels)
    targets = Targets(
        boxes=np.array(boxes, dtype=np.float32).reshape(n_inst, 4),
        labels=np.array(labels, dtype=np.int64),
        polygons=polygons if "masks" in fields else (list(corners) if "rboxes" in fields else None),
        keypoints=(
            np.array(keypoints, dtype=np.float32).reshape(n_inst, kpt_shape[0], 3)
            if "keypoints" in fields and kpt_shape is not None
            else None
        ),
        rboxes=corners_to_rbox(np.array(corners).reshape(n_inst, 4, 2)) if "rboxes" in fields else None,
        image_id=image_id,
        orig_size=size_hw,
    )
    return targets, problems


def infer_yolo_task(label_paths: Sequence[Path], kpt_shape: tuple[int, int] | None, limit: int = 200) -> Task:
    """pose if the YAML has kpt_shape; else from the label lines: all 9 numbers → obb, polygons → segment."""
    if kpt_shape is not None:
        return "pose"
    counts: set[int] = set()
    for path in label_paths[:limit]:
        if path.is_file():
            for line in path.read_text(encoding="utf-8-sig").splitlines():
                if line.strip():
                    counts.add(len(line.split()))
    counts = {c for c in counts if c >= 5}  # shorter lines are malformed whatever the task
    if not counts or counts == {5}:
        return "detect"
    if counts == {9}:
        return "obb"
    return "segment"


def read_yolo(
    path: str | Path, split: str = "train", task: Task | None = None, *, strict: bool = True
) -> DatasetSource:
    """Read a YOLO dataset from a data YAML or a folder with `images/` (+ `labels/`).

    Bad label lines raise `LabelError` listing every one (`strict=True`) or are skipped and listed in
    `DatasetSource.problems` (`strict=False`, used by `lucid-data check`). Images whose header cannot be read
    are always left out and listed in `problems`.
    """
    path = Path(path)
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        cfg: YoloDataConfig | None = read_data_yaml(path)
        assert cfg is not None
        root = cfg.root
        images = list_images(cfg.split_spec(split), root)
    elif path.is_dir():
        cfg = None
        root = path
        for candidate in (path / "images" / split, path / "images", path):
            if candidate.is_dir():
                images = list_images(candidate, root)
                if images:
                    break
        else:
            images = []
    else:
        raise FileNotFoundError(f"{path}: expected a YOLO data YAML or a folder with images/ and labels/")
    if not images:
        raise FileNotFoundError(f"{path}: no images found for split {split!r}")
    kpt_shape = cfg.kpt_shape if cfg else None
    label_paths = [label_path_for(p) for p in images]
    task = task or (cfg.task if cfg else None) or infer_yolo_task(label_paths, kpt_shape)
    if "keypoints" in get_task(task).target_fields and kpt_shape is None:
        raise ValueError(f"{path}: pose task needs `kpt_shape` in the data YAML")
    names = cfg.names if cfg else None
    records: list[ImageRecord] = []
    problems: list[LabelProblem] = []
    other: list[str] = []
    image_ids = image_ids_for(images)
    for image, label, image_id in zip(images, label_paths, image_ids, strict=True):
        try:
            size: tuple[int, int] | None = image_size(image)
        except CorruptImageError as exc:
            other.append(str(exc))
            size = None
        targets, bad = parse_label_file(
            label,
            task,
            size or (1, 1),
            num_classes=len(names) if names else None,
            kpt_shape=kpt_shape,
            image_id=image_id,
        )
        problems.extend(bad)
        if size is None:  # its labels are still checked above; the image is left out
            continue
        records.append(ImageRecord(path=image, targets=targets, image_id=image_id, size_hw=size))
    if problems and strict:
        raise LabelError(problems)
    if names is None:
        nc = max((int(r.targets.labels.max()) + 1 for r in records if len(r.targets)), default=0)
        names = {i: str(i) for i in range(nc)}
    return DatasetSource(
        records=records,
        names=names,
        task=task,
        kpt_shape=kpt_shape,
        flip_idx=cfg.flip_idx if cfg else None,
        kpt_sigmas=cfg.kpt_sigmas if cfg else None,
        data_yaml=cfg.yaml_path if cfg else None,
        category_ids=cfg.category_ids if cfg else list(range(len(names))),
        root=root,
        split=split,
        problems=[str(p) for p in problems],
        corrupt_images=other,
    )
