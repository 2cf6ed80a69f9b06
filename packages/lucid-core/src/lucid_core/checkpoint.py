"""lucid-core checkpoint format: weights as ``.safetensors`` plus a JSON config next to them.

Layout (issue 3, "Checkpoint format owned by lucid-core"): ``save_model(model, "runs/best")`` writes
``runs/best.safetensors`` (the model's ``state_dict``, every tensor saved as is, so a round trip is bit-exact)
and ``runs/best.json``::

    {"format": "lucid-checkpoint/1", "weights": "best.safetensors", "weights_sha256": "...",
     "weights_bytes": 123, "model": {<ModelConfig as dict: family, task, scale, num_classes, kpt_shape, ...>},
     "family": ..., "task": ..., "scale": ..., "num_classes": ..., "kpt_shape": ..., "names": [...],
     "imgsz": 640, "versions": {"lucid_core": ..., "torch": ..., "safetensors": ...}, "extra": {...}}

Both files are written atomically (temporary file in the same folder + ``os.replace``), weights first, so a
crash leaves either the old pair or a weights file whose hash the JSON does not match (detected on load).
``load_model`` rebuilds the network with ``lucid_core.models.build_model(**config["model"])`` and checks
the hash, the key set and every shape; any mismatch raises :class:`CheckpointError` naming the file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safetensors
import safetensors.torch
import torch
from torch import Tensor, nn

import lucid_core
from lucid_core.atomic import atomic_path, atomic_write_json
from lucid_core.models import YOLOModel, build_model

FORMAT = "lucid-checkpoint/1"
WEIGHTS_SUFFIX = ".safetensors"
CONFIG_SUFFIX = ".json"
_MAX_LISTED = 5


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, or does not match the model its config describes."""


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model plus the metadata stored next to it."""

    model: YOLOModel
    names: list[str]
    imgsz: int
    config: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    weights_path: Path | None = None


def checkpoint_paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(weights, config)`` paths for ``path`` given as a stem, the ``.safetensors`` file or the ``.json`` file."""
    p = Path(path)
    if p.suffix in (WEIGHTS_SUFFIX, CONFIG_SUFFIX):
        stem = p.with_suffix("")
    else:
        stem = p
    return stem.with_name(stem.name + WEIGHTS_SUFFIX), stem.with_name(stem.name + CONFIG_SUFFIX)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (weights hashes in checkpoints, reports and imports)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _json_ready(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_json_ready(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    return value


def _model_config(model: nn.Module) -> dict[str, Any]:
    config = getattr(model, "config", None)
    if config is None or not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(
            f"save_model: {type(model).__name__} has no dataclass `config`; only models built by "
            "lucid_core.models.build_model can be saved"
        )
    return dict(dataclasses.asdict(config))


def save_model(
    model: nn.Module,
    path: str | os.PathLike[str],
    *,
    names: Sequence[str] | Mapping[int, str] | None = None,
    imgsz: int = 640,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``<path>.safetensors`` + ``<path>.json`` atomically; returns the weights path.

    ``names`` are the class names (a list, or a ``{index: name}`` mapping); default ``"0", "1", …``.
    ``extra`` must be JSON-serialisable (e.g. training recipe, epoch, metrics).
    """
    config = _model_config(model)
    num_classes = int(config["num_classes"])
    if names is None:
        name_list = [str(i) for i in range(num_classes)]
    elif isinstance(names, Mapping):
        name_list = [str(names[i]) for i in sorted(names)]
    else:
        name_list = [str(n) for n in names]
    if len(name_list) != num_classes:
        raise ValueError(
            f"save_model: {len(name_list)} class names given for a model with {num_classes} classes"
        )

    weights_path, config_path = checkpoint_paths(path)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    # clone: safetensors refuses tensors sharing storage; contiguous CPU copies keep every bit
    tensors = {k: v.detach().to("cpu").clone().contiguous() for k, v in model.state_dict().items()}
    with atomic_path(weights_path) as tmp_weights:
        safetensors.torch.save_file(tensors, str(tmp_weights), metadata={"format": FORMAT})
        sha = file_sha256(tmp_weights)
        size = tmp_weights.stat().st_size

    record: dict[str, Any] = {
        "format": FORMAT,
        "weights": weights_path.name,
        "weights_sha256": sha,
        "weights_bytes": size,
        "model": _json_ready(config),
        "family": config.get("family"),
        "task": config.get("task"),
        "scale": config.get("scale"),
        "num_classes": num_classes,
        "kpt_shape": _json_ready(config.get("kpt_shape")),
        "names": name_list,
        "imgsz": int(imgsz),
        "versions": {
            "lucid_core": lucid_core.__version__,
            "torch": torch.__version__,
            "safetensors": safetensors.__version__,
        },
        "extra": _json_ready(dict(extra or {})),
    }
    atomic_write_json(config_path, record)
    return weights_path


def _config_for_build(stored: Mapping[str, Any]) -> dict[str, Any]:
    # JSON has no tuples: kpt_shape comes back as a list
    return {k: (tuple(v) if isinstance(v, list) else v) for k, v in stored.items()}


def _compare_state(file: Path, expected: Mapping[str, Tensor], stored: Mapping[str, Tensor]) -> None:
    missing = sorted(set(expected) - set(stored))
    unexpected = sorted(set(stored) - set(expected))
    shapes = [
        f"{k}: file {tuple(stored[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in expected
        if k in stored and tuple(stored[k].shape) != tuple(expected[k].shape)
    ]
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing key(s) {missing[:_MAX_LISTED]}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected key(s) {unexpected[:_MAX_LISTED]}")
    if shapes:
        problems.append(f"{len(shapes)} shape mismatch(es) [{'; '.join(shapes[:_MAX_LISTED])}]")
    if problems:
        raise CheckpointError(f"{file}: weights do not match the configured model: " + ", ".join(problems))


def _read_config(config_path: Path) -> dict[str, Any]:
    if not config_path.is_file():
        raise CheckpointError(f"{config_path}: checkpoint config not found")
    try:
        record = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{config_path}: not valid JSON ({exc})") from exc
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        found = record.get("format") if isinstance(record, dict) else type(record).__name__
        raise CheckpointError(f"{config_path}: format is {found!r}, expected {FORMAT!r}")
    for key in ("model", "names", "weights_sha256"):
        if key not in record:
            raise CheckpointError(f"{config_path}: field {key!r} is missing")
    model_cfg = record["model"]
    if not isinstance(model_cfg, dict) or "num_classes" not in model_cfg:
        raise CheckpointError(f"{config_path}: field 'model' must be a model config with 'num_classes'")
    if len(record["names"]) != model_cfg["num_classes"]:
        raise CheckpointError(
            f"{config_path}: class count mismatch: {len(record['names'])} names but "
            f"model.num_classes = {model_cfg['num_classes']}"
        )
    return record


def load_checkpoint(path: str | os.PathLike[str], *, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Load model and metadata; ``path`` is the stem, the ``.safetensors`` or the ``.json`` file."""
    weights_path, config_path = checkpoint_paths(path)
    record = _read_config(config_path)
    if not weights_path.is_file():
        raise CheckpointError(f"{weights_path}: weights file not found (named by {config_path})")
    size = weights_path.stat().st_size
    if "weights_bytes" in record and size != record["weights_bytes"]:
        raise CheckpointError(
            f"{weights_path}: size {size} bytes, config says {record['weights_bytes']} (truncated or replaced)"
        )
    sha = file_sha256(weights_path)
    if sha != record["weights_sha256"]:
        raise CheckpointError(
            f"{weights_path}: sha256 {sha} does not match {record['weights_sha256']} in {config_path}"
        )
    try:
        stored = safetensors.torch.load_file(str(weights_path), device="cpu")
    except Exception as exc:  # safetensors raises its own error types for malformed headers
        raise CheckpointError(f"{weights_path}: cannot read safetensors data ({exc})") from exc

    try:
        model = build_model(**_config_for_build(record["model"]))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{config_path}: cannot build the model from field 'model' ({exc})") from exc
    expected = model.state_dict()
    _compare_state(weights_path, expected, stored)
    model.load_state_dict(stored, strict=True)
    model.to(map_location)
    model.eval()
    return Checkpoint(
        model=model,
        names=[str(n) for n in record["names"]],
        imgsz=int(record.get("imgsz", 640)),
        config=dict(record["model"]),
        extra=dict(record.get("extra") or {}),
        weights_path=weights_path,
    )


def load_model(path: str | os.PathLike[str], *, map_location: str | torch.device = "cpu") -> YOLOModel:
    """Load a :class:`~lucid_core.models.YOLOModel` saved by :func:`save_model` (eval mode)."""
    return load_checkpoint(path, map_location=map_location).model
