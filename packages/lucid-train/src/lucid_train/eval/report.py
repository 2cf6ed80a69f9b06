"""The ``lucid-eval`` JSON reports: scores plus everything needed to reproduce them, written atomically."""

from __future__ import annotations

import json
import math
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from lucid_core.atomic import atomic_write_text
from lucid_core.checkpoint import file_sha256
from lucid_train.eval.accuracy import AccuracyResult
from lucid_train.eval.evaluator import EvalResult

REPORT_FORMAT = "lucid-eval-report/1"
_VERSIONED = ("lucid-core", "lucid-data", "lucid-train", "torch", "numpy", "faster-coco-eval", "pycocotools")


sha256_file = file_sha256  # the weights hash recorded in reports is lucid-core's checkpoint hash


def versions() -> dict[str, str | None]:
    """Installed versions of the packages the score depends on (None when absent)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def finite_json(value: Any) -> Any:
    """``value`` with every NaN/inf float (nested in dicts, lists, tuples) replaced by None: JSON has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def build_report(result: EvalResult | AccuracyResult, **run: Any) -> dict[str, Any]:
    """Report dict: ``format``, the run settings given as keyword arguments, ``versions`` and the scores (COCO
    mAP per IoU type, or a classifier's ``top1``/``top5``, per-class table and confusion matrix)."""
    report: dict[str, Any] = {"format": REPORT_FORMAT, **run, "versions": versions()}
    report.update(result.to_dict())
    return finite_json(report)  # type: ignore[no-any-return]


def write_report(path: str | os.PathLike[str], report: dict[str, Any]) -> Path:
    """Write JSON atomically: a temporary file in the same folder, flushed, then ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(report, indent=2, allow_nan=False) + "\n")
    return path
