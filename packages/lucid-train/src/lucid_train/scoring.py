"""What a training run's validation scores and logs: the scorer, the decode paths, and the metrics of one scored
epoch (mAP for the dense tasks, top-1/top-5 accuracy for an image-level task such as classify)."""

from __future__ import annotations

from typing import Any, Protocol

from torch import nn

from lucid_core.tasks import Task, metric_key
from lucid_train.errors import TrainingSetupError
from lucid_train.eval.accuracy import AccuracyResult, AccuracyScorer
from lucid_train.eval.coco_gt import CocoGroundTruth
from lucid_train.eval.runner import ModelScorer
from lucid_train.model_setup import keypoint_sigmas


class EpochScorer(Protocol):
    """What validation drives once per epoch: ``update`` per batch, ``gather`` to rank 0, ``compute`` there."""

    def update(self, model: nn.Module, batch: dict[str, Any]) -> None: ...

    def gather(self, dst: int = 0) -> bool: ...

    def compute(self) -> Any: ...


def validation_scorer(module: Any, gt: CocoGroundTruth | None) -> tuple[CocoGroundTruth | None, EpochScorer]:
    """``(ground truth, scorer)`` of one validation epoch of the :class:`~lucid_train.module.YOLOLitModule`
    ``module``: an image-level task (classify) gets an :class:`~lucid_train.eval.accuracy.AccuracyScorer` and no
    ground truth; the dense tasks a :class:`~lucid_train.eval.runner.ModelScorer` over ``gt``, the val split's COCO
    ground truth (built from the data module when ``gt`` is None, so once per run, as ``evaluate_model`` builds it)."""
    task: Task = module.task_spec
    if task.image_level:
        return gt, AccuracyScorer(task=task.name, num_classes=module.num_classes, names=module.names)
    if gt is None:
        gt = CocoGroundTruth.from_source(module.trainer.datamodule.val_source())
    scorer = ModelScorer(
        gt,
        task=module.task,
        num_classes=module.num_classes,
        decode=validation_paths(module.ema_model, module.val_decode),
        conf=module.val_conf,
        iou=module.val_iou,
        max_det=module.max_det,
        multi_label=True,  # the reference validator keeps a box for every class above conf
        kpt_sigmas=keypoint_sigmas(task, module.model, module.task_options),
    )
    return gt, scorer


def check_val_decode(val_decode: str, model: nn.Module | None = None, family: str = "") -> str:
    """``val_decode``, checked: a TrainingSetupError unless it is ``nms`` or ``topk`` and, given ``model``, unless
    ``topk`` has an end-to-end model (``family``: its name, for the message)."""
    if val_decode not in ("nms", "topk"):
        raise TrainingSetupError(
            f"model.val_decode: expected 'nms' (one-to-many branch + NMS, the reference's validation) or "
            f"'topk' (yolo26's one-to-one branch), got {val_decode!r}"
        )
    if model is not None and val_decode == "topk" and not getattr(model, "end2end", False):
        raise TrainingSetupError(
            f"model.val_decode: 'topk' needs an end-to-end model (yolo26); {family} has the NMS path only. "
            "Use --model.val_decode nms."
        )
    return val_decode


def validation_paths(model: nn.Module, val_decode: str) -> list[str]:
    """Decode paths scored every validation: ``val_decode`` first (it drives ``best``), then for an end-to-end
    model (yolo26) the other branch's path (``nms``: one-to-many + NMS, ``topk``: one-to-one)."""
    if getattr(model, "end2end", False):
        return [val_decode, "topk" if val_decode == "nms" else "nms"]
    return ["nms"]


def _prefix(path: str) -> str:
    return "metrics/e2e/" if path == "topk" else "metrics/nms/"


def _task_metrics(result: Any, prefix: str) -> dict[str, float]:
    """mAP50 and mAP50-95 of every IoU type of ``result``: box keys ``{prefix}mAP50(-95)``, the task's own under
    ``{prefix}mask/`` and ``{prefix}pose/`` (:func:`lucid_core.tasks.metric_key`)."""
    metrics: dict[str, float] = {}
    for iou_type, scores in result.per_type.items():
        for name, value in (("mAP50", scores.map50), ("mAP50-95", scores.map50_95)):
            key = metric_key(iou_type, name)
            metrics[prefix + key[len("metrics/") :]] = float(value)
    return metrics


def epoch_metrics(result: Any, task: Task) -> dict[str, float]:
    """The logged metrics of a scored validation (:meth:`lucid_train.eval.ModelScorer.compute`, or
    :meth:`~lucid_train.eval.accuracy.AccuracyScorer.compute`: ``metrics/accuracy_top1`` and ``_top5``).

    ``metrics/mAP50(-95)`` (and the task's own) are the primary path's; another decode path of an end-to-end model
    is logged beside them as ``metrics/e2e/*`` (top-k) or ``metrics/nms/*``; ``metrics/fitness`` is the task's.
    """
    if isinstance(result, AccuracyResult):
        accuracy = result.metrics()
        return {**accuracy, "metrics/fitness": task.fitness(accuracy)}
    metrics = _task_metrics(result, "metrics/")
    for path, other in result.other_decodes.items():
        metrics.update(_task_metrics(other, _prefix(path)))
    metrics["metrics/fitness"] = task.fitness(metrics)
    return metrics
