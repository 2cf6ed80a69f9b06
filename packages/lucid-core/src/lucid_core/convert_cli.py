"""``lucid-convert SRC.pt DST``: a reference checkpoint → lucid-core checkpoint (``DST.safetensors`` + ``DST.json``).

The source is read by :func:`lucid_core.interop.import_checkpoint` (restricted unpickler, nothing executed) and
written by :func:`lucid_core.checkpoint.save_model` (atomic), with class names and image size from the source and
its provenance under ``extra.imported_from``. The typed entry point is :func:`convert` (``main`` parses the
flags, calls it and prints :meth:`ConvertedCheckpoint.summary`). Exit status 0 on success, 2 on a refused or
unreadable source or a destination that is the source (one paragraph, :mod:`lucid_core.cli_errors`).
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lucid_core.checkpoint import checkpoint_paths, save_model
from lucid_core.cli_errors import UsageError, refuse_overwrite, run_cli
from lucid_core.errors import CheckpointImportError, RefusedGlobalError
from lucid_core.interop.reference import ImportedConfig, import_checkpoint
from lucid_core.models import YOLOModel


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


@dataclass(frozen=True)
class ConvertedCheckpoint:
    """What :func:`convert` wrote: the lucid-core weights (``DST.safetensors`` + ``DST.json``), the model and what
    was learned about the source."""

    source: str
    weights: Path
    model: YOLOModel
    config: ImportedConfig

    def summary(self) -> str:
        """The line ``lucid-convert`` prints: source, model, classes, parameter count and the files written."""
        cfg = self.model.config
        return (
            f"{self.source}: {cfg.family}{cfg.scale} {cfg.task}, classes {self.config.names}, "
            f"{sum(p.numel() for p in self.model.parameters())} parameters ({self.config.weights_from} weights) -> "
            f"{self.weights} + {self.weights.with_suffix('.json').name}"
        )


def convert(
    source: str | os.PathLike[str], destination: str | os.PathLike[str], *, imgsz: int | None = None
) -> ConvertedCheckpoint:
    """Convert the reference checkpoint ``source`` into lucid-core weights at the stem ``destination``.

    ``imgsz`` (default: the source's) is the image size recorded. A bad value, a missing source or a destination
    that is the source raises :class:`~lucid_core.cli_errors.UsageError`; a refused or unreadable source
    :class:`~lucid_core.interop.reference.CheckpointImportError` or
    :class:`~lucid_core.interop.unpickler.RefusedGlobalError`.
    """
    if imgsz is not None and imgsz <= 0:
        raise UsageError(f"--imgsz {imgsz}: expected a positive image size, e.g. 640")
    weights_out, config_out = checkpoint_paths(destination)
    for output in (weights_out, config_out):
        refuse_overwrite("destination", output, [source])
    try:
        model, config = import_checkpoint(source)
    except (CheckpointImportError, RefusedGlobalError):
        raise
    except FileNotFoundError as exc:
        raise UsageError(f"source {source}: no such file; expected a reference .pt checkpoint") from exc
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as exc:
        raise CheckpointImportError(
            f"{source}: not a readable reference checkpoint ({type(exc).__name__}: {exc}); expected a .pt "
            "file written by torch.save (a zip archive holding data.pkl)"
        ) from exc
    record = config.to_dict()
    record.pop("model")
    weights = save_model(
        model,
        destination,
        names=config.names,
        imgsz=imgsz if imgsz is not None else config.imgsz,
        extra={"imported_from": record},
    )
    return ConvertedCheckpoint(os.fspath(source), weights, model, config)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli("lucid-convert", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    print(convert(args.source, args.destination, imgsz=args.imgsz).summary())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
