"""lucid-core checkpoint format (weights as ``.safetensors`` plus a JSON config next to them) and :func:`load`.

``save_model(model, "runs/best")`` writes ``runs/best.safetensors`` (the model's ``state_dict``, every tensor saved
as is, so a round trip is bit-exact) and ``runs/best.json``::

    {"format": "lucid-checkpoint/1", "weights": "best.safetensors", "weights_sha256": "...",
     "weights_bytes": 123, "model": {<ModelConfig as dict: family, task, scale, num_classes, kpt_shape, ...>},
     "family": ..., "task": ..., "scale": ..., "num_classes": ..., "kpt_shape": ..., "names": [...],
     "imgsz": 640, "versions": {"lucid_core": ..., "torch": ..., "safetensors": ...}, "extra": {...}}

The pair is replaced as one unit: the new weights are first written (atomically) to the *pending* file
``.best.safetensors.pending`` next to the target, then the JSON, which carries the pending file's sha256, replaces
the old JSON, and finally the pending file is renamed onto ``best.safetensors``. A crash at any point leaves a
loadable pair: before the JSON rename the old pair is intact (:func:`repair_checkpoint` removes a stale pending
file); after it the JSON names the pending file's digest and :func:`load` reads the pending file.

:func:`load` is the one model loader: a lucid checkpoint (rebuilt with ``build_model(**config["model"])``, the
hash, key set and every shape checked; any mismatch raises :class:`CheckpointError` naming the file) or a reference
``.pt`` imported in memory, or an exported model (:mod:`lucid_core.export`: ONNX, TorchScript, an OpenVINO IR
folder, a TensorRT engine) run by its runtime behind a :class:`~lucid_core.export.ExportedModel`.
``load_checkpoint``, ``load_weights`` and ``load_model`` are deprecated uses of it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import safetensors
import safetensors.torch
import torch
from torch import Tensor, nn

import lucid_core
from lucid_core.atomic import atomic_path, atomic_write_json
from lucid_core.digest import file_sha256 as file_sha256  # re-exported
from lucid_core.errors import CheckpointError as CheckpointError  # re-exported
from lucid_core.errors import CheckpointImportError, RefusedGlobalError
from lucid_core.export.loaded import exported_files, exported_kind, load_exported
from lucid_core.interop.reference import import_checkpoint
from lucid_core.models import YOLOModel, build_model

FORMAT = "lucid-checkpoint/1"
WEIGHTS_SUFFIX = ".safetensors"
CONFIG_SUFFIX = ".json"
_MAX_LISTED = 5


SourceKind = Literal["lucid", "reference", "exported"]
#: what :func:`load` reads, as its errors name it
SUPPORTED_SOURCES = (
    "a lucid checkpoint (a stem, its .safetensors or .json file, or a run directory holding best.json), a "
    "reference .pt/.pth checkpoint or a model lucid-export wrote (.onnx, .torchscript, an OpenVINO IR folder, "
    ".engine)"
)
REFERENCE_SUFFIXES = (".pt", ".pth")
#: suffixes of exported models: those :mod:`lucid_core.export` loads, and TFLite (not loadable)
EXPORTED_SUFFIXES = frozenset(
    {".onnx", ".engine", ".torchscript", ".tflite", ".mlmodel", ".mlpackage", ".xml"}
)
#: the lucid checkpoint :func:`load` reads in a run directory
RUN_DIRECTORY_STEM = "best"


@dataclass
class Checkpoint:
    """A loaded model with its metadata: class ``names``, training ``imgsz``, the model ``config`` (a saved
    checkpoint's JSON ``model`` field), ``extra`` (``extra["imported"]``: what the importer of a reference ``.pt``
    learned; ``extra["export"]``: an exported model's metadata record), the file read (``weights_path``) and
    ``source_kind`` (``"lucid"``, ``"reference"`` or ``"exported"``; then ``model`` is an
    :class:`~lucid_core.export.ExportedModel`)."""

    model: YOLOModel = field(repr=False)
    names: list[str]
    imgsz: int
    config: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    weights_path: Path | None = None
    source_kind: SourceKind = "lucid"

    @property
    def task(self) -> str:
        return self.model.task

    @property
    def family(self) -> str:
        return self.model.family

    @property
    def scale(self) -> str:
        return self.model.scale


def checkpoint_paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(weights, config)`` paths for ``path`` given as a stem, the ``.safetensors`` file or the ``.json`` file."""
    p = Path(path)
    if p.suffix in (WEIGHTS_SUFFIX, CONFIG_SUFFIX):
        stem = p.with_suffix("")
    else:
        stem = p
    return stem.with_name(stem.name + WEIGHTS_SUFFIX), stem.with_name(stem.name + CONFIG_SUFFIX)


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
    pending = pending_weights_path(weights_path)
    with atomic_path(pending) as tmp_weights:
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
    os.replace(pending, weights_path)
    return weights_path


def pending_weights_path(weights_path: Path) -> Path:
    """Where :func:`save_model` writes new weights before the JSON names them: ``.<name>.pending`` beside them."""
    return weights_path.with_name(f".{weights_path.name}.pending")


#: ``lucid_core.atomic.atomic_path`` temporaries: ``.<final name>.<8 mkstemp characters>.tmp``.
_ATOMIC_TEMPORARY = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")


def is_atomic_temporary(name: str) -> bool:
    """True for a file name :func:`lucid_core.atomic.atomic_path` gives its temporaries (and nothing else)."""
    return bool(_ATOMIC_TEMPORARY.match(name))


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Delete the atomic-write temporaries a killed writer left in ``folder``; returns what was removed.

    Only names of our own making (:func:`is_atomic_temporary`) directly inside ``folder`` are touched; call it
    only when no other process writes into ``folder`` (e.g. at the start of a run that owns the directory).
    """
    removed: list[Path] = []
    base = Path(folder)
    if not base.is_dir():
        return removed
    for entry in base.iterdir():
        if entry.is_file() and is_atomic_temporary(entry.name):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def repair_checkpoint(path: str | os.PathLike[str]) -> str:
    """Finish or roll back a :func:`save_model` that was interrupted; returns what was done.

    ``"rolled forward"``: the JSON names the pending file's digest, which is renamed onto the weights;
    ``"removed pending"``: a pending file the JSON does not name (written before a crash) is deleted;
    ``"ok"``: nothing to do. Weights and JSON that disagree with no pending file to repair them stay as they are
    (:func:`load` then names the mismatch).
    """
    weights_path, config_path = checkpoint_paths(path)
    pending = pending_weights_path(weights_path)
    if not pending.is_file():
        return "ok"
    try:
        record = _read_config(config_path)
    except CheckpointError:
        record = {}
    if record.get("weights_sha256") == file_sha256(pending):
        os.replace(pending, weights_path)
        return "rolled forward"
    pending.unlink(missing_ok=True)
    return "removed pending"


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


def resolve_source(path: str | os.PathLike[str]) -> tuple[SourceKind, Path]:
    """What :func:`load` reads for ``path``: ``("reference", the .pt)``, ``("exported", the file or IR folder)``
    or ``("lucid", its stem or file)``.

    A directory without a ``<dir>.json`` beside it stands for the run's ``best`` checkpoint inside it, else, if it
    holds an OpenVINO IR with lucid metadata, for that IR. A Lightning ``.ckpt``, a missing or unsupported exported
    model (TFLite) or any other existing file raises :class:`CheckpointError` naming the path and what is
    supported; a lucid stem whose files are missing is left to the reader (it names the missing file).
    """
    source = Path(path)
    if source.suffix == ".ckpt":
        raise CheckpointError(
            f"{source}: a Lightning training checkpoint, not a lucid checkpoint (.safetensors + .json); pass the "
            f"exported model of its run, e.g. {source.with_name('best')} (best.safetensors + best.json)."
        )
    if source.suffix in REFERENCE_SUFFIXES:
        return "reference", source
    if not source.is_dir() and exported_kind(source) is not None:
        if not source.exists():
            raise CheckpointError(
                f"{source}: an exported model ({source.suffix}) that does not exist; lucid_core.load reads "
                f"{SUPPORTED_SOURCES}."
            )
        return "exported", source
    if source.suffix in (WEIGHTS_SUFFIX, CONFIG_SUFFIX) or checkpoint_paths(source)[1].is_file():
        return "lucid", source
    if source.is_dir() and checkpoint_paths(source / RUN_DIRECTORY_STEM)[1].is_file():
        return "lucid", source / RUN_DIRECTORY_STEM
    if source.is_dir() and exported_kind(source) is not None:
        return "exported", source
    if source.suffix in EXPORTED_SUFFIXES:
        raise CheckpointError(
            f"{source}: an exported model ({source.suffix}), which lucid_core.load cannot read; it reads "
            f"{SUPPORTED_SOURCES}."
        )
    if source.exists():
        raise CheckpointError(f"{source}: not a model lucid_core.load reads; it reads {SUPPORTED_SOURCES}.")
    return "lucid", source


def source_files(path: str | os.PathLike[str]) -> list[Path]:
    """Every file :func:`load` may read for ``path`` (present or not): the ``.pt``, an exported model's files, or
    config, weights and the pending weights of a lucid checkpoint."""
    kind, source = resolve_source(path)
    if kind == "reference":
        return [source]
    if kind == "exported":
        return exported_files(source)
    weights, config = checkpoint_paths(source)
    return [config, weights, pending_weights_path(weights)]


def _read_lucid(source: Path) -> Checkpoint:
    """A lucid checkpoint on the CPU: format, size, sha256, class count, key set and shapes checked."""
    weights_path, config_path = checkpoint_paths(source)
    record = _read_config(config_path)
    pending = pending_weights_path(weights_path)
    if pending.is_file() and (
        not weights_path.is_file() or file_sha256(weights_path) != record["weights_sha256"]
    ):
        weights_path = pending  # save_model was interrupted after the JSON named the new weights
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
    return Checkpoint(
        model=model,
        names=[str(n) for n in record["names"]],
        imgsz=int(record.get("imgsz", 640)),
        config=dict(record["model"]),
        extra=dict(record.get("extra") or {}),
        weights_path=weights_path,
        source_kind="lucid",
    )


def _read_reference(source: Path) -> Checkpoint:
    """A reference ``.pt`` imported in memory by the restricted unpickler (nothing executed, nothing written)."""
    if not source.is_file():
        raise CheckpointError(f"{source}: reference checkpoint not found")
    try:
        model, imported = import_checkpoint(source)
    except (CheckpointImportError, RefusedGlobalError) as exc:
        raise CheckpointError(f"{source}: cannot import this reference checkpoint ({exc})") from exc
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as exc:  # as lucid-convert
        raise CheckpointError(
            f"{source}: not a readable reference checkpoint ({type(exc).__name__}: {exc})"
        ) from exc
    return Checkpoint(
        model=model,
        names=[str(n) for n in imported.names],
        imgsz=int(imported.imgsz),
        config=_json_ready(_model_config(model)),  # as a saved checkpoint's JSON holds it
        extra={"imported": imported.to_dict()},
        weights_path=source,
        source_kind="reference",
    )


def _read_exported(source: Path) -> Checkpoint:
    """An exported model run by its runtime (:func:`lucid_core.export.load_exported`), with its metadata record."""
    model = load_exported(source)
    return Checkpoint(
        model=model,
        names=list(model.names),
        imgsz=max(model.imgsz),
        config=dict(model.metadata["config"]),
        extra={"export": model.metadata},
        weights_path=source,
        source_kind="exported",
    )


_READERS: dict[SourceKind, Callable[[Path], Checkpoint]] = {
    "lucid": _read_lucid,
    "reference": _read_reference,
    "exported": _read_exported,
}


def load(path: str | os.PathLike[str], *, device: str | torch.device | None = None) -> Checkpoint:
    """Load a model to run, with its metadata (:class:`Checkpoint`), in eval mode on ``device`` (default CPU).

    ``path``: a lucid checkpoint (the stem, its ``.safetensors`` or ``.json``, or a run directory holding
    ``best.json``), a reference ``.pt``/``.pth`` (imported in memory by the restricted unpickler: nothing
    executed, nothing written; it keeps its class names and training ``imgsz``) or a model lucid-export wrote
    (its runtime must be installed; ``imgsz`` is the exported size). Every failure, and any other kind of file,
    raises :class:`CheckpointError` naming the path (:func:`resolve_source`).
    """
    kind, source = resolve_source(path)
    checkpoint = _READERS[kind](source)
    checkpoint.model.to("cpu" if device is None else device)
    checkpoint.model.eval()
    return checkpoint


def _deprecated(name: str) -> None:
    warnings.warn(
        f"lucid_core.checkpoint.{name} is deprecated and will be removed in the next release; use "
        "lucid_core.load(path) (a Checkpoint: .model, .names, .imgsz, .task)",
        DeprecationWarning,
        stacklevel=3,
    )


def _load_lucid_only(path: str | os.PathLike[str], map_location: str | torch.device) -> Checkpoint:
    source = Path(path)
    if source.suffix in REFERENCE_SUFFIXES:
        raise CheckpointError(
            f"{source}: a reference (pickled) checkpoint, not a lucid checkpoint (.safetensors + .json); convert "
            f"it once with `lucid-convert {source} {source.with_suffix('')}` and pass {source.with_suffix('')} "
            "(nothing was unpickled)."
        )
    return load(source, device=map_location)


def load_checkpoint(path: str | os.PathLike[str], *, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Deprecated: :func:`load` restricted to lucid checkpoints (a reference ``.pt`` is refused)."""
    _deprecated("load_checkpoint")
    return _load_lucid_only(path, map_location)


def load_weights(path: str | os.PathLike[str], *, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Deprecated: :func:`load`."""
    _deprecated("load_weights")
    return load(path, device=map_location)


def load_model(path: str | os.PathLike[str], *, map_location: str | torch.device = "cpu") -> YOLOModel:
    """Deprecated: ``load(path).model`` restricted to lucid checkpoints."""
    _deprecated("load_model")
    return _load_lucid_only(path, map_location).model


@dataclass
class TrainingStart:
    """Weights to fine-tune from (:func:`load_for_training`): the model in training mode and what was adapted."""

    model: YOLOModel
    names: list[str]
    source: Path
    source_config: dict[str, Any]
    #: module names whose tensors did not fit the new head and keep their fresh initialisation
    reinitialised: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _module_of(key: str) -> str:
    return key.rpartition(".")[0]


def _head_prefix(state: Mapping[str, Tensor]) -> str:
    """``layers.<last>.``: the head is the last layer of a :class:`~lucid_core.models.YOLOModel`."""
    indices = [int(k.split(".")[1]) for k in state if k.startswith("layers.") and k.split(".")[1].isdigit()]
    return f"layers.{max(indices)}." if indices else ""


def load_for_training(
    path: str | os.PathLike[str],
    *,
    num_classes: int,
    task: str | None = None,
    kpt_shape: Sequence[int] | None = None,
) -> TrainingStart:
    """Weights to fine-tune from: a lucid checkpoint or a reference ``.pt`` (converted on the fly, nothing executed).

    The network is the checkpoint's family and scale, with ``task`` (default: the checkpoint's), ``num_classes``
    and ``kpt_shape`` (default: the checkpoint's) of the new run. Every tensor whose name and shape fit is copied;
    the head layers whose shapes change with the class count, keypoint shape or task (e.g. the classification
    convolutions' last layer) keep their fresh initialisation and are listed in ``reinitialised`` and ``notes``.
    The model is returned in training mode: a loaded checkpoint is in eval mode, and
    Lightning keeps submodule modes, so an eval-mode detector would hand the loss decoded boxes.
    """
    source = Path(path)
    notes: list[str] = []
    checkpoint = load(source)
    if checkpoint.source_kind == "exported":
        raise CheckpointError(
            f"{source}: an exported model holds no trainable weights; fine-tune from the lucid checkpoint it was "
            "exported from"
        )
    loaded, names = checkpoint.model, list(checkpoint.names)
    if checkpoint.source_kind == "reference":
        notes.append(f"{source}: reference checkpoint converted on the fly (restricted unpickler)")
    stored_config = dict(dataclasses.asdict(loaded.config))
    target = dict(stored_config)
    target["num_classes"] = int(num_classes)
    if task is not None and task != stored_config["task"]:
        target["task"] = task
        for option in ("kpt_shape", "num_masks", "num_angles"):
            target[option] = None
        notes.append(f"task {stored_config['task']} weights trained as {task}: the head is adapted")
    if kpt_shape is not None:
        target["kpt_shape"] = tuple(int(v) for v in kpt_shape)
    try:
        model = build_model(**_config_for_build(target))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{source}: cannot build a {target} model from these weights ({exc})") from exc
    stored = loaded.state_dict()
    fresh = model.state_dict()
    fitting = {k: v for k, v in stored.items() if k in fresh and tuple(v.shape) == tuple(fresh[k].shape)}
    changed = sorted({_module_of(k) for k in fresh if k not in fitting})
    head_prefix = _head_prefix(fresh)
    outside_head = [k for k in fresh if k not in fitting and not k.startswith(head_prefix)]
    if outside_head:
        key = outside_head[0]
        found = f"shape {tuple(stored[key].shape)}" if key in stored else "missing"
        raise CheckpointError(
            f"{source}: {len(outside_head)} tensor(s) outside the head do not fit a {target['family']} "
            f"{target['scale']} {target['task']} model (first: {key}: {found}, expected "
            f"{tuple(fresh[key].shape)}); only the head may differ when fine-tuning"
        )
    model.load_state_dict(fitting, strict=False)
    if changed:
        shown = ", ".join(changed[:_MAX_LISTED]) + (
            f" (+{len(changed) - _MAX_LISTED} more)" if len(changed) > _MAX_LISTED else ""
        )
        notes.append(
            f"{source}: {len(changed)} head layer(s) re-initialised for {num_classes} classes"
            + (f", kpt_shape {list(target['kpt_shape'])}" if target.get("kpt_shape") else "")
            + f" (the weights have {stored_config['num_classes']}): {shown}"
        )
    if len(names) != int(num_classes):
        names = [str(i) for i in range(int(num_classes))]
    model.train()
    return TrainingStart(
        model=model,
        names=names,
        source=source,
        source_config=stored_config,
        reinitialised=changed,
        notes=notes,
    )
