"""`lucid-data` console script: `check`, `synth`, `convert`, `stats`, `tile`, `download`.

- `check PATH [--split S ...] [--task T] [--no-images]` (:func:`check_dataset`): reads every split with the readers
  in non-strict mode, fully decodes every image, prints each bad label as `file:line: reason` and each corrupt
  image, the instances per class of each split (a folder-per-class classification dataset: images per class, every
  split folder of train/val/test), then a summary; exit status 1 when anything is wrong (also: a data YAML without a `val` split, a split
  with no instances, e.g. a missing `labels/` folder), 2 when the layout is not recognised (with what was
  expected).

Every command runs inside the shared error boundary (`lucid_core.cli_errors.run_cli`): a bad label, a corrupt
image, a missing file or a full disk is one paragraph on stderr and exit status 2; a bug keeps its traceback.
- `synth --task T --output DIR`: writes the synthetic-shapes YOLO dataset (`lucid_data.synth.synthesize`);
  `--task track` a synthetic tracking video and its MOTChallenge ground truth (`lucid_data.synth_track`; of the
  other flags only `--seed` and `--num-classes` apply).
- `convert SRC OUT --to yolo|coco|yolo-obb`: COCO JSON ⇄ YOLO txt, DOTA → YOLO-OBB (`lucid_data.convert`); each
  unusable annotation is one line on stderr (file and annotation id), the rest converts, then the skipped count.
- `stats PATH [--split S] [--output DIR]`: per-class instance and image counts, box sizes (`lucid_data.stats`);
  with `--output`, `stats.json`, `per_class.csv` and `labels.npz` (the arrays `lucid-viz labels DIR` draws).
- `tile SRC OUT [--tile-size 1024] [--overlap 200]`: DOTA scenes → overlapping tiles (`readers.dota.write_tiles`).
- `download coco|dota [--root DIR] [--part P ...]`: resumable, checksum-verified downloads.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lucid_core.cli_errors import one_paragraph, run_cli
from lucid_core.tasks import TASKS, get_task
from lucid_data.cache import CacheTooLargeError
from lucid_data.convert import TARGET_FORMATS, convert_dataset
from lucid_data.download import ASSETS, Asset, ChecksumError, download_dataset
from lucid_data.imageio import CorruptImageError, load_image
from lucid_data.readers.common import LabelError
from lucid_data.readers.dota import write_tiles
from lucid_data.readers.folders import FOLDER_SPLITS, is_folder_layout
from lucid_data.readers.probe import load_dataset
from lucid_data.readers.yolo import label_path_for
from lucid_data.stats import label_statistics, write_statistics
from lucid_data.synth import synthesize
from lucid_data.synth_track import synthesize_track

__all__ = ["DatasetCheck", "check_dataset", "main"]


def _splits_of(path: Path, requested: list[str] | None) -> list[str]:
    if requested:
        return requested
    if path.suffix in (".yaml", ".yml"):
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        found = [s for s in ("train", "val", "test") if raw.get(s)]
        return found or ["train"]
    if is_folder_layout(path):  # classification: every split folder present (train, val, test)
        return [s for s in FOLDER_SPLITS if (path / s).is_dir()]
    if path.is_dir():
        found = [s for s in ("train", "val") if (path / "images" / s).is_dir() or (path / s).is_dir()]
        found += [
            s for s in ("train", "val") if s not in found and any((path / "annotations").glob(f"*{s}*.json"))
        ]
        return found or ["train"]
    return ["train"]


@dataclass
class DatasetCheck:
    """What :func:`check_dataset` found: every report line (in order) and the counts."""

    lines: list[str] = field(default_factory=list)
    images: int = 0
    instances: int = 0
    problems: int = 0
    corrupt: int = 0

    @property
    def ok(self) -> bool:
        """No label problem and no corrupt image."""
        return self.problems == self.corrupt == 0

    def summary(self) -> str:
        """The closing line ``lucid-data check`` prints (``OK: ...`` or ``FAILED: ...``)."""
        return (
            f"{'OK' if self.ok else 'FAILED'}: {self.images} images, {self.instances} instances, "
            f"{self.problems} label problem(s), {self.corrupt} corrupt image(s)"
        )


def check_dataset(
    path: str | os.PathLike[str],
    *,
    splits: Sequence[str] | None = None,
    task: str | None = None,
    decode_images: bool = True,
    on_line: Callable[[str], None] | None = None,
) -> DatasetCheck:
    """Read every split of the dataset at ``path`` non-strictly and (``decode_images``) decode every image.

    Each bad label (``file:line: reason``), corrupt image, split without instances and a data YAML without ``val``
    (when ``splits`` is not given; default: every split found) is a report line, passed to ``on_line`` as it is
    found. An unrecognised layout raises the reader's ``FileNotFoundError`` / ``ValueError``.
    """
    path = Path(path)
    check = DatasetCheck()

    def emit(line: str) -> None:
        check.lines.append(line)
        if on_line is not None:
            on_line(line)

    requested = list(splits) if splits else None
    split_names = _splits_of(path, requested)
    missing_val = _missing_val_split(path) if not requested else None
    if missing_val:
        emit(missing_val)
        check.problems += 1
    for split in split_names:
        source = load_dataset(path, split, task, strict=False)
        emit(f"{path} [{split}]: {source.task}, {len(source)} images, {source.num_classes} classes")
        for problem in source.problems:
            emit(str(problem))
        for corrupt in source.corrupt_images:
            emit(str(corrupt))
        check.problems += len(source.problems)
        check.corrupt += len(source.corrupt_images)
        check.images += len(source) + len(source.corrupt_images)
        split_instances = sum(len(record.targets) for record in source.records)
        check.instances += split_instances
        counted = "images" if get_task(source.task).image_level else "instances"  # one class per image
        emit(f"{path} [{split}]: {counted} per class: {_class_counts_line(source)}")
        if split_instances == 0 and len(source):
            emit(_no_instances(path, split, source))
            check.problems += 1
        for record in source.records:
            if decode_images:
                try:
                    load_image(record.path)
                except CorruptImageError as exc:
                    emit(f"{exc.path}: corrupt image: {exc.reason}")
                    check.corrupt += 1
    return check


def _class_counts_line(source: object) -> str:
    """``name count, ...`` for the classes with instances, then how many classes have none."""
    names = getattr(source, "names", {})
    counts = label_statistics(source).class_counts
    present = ", ".join(f"{names[i]} {int(c)}" for i, c in enumerate(counts) if c)
    empty = int((counts == 0).sum())
    return (present or "none") + (f"; {empty} class(es) without instances" if empty else "")


def _cmd_check(args: argparse.Namespace) -> int:
    try:
        check = check_dataset(
            args.path, splits=args.split, task=args.task, decode_images=not args.no_images, on_line=print
        )
    except (FileNotFoundError, ValueError) as exc:
        if isinstance(exc, LabelError):
            raise
        print(f"lucid-data: error: {one_paragraph(str(exc))}", file=sys.stderr)
        return 2
    print(check.summary())
    return 0 if check.ok else 1


def _missing_val_split(path: Path) -> str | None:
    """A data YAML without ``val`` cannot be validated during training: the problem line, else ``None``."""
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        return None
    raw = yaml.safe_load(path.read_text(encoding="utf-8-sig")) or {}
    if isinstance(raw, dict) and not raw.get("val"):
        return (
            f"{path}: no `val` split; expected a `val:` entry (an images folder or list) - training validates on "
            "it every epoch"
        )
    return None


def _no_instances(path: Path, split: str, source: object) -> str:
    """The problem line of a split with images but not one labelled instance (a missing labels/ folder?)."""
    records = getattr(source, "records", [])
    message = f"{path} [{split}]: {len(records)} images but no labelled instance"
    if records and not getattr(source, "annotation_file", None):
        labels = label_path_for(records[0].path).parent
        if not labels.is_dir():
            return f"{message}: the labels folder {labels} does not exist (expected one .txt per image)"
    return message + " (every label file is empty or missing)"


#: `synth --task` choices that are not tasks: a video with its ground truth.
SYNTH_VIDEOS = {"track": synthesize_track}


def _cmd_synth(args: argparse.Namespace) -> int:
    video = SYNTH_VIDEOS.get(args.task)
    if video is not None:
        done = video(Path(args.output), num_classes=args.num_classes, seed=args.seed)
        print(done.video)
        print(done.gt)
        return 0
    yaml_path = synthesize(
        args.task,
        Path(args.output),
        n_train=args.n_train,
        n_val=args.n_val,
        imgsz=args.imgsz,
        num_classes=args.num_classes,
        seed=args.seed,
    )
    print(yaml_path)
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    done = convert_dataset(args.source, args.output, args.to, split=args.split, task=args.task,
                           copy_images=args.copy_images, decimals=args.decimals)  # fmt: skip
    for problem in done.problems:
        print(f"lucid-data: skipped {problem}", file=sys.stderr)
    print(f"lucid-data: {done.summary()}", file=sys.stderr)
    print(done.output)
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    source = load_dataset(args.path, args.split, args.task, strict=False)
    stats = label_statistics(source)
    summary = stats.summary()
    print(f"{args.path} [{args.split}]: {summary['images']} images, {summary['instances']} instances")
    for row in summary["classes"]:
        if row["instances"]:
            print(
                f"  {row['class']:>3} {row['name']}: {row['instances']} instances in {row['images']} images"
            )
    empty = sum(1 for row in summary["classes"] if not row["instances"])
    if empty:
        print(f"  {empty} class(es) without instances")
    if args.output:
        for path in write_statistics(stats, args.output).values():
            print(path)
        print(
            f"lucid-data: draw labels.png with `lucid-viz labels {args.output}` (lucid-viz)", file=sys.stderr
        )
    return 0


def _cmd_tile(args: argparse.Namespace) -> int:
    source = load_dataset(args.source, args.split, "obb")
    print(
        write_tiles(
            source,
            args.output,
            tile_size=args.tile_size,
            overlap=args.overlap,
            min_visibility=args.min_visibility,
        )
    )
    return 0


def _cmd_download(args: argparse.Namespace) -> int:
    assets = ASSETS
    if args.url:
        if not args.sha256:
            print("lucid-data: error: --url needs --sha256 (downloads are always verified)", file=sys.stderr)
            return 2
        name = args.url.rstrip("/").rsplit("/", 1)[-1]
        assets = {
            args.name: {"custom": Asset(args.url, name, "sha256", args.sha256, extract=name.endswith(".zip"))}
        }

    def progress(done: int, total: int | None) -> None:
        if total:
            print(f"\r{done / 1e6:.1f}/{total / 1e6:.1f} MB", end="", file=sys.stderr)

    try:
        folder = download_dataset(args.name, args.root, parts=args.part, assets=assets, progress=progress)
    except (ChecksumError, OSError) as exc:
        print(f"\nlucid-data: error: {one_paragraph(str(exc))}", file=sys.stderr)
        return 1
    print(f"\n{folder}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lucid-data", description="lucid-YOLO dataset tools")
    sub = parser.add_subparsers(dest="command", required=True)
    tasks = list(TASKS)

    p = sub.add_parser("check", help="report every bad label (file:line: reason) and corrupt image")
    p.add_argument("path", help="data YAML, YOLO folder, COCO JSON/folder or DOTA folder")
    p.add_argument("--split", action="append", help="split(s) to check (default: all found)")
    p.add_argument("--task", choices=tasks)
    p.add_argument("--no-images", action="store_true", help="skip decoding every image")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("synth", help="write the synthetic-shapes YOLO dataset (--task track: a video)")
    p.add_argument("--task", choices=[*tasks, *SYNTH_VIDEOS], default="detect")
    p.add_argument("--output", required=True)
    p.add_argument("--n-train", type=int, default=2000)
    p.add_argument("--n-val", type=int, default=200)
    p.add_argument("--imgsz", type=int, default=160)
    p.add_argument("--num-classes", type=int, default=3, help="shape kinds used as classes")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_synth)

    p = sub.add_parser("convert", help="COCO JSON <-> YOLO txt, DOTA -> YOLO-OBB")
    p.add_argument("source")
    p.add_argument("output")
    p.add_argument("--to", choices=list(TARGET_FORMATS), required=True)
    p.add_argument("--split", default="train")
    p.add_argument("--task", choices=tasks)
    p.add_argument("--copy-images", action="store_true", help="copy images instead of symlinking them")
    p.add_argument("--decimals", type=int, default=10, help="significant digits of YOLO coordinates")
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser("stats", help="per-class counts and box statistics; figures with --output")
    p.add_argument("path", help="data YAML, YOLO folder, COCO JSON/folder or DOTA folder")
    p.add_argument("--split", default="train")
    p.add_argument("--task", choices=tasks)
    p.add_argument("--output", default=None, help="folder for stats.json, per_class.csv and labels.npz")
    p.set_defaults(func=_cmd_stats)

    p = sub.add_parser("tile", help="cut large obb scenes (DOTA) into overlapping tiles, written as YOLO obb")
    p.add_argument("source")
    p.add_argument("output")
    p.add_argument("--split", default="train")
    p.add_argument("--tile-size", type=int, default=1024)
    p.add_argument("--overlap", type=int, default=200)
    p.add_argument("--min-visibility", type=float, default=0.7)
    p.set_defaults(func=_cmd_tile)

    p = sub.add_parser("download", help="download COCO 2017 or the DOTA example (resumable, verified)")
    p.add_argument("name", choices=["coco", "dota"])
    p.add_argument("--root", default="datasets")
    p.add_argument("--part", action="append", help="coco: annotations, val, train (default all)")
    p.add_argument("--url", help="download this archive instead (e.g. a DOTA link you were given)")
    p.add_argument("--sha256", help="sha256 of --url")
    p.set_defaults(func=_cmd_download)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    known = (LabelError, CorruptImageError, CacheTooLargeError)
    return run_cli("lucid-data", lambda: int(args.func(args)), extra_known=known)


if __name__ == "__main__":
    raise SystemExit(main())
