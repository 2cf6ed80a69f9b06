"""What travels with every exported model: the record :func:`export_metadata` builds and loading reads back.

The record is a JSON object (``"format": "lucid-export/1"``) with the task, class names, input size, strides,
keypoint shape, model config, which graph output the file holds (``output``: ``"dense"``, ``"topk"`` or ``"nms"``),
the head branch behind it and the decode mode that reads it, the precision and the lucid-core version. ONNX keeps
it in ``metadata_props`` (key :data:`METADATA_KEY`), TorchScript and Core ML inside the file, an OpenVINO IR
folder in :data:`IR_METADATA_FILE`, a TensorRT engine beside it (:func:`sidecar_path`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lucid_core
from lucid_core.errors import CheckpointError
from lucid_core.models import YOLOModel

__all__ = [
    "IR_METADATA_FILE",
    "METADATA_FORMAT",
    "METADATA_KEY",
    "export_metadata",
    "parse_metadata",
    "sidecar_path",
]

METADATA_FORMAT = "lucid-export/1"
#: the ONNX metadata_props key and the TorchScript extra file holding the record
METADATA_KEY = "lucid_metadata"
#: the record's file inside an OpenVINO IR folder
IR_METADATA_FILE = "metadata.json"
_REQUIRED = ("task", "names", "imgsz", "strides", "num_classes", "output", "config")


def sidecar_path(path: str | Path) -> Path:
    """The record beside a single-file export: ``model.engine`` -> ``model.engine.lucid.json``."""
    p = Path(path)
    return p.with_name(p.name + ".lucid.json")


def export_metadata(
    model: YOLOModel,
    *,
    export_format: str,
    names: Sequence[str],
    imgsz: tuple[int, int],
    batch: int | None,
    output: str,
    branch: str | None,
    max_det: int,
    precision: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of ``model`` exported as ``export_format`` (module docstring); ``batch`` None = dynamic.

    ``output``: ``"dense"`` (the eval tensor), ``"topk"`` (in-graph top-k rows) or ``"nms"`` (in-graph NMS rows);
    ``branch``: the end-to-end head branch behind it (None for one-branch heads); the one-to-one branch is decoded
    with top-k, everything else with NMS.
    """
    end2end = bool(model.end2end)
    config = {
        k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(model.config).items()
    }
    return {
        "format": METADATA_FORMAT,
        "export_format": export_format,
        "task": model.task,
        "family": model.family,
        "scale": model.scale,
        "num_classes": int(model.num_classes),
        "names": [str(n) for n in names],
        "imgsz": [int(imgsz[0]), int(imgsz[1])],
        "batch": batch,
        "strides": [int(s) for s in model.strides],
        "stride": int(max(model.strides)),
        "kpt_shape": list(model.kpt_shape) if model.kpt_shape is not None else None,
        "end2end": end2end,
        "output": output,
        "branch": branch,
        "decode": "topk" if branch == "one2one" else "nms",
        "max_det": int(max_det),
        "precision": precision,
        "config": config,
        "lucid_version": lucid_core.__version__,
        **dict(extra or {}),
    }


def parse_metadata(text: str | bytes, source: Path) -> dict[str, Any]:
    """The record in ``text``, checked; a foreign or damaged record raises :class:`CheckpointError` naming
    ``source``."""
    try:
        record = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{source}: the lucid export metadata is not valid JSON ({exc})") from exc
    if not isinstance(record, dict) or record.get("format") != METADATA_FORMAT:
        found = record.get("format") if isinstance(record, dict) else type(record).__name__
        raise CheckpointError(f"{source}: export metadata format is {found!r}, expected {METADATA_FORMAT!r}")
    missing = [key for key in _REQUIRED if key not in record]
    if missing:
        raise CheckpointError(f"{source}: export metadata lacks {', '.join(missing)}")
    if len(record["names"]) != record["num_classes"]:
        raise CheckpointError(
            f"{source}: export metadata has {len(record['names'])} names for {record['num_classes']} classes"
        )
    return record
