"""``lucid-convert SRC.pt DST``: a reference checkpoint → lucid-core checkpoint (``DST.safetensors`` + ``DST.json``).

The source is read by :func:`lucid_core.interop.import_checkpoint` (restricted unpickler, nothing executed) and
written by :func:`lucid_core.checkpoint.save_model` (atomic), with class names and image size from the source and
its provenance under ``extra.imported_from``. Exit status 0 on success, 2 on a refused or unreadable source or a
destination that is the source (one paragraph, :mod:`lucid_core.cli_errors`).
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Sequence

from lucid_core.checkpoint import checkpoint_paths, save_model
from lucid_core.cli_errors import UsageError, refuse_overwrite, run_cli
from lucid_core.interop.reference import CheckpointImportError, import_checkpoint
from lucid_core.interop.unpickler import RefusedGlobalError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lucid-convert",
        description="Convert a reference-format YOLOv8/YOLO11/YOLO26 .pt checkpoint into a lucid-core checkpoint "
        "(safetensors + JSON). The pickle is read without executing code.",
    )
    parser.add_argument("source", help="reference checkpoint (.pt)")
    parser.add_argument(
        "destination", help="output stem: writes DST.safetensors and DST.json (a given suffix is dropped)"
    )
    parser.add_argument(
        "--imgsz", type=int, default=None, help="image size to record (default: the source's)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli("lucid-convert", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    if args.imgsz is not None and args.imgsz <= 0:
        raise UsageError(f"--imgsz {args.imgsz}: expected a positive image size, e.g. 640")
    weights_out, config_out = checkpoint_paths(args.destination)
    for output in (weights_out, config_out):
        refuse_overwrite("destination", output, [args.source])
    try:
        model, config = import_checkpoint(args.source)
    except (CheckpointImportError, RefusedGlobalError):
        raise
    except FileNotFoundError as exc:
        raise UsageError(f"source {args.source}: no such file; expected a reference .pt checkpoint") from exc
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as exc:
        raise CheckpointImportError(
            f"{args.source}: not a readable reference checkpoint ({type(exc).__name__}: {exc}); expected a .pt "
            "file written by torch.save (a zip archive holding data.pkl)"
        ) from exc
    imgsz = args.imgsz if args.imgsz is not None else config.imgsz
    record = config.to_dict()
    record.pop("model")
    weights = save_model(
        model, args.destination, names=config.names, imgsz=imgsz, extra={"imported_from": record}
    )
    cfg = model.config
    print(
        f"{args.source}: {cfg.family}{cfg.scale} {cfg.task}, classes {config.names}, "
        f"{sum(p.numel() for p in model.parameters())} parameters ({config.weights_from} weights) -> "
        f"{weights} + {weights.with_suffix('.json').name}"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
