"""The task, network and objective a training run starts from (fresh, or fine-tuned from weights)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch.utilities import rank_zero_info
from torch import nn

from lucid_core.checkpoint import load_for_training
from lucid_core.errors import CheckpointError, CheckpointImportError, RefusedGlobalError
from lucid_core.loss.terms.pose import resolve_keypoint_sigmas
from lucid_core.models import YOLOModel, build_model
from lucid_core.tasks import TASKS, Task, build_objective
from lucid_train.errors import TrainingSetupError
from lucid_train.recipe import LossConfig


def task_of(name: str) -> Task:
    """The registered task ``name``; a TrainingSetupError naming the known tasks otherwise."""
    if name not in TASKS:
        raise TrainingSetupError(f"model.task: expected one of {', '.join(TASKS)}, got {name!r}")
    return TASKS[name]


def class_names(names: Mapping[Any, Any] | None, num_classes: int) -> dict[int, str]:
    """``names`` as ``{index: name}``; ``{i: "i"}`` for every class when none are given."""
    return {int(k): str(v) for k, v in (names or {}).items()} or {i: str(i) for i in range(num_classes)}


def start_model(
    weights: str | None,
    task: Task,
    family: str,
    scale: str,
    num_classes: int,
    task_options: Mapping[str, Any],
) -> YOLOModel:
    """The network a run trains: :func:`fresh_model`, or :func:`finetune_model` from ``weights`` when given."""
    if not weights:
        return fresh_model(family, task, scale, num_classes, task_options)
    return finetune_model(
        weights, task, num_classes=num_classes, task_options=task_options, family=family, scale=scale
    )


def fresh_model(
    family: str, task: Task, scale: str, num_classes: int, task_options: Mapping[str, Any]
) -> YOLOModel:
    """A newly initialised ``family``/``scale`` model of ``task``; the model options among ``task_options``
    (e.g. ``kpt_shape``) build its head."""
    model_options = {k: v for k, v in task_options.items() if k in task.option_names()}
    if "kpt_shape" in model_options:
        model_options["kpt_shape"] = tuple(int(v) for v in model_options["kpt_shape"])
    return build_model(family=family, task=task.name, scale=scale, num_classes=num_classes, **model_options)


def finetune_model(
    weights: str,
    task: Task,
    *,
    num_classes: int,
    task_options: Mapping[str, Any],
    family: str,
    scale: str,
) -> YOLOModel:
    """The model to fine-tune from ``weights``, in training mode; every setup problem is a TrainingSetupError.

    ``weights``: a lucid checkpoint (``best`` / ``.safetensors`` / ``.json``) or a reference ``.pt`` (converted
    by the restricted unpickler, nothing executed). The network keeps the weights' family and scale (a note is
    printed where they differ from ``family``/``scale``); head layers that depend on the class count are
    re-initialised, with a note. A keypoint model keeps its keypoint head, so ``kpt_shape`` must match.
    """
    path = Path(weights)
    if "://" in weights:
        raise TrainingSetupError(
            f"model.weights: {weights} is a URL; expected a local file (download it yourself and pass "
            "the path: nothing is fetched or unpickled from the network)."
        )
    if not any(p.exists() for p in (path, path.with_suffix(".json"), Path(f"{weights}.json"))):
        raise TrainingSetupError(
            f"model.weights: {weights} does not exist; expected lucid-core weights (a .safetensors file "
            "with its .json config, as written by best.safetensors in a run directory) or a reference "
            ".pt checkpoint."
        )
    try:
        start = load_for_training(
            path, num_classes=num_classes, task=task.name, kpt_shape=task_options.get("kpt_shape")
        )
    except (CheckpointError, CheckpointImportError, RefusedGlobalError, FileNotFoundError) as exc:
        raise TrainingSetupError(f"model.weights {weights}: {exc}") from exc
    _refuse_other_keypoint_layout(weights, task, start.source_config, task_options)
    config = start.model.config
    for name, wanted in (("family", family), ("scale", scale)):
        value = getattr(config, name)
        if wanted != value:
            start.notes.append(f"model.{name} {value} from the weights (was {wanted})")
    for note in start.notes:
        rank_zero_info(f"lucid-train: fine-tuning: {note}")
    return start.model


def _refuse_other_keypoint_layout(
    weights: str, task: Task, source_config: Mapping[str, Any], task_options: Mapping[str, Any]
) -> None:
    """Keypoint weights fine-tune only onto the same ``kpt_shape`` (the keypoint head is kept)."""
    stored = source_config.get("kpt_shape")
    wanted = task_options.get("kpt_shape")
    if "keypoints" not in task.target_fields or source_config.get("task") != task.name:
        return
    if not stored or not wanted:
        return
    stored_shape, wanted_shape = [int(v) for v in stored], [int(v) for v in wanted]
    if stored_shape != wanted_shape:
        raise TrainingSetupError(
            f"model.weights {weights}: the weights are a pose model with kpt_shape {stored_shape} but the "
            f"dataset's kpt_shape is {wanted_shape}; fine-tuning keeps the keypoint head, so it needs a "
            f"dataset with the same keypoints ({stored_shape[0]} keypoints of {stored_shape[1]} values). "
            "Train from scratch (omit --model.weights) for another keypoint layout."
        )


def keypoint_sigmas(task: Task, model: nn.Module, task_options: Mapping[str, Any]) -> list[float] | None:
    """The OKS sigmas of a keypoint task's objective and metric (the dataset YAML's ``kpt_sigmas``, else COCO's for
    17 keypoints, else 1/K); ``None`` for a task without keypoints."""
    if "keypoints" not in task.target_fields:
        return None
    kpt_shape = tuple(getattr(getattr(model, "head", None), "kpt_shape", (17, 3)))
    return [float(v) for v in resolve_keypoint_sigmas(kpt_shape, task_options.get("kpt_sigmas"))]


def training_objective(
    model: nn.Module, task: Task, loss: LossConfig, task_options: Mapping[str, Any], *, epochs: int = 100
) -> Any:
    """``model``'s objective (:func:`lucid_core.tasks.build_objective`) with ``loss``'s gains and assigner
    constants and the task's objective options; YOLO26's o2m/o2o schedule spans ``epochs``."""
    return build_objective(
        model,
        gains=loss.gains(),
        epochs=epochs,
        assigner={"topk": loss.topk, "alpha": loss.alpha, "beta": loss.beta},
        **objective_options(task, model, task_options),
    )


def objective_options(task: Task, model: nn.Module, task_options: Mapping[str, Any]) -> dict[str, Any]:
    """Task options that reach the objective: ``sigmas`` (keypoints), ``overlap_mask`` (masks) when given."""
    options: dict[str, Any] = {}
    if "keypoints" in task.target_fields:
        options["sigmas"] = keypoint_sigmas(task, model, task_options)
    if "masks" in task.target_fields and "overlap_mask" in task_options:
        options["overlap_mask"] = bool(task_options["overlap_mask"])
    return options
