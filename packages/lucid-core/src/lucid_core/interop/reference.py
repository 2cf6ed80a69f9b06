"""Import reference-format (pickled) YOLOv8 / YOLO11 / YOLO26 checkpoints into :class:`~lucid_core.models.YOLOModel`.

The file is read with :mod:`lucid_core.interop.unpickler` (no code runs), giving a tree of inert stand-ins whose
pickled attributes describe the network (shared/weights/README.md, "Notes that matter for an importer"):

- task from the head class (``Detect`` / ``Segment`` / ``Pose`` / ``OBB`` / ``Classify``, also with suffixes);
- family: an end-to-end head (``end2end`` flag or ``one2one_*`` branches) with reg_max 1 is YOLO26; otherwise the
  blocks decide, ``C3k2`` → YOLO11, ``C2f`` → YOLOv8; a family named by the yaml file (``yolo26n-cls.yaml``) is
  taken instead when it builds the very same model for the task (YOLO11/YOLO26 classifiers);
- scale: the yaml ``scale`` key, else the yaml ``depth_multiple`` / ``width_multiple`` (the fall detector has no
  ``scales`` block), else every scale whose stem width equals ``model.0.conv.weight``'s; each candidate is built
  and the first whose state-dict keys and shapes all agree is used;
- ``nc`` / ``kpt_shape`` / ``nm`` / ``ne`` from the head (the task's ``reference_num_classes`` /
  ``reference_options``; the pose yaml's ``nc: 80`` is stale, so the head is trusted), ``names`` from the model,
  ``imgsz`` from ``train_args``.

Weights come from ``ema`` when present, else ``model``. Key mapping: the reference's ``model.{i}.<rest>`` is our
``layers.{i}.<rest>`` (docs/INTERFACES.md, "The model"), identical for all families and tasks (the YOLO26 one-to-one
branch keeps its ``one2one_`` prefix; a deployed YOLO26 checkpoint without the one-to-many branch is loaded into
``to_deployed()`` form). Tensors are converted to float32 (they are stored float16). A layout that does not match
exactly is refused with the first mismatching key and its shapes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from lucid_core.digest import file_sha256
from lucid_core.errors import CheckpointImportError
from lucid_core.interop import unpickler
from lucid_core.interop.unpickler import StandInModule
from lucid_core.models import ModelConfig, YOLOModel, build_model, get_family
from lucid_core.models.graph import scale_channels
from lucid_core.models.registry import registered_families
from lucid_core.tasks import Task, int_attribute, registered_tasks, task_of_reference_head

REFERENCE_PREFIX = "model."
LUCID_PREFIX = "layers."
DEFAULT_IMGSZ = 640


@dataclass
class ImportedConfig:
    """What :func:`import_checkpoint` learned about a reference checkpoint (JSON-serialisable via :meth:`to_dict`)."""

    model: ModelConfig
    names: list[str]
    imgsz: int
    strides: tuple[int, ...]
    source: str
    sha256: str
    weights_from: str  # "ema" or "model"
    model_class: str
    head_class: str
    deployed: bool = False
    reference: dict[str, Any] = field(default_factory=dict)  # version, date, license of the file

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["strides"] = list(self.strides)
        return record


# -- key mapping ---------------------------------------------------------------------------------------------------
def reference_to_lucid_key(key: str) -> str:
    """``model.{i}.<rest>`` → ``layers.{i}.<rest>``."""
    if not key.startswith(REFERENCE_PREFIX):
        raise CheckpointImportError(f"state-dict key {key!r} does not start with {REFERENCE_PREFIX!r}")
    return LUCID_PREFIX + key[len(REFERENCE_PREFIX) :]


def lucid_to_reference_key(key: str) -> str:
    """``layers.{i}.<rest>`` → ``model.{i}.<rest>`` (inverse of :func:`reference_to_lucid_key`)."""
    if not key.startswith(LUCID_PREFIX):
        raise ValueError(f"state-dict key {key!r} does not start with {LUCID_PREFIX!r}")
    return REFERENCE_PREFIX + key[len(LUCID_PREFIX) :]


def to_lucid_state_dict(reference_state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Rename reference keys and convert floating tensors to float32 (integer buffers keep their dtype)."""
    out: dict[str, Tensor] = {}
    for key, value in reference_state.items():
        tensor = value.detach().to("cpu")
        if tensor.is_floating_point():
            tensor = tensor.float()
        out[reference_to_lucid_key(key)] = tensor.contiguous()
    return out


def first_layout_mismatch(expected: Mapping[str, Tensor], stored: Mapping[str, Tensor]) -> str | None:
    """The first difference between two state dicts (model order), as text naming the key and shapes."""
    for key, value in expected.items():
        if key not in stored:
            return f"key {lucid_to_reference_key(key)!r} {tuple(value.shape)} is missing from the checkpoint"
        if tuple(stored[key].shape) != tuple(value.shape):
            return (
                f"key {lucid_to_reference_key(key)!r}: checkpoint shape {tuple(stored[key].shape)}, "
                f"expected {tuple(value.shape)}"
            )
    for key, value in stored.items():
        if key not in expected:
            return f"unexpected key {lucid_to_reference_key(key)!r} {tuple(value.shape)} in the checkpoint"
    return None


# -- reading -------------------------------------------------------------------------------------------------------
def read_reference_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checkpoint's top-level dict, unpickled with the restricted unpickler (modules are stand-ins).

    Raises :class:`~lucid_core.interop.unpickler.RefusedGlobalError` for a global outside the allowlist.
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: reference checkpoint not found")
    try:
        loaded = torch.load(file, pickle_module=unpickler, weights_only=False, map_location="cpu")
    except unpickler.RefusedGlobalError as exc:
        raise unpickler.RefusedGlobalError(exc.qualified_name, exc.reason, source=str(file)) from None
    if not isinstance(loaded, dict):
        raise CheckpointImportError(f"{file}: top level is {type(loaded).__name__}, expected a dict")
    return loaded


def reference_root(checkpoint: Mapping[str, Any], source: str = "checkpoint") -> tuple[StandInModule, str]:
    """``(module tree, "ema" | "model")``: the EMA weights when present, else the model weights."""
    for key in ("ema", "model"):
        value = checkpoint.get(key)
        if isinstance(value, StandInModule):
            return value, key
    found = {k: type(checkpoint.get(k)).__name__ for k in ("ema", "model")}
    raise CheckpointImportError(f"{source}: neither 'ema' nor 'model' holds a pickled model (found {found})")


def _layer_list(root: StandInModule, source: str) -> list[StandInModule]:
    sequence = root.children().get("model")
    if sequence is None:
        raise CheckpointImportError(f"{source}: {root.reference_class} has no 'model' layer list")
    layers = sequence.children()
    try:
        order = sorted(layers, key=int)
    except ValueError as exc:
        raise CheckpointImportError(f"{source}: layer names {sorted(layers)} are not indices") from exc
    if not order:
        raise CheckpointImportError(f"{source}: the layer list is empty")
    return [layers[k] for k in order]


def _task_of(head: StandInModule, source: str) -> Task:
    task = task_of_reference_head(head.class_name)
    if task is None:
        markers = "/".join(t.reference_head for t in registered_tasks() if t.reference_head)
        raise CheckpointImportError(f"{source}: head class {head.reference_class!r} is not a {markers} head")
    return task


def _family_of(
    layers: list[StandInModule], head: StandInModule, head_keys: Iterable[str], source: str
) -> str:
    end2end = bool(head.__dict__.get("end2end")) or any(k.startswith("one2one_") for k in head_keys)
    reg_max = int_attribute(head, "reg_max")
    if end2end:
        if reg_max not in (None, 1):
            raise CheckpointImportError(
                f"{source}: end-to-end head {head.reference_class} with reg_max {reg_max}: no registered family "
                "(yolo26 has reg_max 1)"
            )
        return "yolo26"
    classes = {m.class_name for layer in layers[:-1] for m in layer.walk()}
    if "C3k2" in classes:
        return "yolo11"
    if "C2f" in classes:
        return "yolov8"
    raise CheckpointImportError(
        f"{source}: cannot tell the family: no C2f (yolov8) or C3k2 (yolo11) block among {sorted(classes)}"
    )


def _same_model_family(structural: str, checkpoint_yaml: Mapping[str, Any], task: Task) -> str:
    """The family the yaml file name starts with, if it builds the same ``task`` model as ``structural`` (same
    layer graph, scale rows and C3k scales); else ``structural``."""
    stem = Path(str(checkpoint_yaml.get("yaml_file", ""))).name
    base = get_family(structural)
    for name in registered_families():
        other = get_family(name)
        if name == structural or not stem.startswith(name):
            continue
        same = (
            task.layer_graph(other) == task.layer_graph(base)
            and other.c3k_scales == base.c3k_scales
            and set(other.scales) == set(base.scales)
            and all(task.scale_row(other, s) == task.scale_row(base, s) for s in base.scales)
        )
        if same:
            return name
    return structural


def _names(root: StandInModule, num_classes: int) -> list[str]:
    raw = root.__dict__.get("names")
    if isinstance(raw, Mapping):
        return [str(raw.get(i, raw.get(str(i), i))) for i in range(num_classes)]
    if isinstance(raw, list | tuple) and len(raw) == num_classes:
        return [str(n) for n in raw]
    return [str(i) for i in range(num_classes)]


def _imgsz(checkpoint: Mapping[str, Any], root: StandInModule) -> int:
    for args in (checkpoint.get("train_args"), root.__dict__.get("args")):
        value = args.get("imgsz") if isinstance(args, Mapping) else getattr(args, "__dict__", {}).get("imgsz")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, list | tuple) and value and all(isinstance(v, int) for v in value):
            return int(max(value))
    return DEFAULT_IMGSZ


def _strides(root: StandInModule, head: StandInModule) -> tuple[int, ...] | None:
    for owner in (root, head):
        value = owner.__dict__.get("stride")
        if isinstance(value, Tensor) and value.ndim == 1:
            return tuple(round(float(s)) for s in value.tolist())
    return None


def _scale_candidates(family: str, checkpoint_yaml: Mapping[str, Any], stem_width: int | None) -> list[str]:
    spec = get_family(family)
    ordered: list[str] = []
    scale = checkpoint_yaml.get("scale")
    if isinstance(scale, str) and scale in spec.scales:
        ordered.append(scale)
    depth, width = checkpoint_yaml.get("depth_multiple"), checkpoint_yaml.get("width_multiple")
    if isinstance(depth, int | float) and isinstance(width, int | float):
        ordered += [
            s
            for s, row in spec.scales.items()
            if abs(row.depth - depth) < 1e-6 and abs(row.width - width) < 1e-6
        ]
    if stem_width is not None:
        ordered += [s for s, row in spec.scales.items() if scale_channels(64, row) == stem_width]
    if not ordered:
        ordered = list(spec.scales)
    return list(dict.fromkeys(ordered))


# -- the model -----------------------------------------------------------------------------------------------------
def build_matching_model(
    state: Mapping[str, Tensor],
    *,
    family: str,
    task: str,
    scales: list[str],
    num_classes: int,
    task_options: Mapping[str, Any],
    source: str = "checkpoint",
) -> YOLOModel:
    """Build the first candidate scale whose state-dict layout equals ``state`` (lucid keys); else refuse.

    A checkpoint whose head lacks the one-to-many branch (deployed YOLO26) is matched against ``to_deployed()``.
    """
    first_problem: str | None = None
    for scale in scales:
        model = build_model(family, task, scale, num_classes, **task_options)
        head_prefix = f"{LUCID_PREFIX}{len(model.layers) - 1}."
        if model.end2end and f"{head_prefix}cv2.0.0.conv.weight" not in state:
            model.to_deployed()
        problem = first_layout_mismatch(model.state_dict(), state)
        if problem is None:
            return model
        if first_problem is None:
            first_problem = f"{family}{scale}-{task} (nc={num_classes}): {problem}"
    raise CheckpointImportError(f"{source}: unsupported layout; first mismatch against {first_problem}")


def load_reference_weights(
    model: YOLOModel, state: Mapping[str, Tensor], source: str = "checkpoint"
) -> YOLOModel:
    """Load a renamed (lucid-key) state dict into ``model`` after checking every key and shape; eval mode."""
    problem = first_layout_mismatch(model.state_dict(), state)
    if problem is not None:
        raise CheckpointImportError(f"{source}: unsupported layout; {problem}")
    model.load_state_dict(dict(state), strict=True)
    return model.float().eval()


def adopt_batch_norm_constants(root: StandInModule, model: nn.Module) -> bool:
    """Give every BatchNorm of ``model`` the ``eps``/``momentum`` the checkpoint stores, when the checkpoint has as
    many BatchNorms as ``model`` and they all share one pair (its detection models store 1e-3 / 0.03, its
    classifiers PyTorch's 1e-5 / 0.1): a state dict carries neither, and ``eps`` moves every output. Returns
    whether the constants were adopted; otherwise the built ones (:attr:`Task.batch_norm`) stay."""
    stored = {
        (float(m.__dict__["eps"]), float(m.__dict__["momentum"]))
        for m in root.walk()
        if "BatchNorm" in m.class_name
        and isinstance(m.__dict__.get("eps"), float)
        and isinstance(m.__dict__.get("momentum"), float)
    }
    count = sum("BatchNorm" in m.class_name for m in root.walk())
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if len(stored) != 1 or count != len(norms):
        return False
    eps, momentum = stored.pop()
    for norm in norms:
        norm.eps, norm.momentum = eps, momentum
    return True


def import_reference_tree(
    checkpoint: Mapping[str, Any], *, source: str = "checkpoint", sha256: str = ""
) -> tuple[YOLOModel, ImportedConfig]:
    """:func:`import_checkpoint` on an already unpickled checkpoint dict (stand-in tree)."""
    root, weights_from = reference_root(checkpoint, source)
    layers = _layer_list(root, source)
    head = layers[-1]
    reference_state = root.state_tensors()
    state = to_lucid_state_dict(reference_state)
    head_prefix = f"{LUCID_PREFIX}{len(layers) - 1}."
    head_keys = [k[len(head_prefix) :] for k in state if k.startswith(head_prefix)]

    task = _task_of(head, source)
    yaml = root.__dict__.get("yaml")
    yaml_map: Mapping[str, Any] = yaml if isinstance(yaml, Mapping) else {}
    family = _same_model_family(_family_of(layers, head, head_keys, source), yaml_map, task)
    num_classes = task.reference_num_classes(head, state, head_prefix)
    if num_classes is None or num_classes < 1:
        raise CheckpointImportError(
            f"{source}: head {head.reference_class} has no valid 'nc' ({num_classes!r})"
        )
    options = task.reference_options(head, state, head_prefix)
    spec = get_family(family)
    strides = _strides(root, head)
    expected_strides = task.reference_strides(spec)
    if strides is not None and expected_strides is not None and strides != expected_strides:
        raise CheckpointImportError(f"{source}: strides {strides} differ from {family}'s {expected_strides}")
    stem = state.get(f"{LUCID_PREFIX}0.conv.weight")
    stem_width = int(stem.shape[0]) if stem is not None else None
    scales = _scale_candidates(family, yaml_map, stem_width)

    model = build_matching_model(
        state,
        family=family,
        task=task.name,
        scales=scales,
        num_classes=num_classes,
        task_options=options,
        source=source,
    )
    load_reference_weights(model, state, source)
    adopt_batch_norm_constants(root, model)
    config = ImportedConfig(
        model=model.config,
        names=_names(root, num_classes),
        imgsz=_imgsz(checkpoint, root),
        strides=tuple(model.strides),
        source=source,
        sha256=sha256,
        weights_from=weights_from,
        model_class=root.reference_class,
        head_class=head.reference_class,
        deployed=model.end2end and model.head.deployed,
        reference={
            k: checkpoint.get(k) for k in ("version", "date", "license") if isinstance(checkpoint.get(k), str)
        },
    )
    return model, config


def import_checkpoint(path: str | os.PathLike[str]) -> tuple[YOLOModel, ImportedConfig]:
    """Read a reference ``.pt`` checkpoint without executing code; return our model (float32, eval) and its config.

    Raises :class:`~lucid_core.interop.unpickler.RefusedGlobalError` (a global outside the allowlist, named) or
    :class:`CheckpointImportError` (unknown layout: the first mismatching key and shapes).
    """
    file = Path(path)
    checkpoint = read_reference_checkpoint(file)
    return import_reference_tree(checkpoint, source=str(file), sha256=file_sha256(file))
