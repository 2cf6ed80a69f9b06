"""`lucid-data` console script: `check`, `synth`, `convert`, `tile`, `download`.

- `check PATH [--split S ...] [--task T] [--no-images]`: reads every split with the readers in non-strict mode,
  fully decodes every image, prints each bad label as `file:line: reason` and each corrupt image, then a
  summary; exit status 1 when anything is wrong (also: a data YAML without a `val` split, a split with no
  instances, e.g. a missing `labels/` folder), 2 when the layout is not recognised (with what was expected).

Every command runs inside the shared error boundary (`lucid_core.cli_errors.run_cli`): a bad label, a corrupt
image, a missing file or a full disk is one paragraph on stderr and exit status 2; a bug keeps its traceback.
- `synth --task T --output DIR`: writes the synthetic-shapes YOLO dataset (`lucid_data.synth.synthesize`).
- `convert SRC OUT --to yolo|coco`: COCO JSON ⇄ YOLO txt (`lucid_data.convert`).
- `tile SRC OUT [--tile-size 1024] [--overlap 200]`: DOTA scenes → overlapping tiles (`readers.dota.write_tiles`).
- `download coco|dota [--root DIR] [--part P ...]`: resumable, checksum-verified downloads.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lucid_core.cli_errors import one_paragraph

__all__ = ["main"]


def _splits_of(path: Path, requested: list[str] | None) -> list[str]:
    if requested:
        return requested
    if path.suffix in (".yaml", ".yml"):
        import yaml

        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        found = [s for s in ("train", "val", "test") if raw.get(s)]
        return found or ["train"]
    if path.is_dir():
        found = [s for s in ("train", "val") if (path / "images" / s).is_dir() or (path / s).is_dir()]
        found += [
            s for s in ("train", "val") if s not in found and any((path / "annotations").glob(f"*{s}*.json"))
        ]
        return found or ["train"]
    return ["train"]


def _cmd_check(args: argparse.Namespace) -> int:
    from lucid_data.imageio import CorruptImageError, load_image
    from lucid_data.readers.common import LabelError
    from lucid_data.readers.probe import load_dataset

    path = Path(args.path)
    n_problems = n_corrupt = n_images = n_instances = 0
    try:
        splits = _splits_of(path, args.split)
        missing_val = _missing_val_split(path) if not args.split else None
        if missing_val:
            print(missing_val)
            n_problems += 1
        for split in splits:
            source = load_dataset(path, split, args.task, strict=False)
            print(f"{path} [{split}]: {source.task}, {len(source)} images, {source.num_classes} classes")
            for problem in source.problems:
                print(problem)
            for corrupt in source.corrupt_images:
                print(corrupt)
            n_problems += len(source.problems)
            n_corrupt += len(source.corrupt_images)
            n_images += len(source) + len(source.corrupt_images)
            split_instances = sum(len(record.targets) for record in source.records)
            n_instances += split_instances
            if split_instances == 0 and len(source):
                print(_no_instances(path, split, source))
                n_problems += 1
            for record in source.records:
                if not args.no_images:
                    try:
                        load_image(record.path)
                    except CorruptImageError as exc:
                        print(f"{exc.path}: corrupt image: {exc.reason}")
                        n_corrupt += 1
    except (FileNotFoundError, ValueError) as exc:
        if isinstance(exc, LabelError):
            raise
        print(f"lucid-data: error: {one_paragraph(str(exc))}", file=sys.stderr)
        return 2
    status = "OK" if n_problems == n_corrupt == 0 else "FAILED"
    print(
        f"{status}: {n_images} images, {n_instances} instances, {n_problems} label problem(s), {n_corrupt} corrupt image(s)"
    )
    return 0 if status == "OK" else 1


def _missing_val_split(path: Path) -> str | None:
    """A data YAML without ``val`` cannot be validated during training: the problem line, else ``None``."""
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        return None
    import yaml

    raw = yaml.safe_load(path.read_text(encoding="utf-8-sig")) or {}
    if isinstance(raw, dict) and not raw.get("val"):
        return (
            f"{path}: no `val` split; expected a `val:` entry (an images folder or list) - training validates on "
            "it every epoch"
        )
    return None


def _no_instances(path: Path, split: str, source: object) -> str:
    """The problem line of a split with images but not one labelled instance (a missing labels/ folder?)."""
    from lucid_data.readers.yolo import label_path_for

    records = getattr(source, "records", [])
    message = f"{path} [{split}]: {len(records)} images but no labelled instance"
    if records and not getattr(source, "annotation_file", None):
        labels = label_path_for(records[0].path).parent
        if not labels.is_dir():
            return f"{message}: the labels folder {labels} does not exist (expected one .txt per image)"
    return message + " (every label file is empty or missing)"


def _cmd_synth(args: argparse.Namespace) -> int:
    from lucid_data.synth import synthesize

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
    from lucid_data.convert import convert

    out = convert(args.source, args.output, args.to, split=args.split, task=args.task, copy_images=args.copy_images,
                  decimals=args.decimals)  # fmt: skip
    print(out)
    return 0


def _cmd_tile(args: argparse.Namespace) -> int:
    from lucid_data.readers.dota import write_tiles
    from lucid_data.readers.probe import load_dataset

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
    from lucid_data.download import ASSETS, Asset, ChecksumError, download_dataset

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
    tasks = ["detect", "segment", "pose", "obb"]

    p = sub.add_parser("check", help="report every bad label (file:line: reason) and corrupt image")
    p.add_argument("path", help="data YAML, YOLO folder, COCO JSON/folder or DOTA folder")
    p.add_argument("--split", action="append", help="split(s) to check (default: all found)")
    p.add_argument("--task", choices=tasks)
    p.add_argument("--no-images", action="store_true", help="skip decoding every image")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("synth", help="write the synthetic-shapes YOLO dataset")
    p.add_argument("--task", choices=tasks, default="detect")
    p.add_argument("--output", required=True)
    p.add_argument("--n-train", type=int, default=2000)
    p.add_argument("--n-val", type=int, default=200)
    p.add_argument("--imgsz", type=int, default=160)
    p.add_argument("--num-classes", type=int, default=3, help="shape kinds used as classes")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_synth)

    p = sub.add_parser("convert", help="COCO JSON <-> YOLO txt")
    p.add_argument("source")
    p.add_argument("output")
    p.add_argument("--to", choices=["yolo", "coco"], required=True)
    p.add_argument("--split", default="train")
    p.add_argument("--task", choices=tasks)
    p.add_argument("--copy-images", action="store_true", help="copy images instead of symlinking them")
    p.add_argument("--decimals", type=int, default=10, help="significant digits of YOLO coordinates")
    p.set_defaults(func=_cmd_convert)

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
    from lucid_core.cli_errors import run_cli
    from lucid_data.cache import CacheTooLargeError
    from lucid_data.imageio import CorruptImageError
    from lucid_data.readers.common import LabelError

    args = build_parser().parse_args(argv)
    known = (LabelError, CorruptImageError, CacheTooLargeError)
    return run_cli("lucid-data", lambda: int(args.func(args)), extra_known=known)


if __name__ == "__main__":
    raise SystemExit(main())
