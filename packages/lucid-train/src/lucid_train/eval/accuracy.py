"""Classification scores: top-1 / top-5 accuracy, the per-class table and the confusion matrix.

The reference's classification metrics (docs.ultralytics.com/tasks/classify: ``top1``, ``top5``, logged as
``metrics/accuracy_top1`` / ``metrics/accuracy_top5``): an image counts for top-1 when its most probable class is
its label, for top-5 when its label is among its five most probable classes (all classes when there are fewer).
:class:`AccuracyScorer` has the shape of :class:`~lucid_train.eval.runner.ModelScorer` — ``update(model, batch)``
per collated batch, ``gather(dst)`` across DDP ranks, ``compute()`` — so in-training validation and ``lucid-eval``
use it the same way; :func:`evaluate_accuracy` is the standalone pass (:func:`~lucid_train.eval.runner.
evaluate_model`'s counterpart).

Per class (``images`` = the images labelled with it): ``top1_acc`` and ``top5_acc`` are those accuracies over its
images (its recall), ``precision`` the share of the images predicted as it that are labelled with it (0 when none
is). The ``all`` row holds the totals and the overall accuracies (every image weighs the same) and the mean
precision over the classes with images. The confusion matrix reuses the detection artefacts' type: rows true class,
columns top-1 prediction, the background row and column (index C) stay 0 (every image has exactly one class).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from lucid_core.inference import forward_for_decode
from lucid_core.postprocess import postprocess
from lucid_core.tasks.classify import TOP1_KEY, TOP5_KEY
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.readers import load_dataset
from lucid_data.stats import LabelStatistics, label_statistics
from lucid_train.eval.artifacts import ValidationArtifacts
from lucid_train.eval.confusion import ConfusionMatrix
from lucid_train.eval.per_class import PerClassTable

__all__ = ["ACCURACY_TYPE", "AccuracyResult", "AccuracyScorer", "evaluate_accuracy"]

#: The name the classification confusion matrix carries where the detection ones carry their IoU type.
ACCURACY_TYPE = "top1"
_TOP_K = 5
PER_CLASS_COLUMNS = ("class", "images", "top1_acc", "top5_acc", "precision")


@dataclass
class AccuracyResult:
    """What :meth:`AccuracyScorer.compute` returns: the accuracies, per-class table and confusion matrix."""

    names: tuple[str, ...]
    num_images: int
    top1: float
    top5: float
    table: PerClassTable
    confusion: ConfusionMatrix
    seconds: float = 0.0
    artifacts: ValidationArtifacts | None = field(default=None, repr=False)

    def metrics(self) -> dict[str, float]:
        """The logged keys: ``metrics/accuracy_top1`` and ``metrics/accuracy_top5``."""
        return {TOP1_KEY: self.top1, TOP5_KEY: self.top5}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready scores (the ``lucid-eval`` report's body)."""
        return {
            "num_images": self.num_images,
            "top1": self.top1,
            "top5": self.top5,
            "metrics": self.metrics(),
            "per_class_table": {
                "columns": list(self.table.columns),
                "rows": [list(r) for r in self.table.rows],
            },
            "confusion_matrix": {
                "names": list(self.names),
                "rows": "true class (last: background, unused)",
                "columns": "top-1 prediction (last: background, unused)",
                "counts": self.confusion.counts.tolist(),
            },
            "seconds": self.seconds,
        }

    def validation_artifacts(self, labels: LabelStatistics | None) -> ValidationArtifacts:
        """The artefacts :func:`lucid_train.eval.artifacts.write_artifacts` writes: ``per_class.csv``/``.md`` and,
        with lucid-viz, the confusion matrices and ``labels.png`` (no PR or confidence curves: nothing is ranked)."""
        return ValidationArtifacts(
            self.names, (ACCURACY_TYPE,), {ACCURACY_TYPE: self.confusion}, {}, {}, self.table, labels
        )


def _class_names(names: Sequence[str] | Mapping[int, str], num_classes: int) -> tuple[str, ...]:
    if isinstance(names, Mapping):
        return tuple(str(names.get(i, i)) for i in range(num_classes))
    listed = [str(n) for n in names]
    return tuple(listed[i] if i < len(listed) else str(i) for i in range(num_classes))


class AccuracyScorer:
    """Per-batch accuracy of a classifier: ``update(model, batch)`` for each collated batch (``images``, ``cls``
    (B,) class indices, ``meta`` with ``image_id``), then ``compute()`` (module docstring)."""

    def __init__(self, *, task: str, num_classes: int, names: Sequence[str] | Mapping[int, str]) -> None:
        if num_classes < 1:
            raise ValueError(f"AccuracyScorer: num_classes must be >= 1, got {num_classes}")
        self.task = task
        self.num_classes = int(num_classes)
        self.names = _class_names(names, self.num_classes)
        #: image id -> (label, its classes by descending probability, at most five)
        self.entries: dict[Any, tuple[int, tuple[int, ...]]] = {}

    def reset(self) -> None:
        self.entries.clear()

    @torch.no_grad()
    def probabilities(self, model: nn.Module, images: torch.Tensor) -> torch.Tensor:
        """Class probabilities (B, nc) on the CPU of one uint8 (or 0–1 float) image batch, the model in eval mode
        for the forward (its mode restored)."""
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        x = images.to(device)
        x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
        was_training = model.training
        model.eval()
        try:
            output = forward_for_decode(model, x, "nms")
        finally:
            model.train(was_training)
        dets = postprocess(output.float(), task=self.task, nc=self.num_classes)
        return torch.stack([d.probs for d in dets if d.probs is not None]).cpu()

    def update(self, model: nn.Module, batch: dict[str, Any]) -> None:
        """Score one collated batch: each image's top-5 classes against its label."""
        probs = self.probabilities(model, batch["images"])
        labels = torch.as_tensor(batch["cls"]).reshape(-1).long().cpu()
        if labels.shape[0] != probs.shape[0]:
            raise ValueError(
                f"AccuracyScorer: {probs.shape[0]} images but {labels.shape[0]} labels in batch['cls']"
            )
        top = probs.topk(min(_TOP_K, self.num_classes), dim=1).indices
        for meta, label, ranked in zip(batch["meta"], labels.tolist(), top.tolist()):
            self.entries[meta["image_id"]] = (int(label), tuple(int(c) for c in ranked))

    @property
    def num_images(self) -> int:
        return len(self.entries)

    def gather(self, dst: int = 0) -> bool:
        """Gather every rank's per-image results to rank ``dst`` (no-op on one process); an image scored on two
        ranks counts once. Every rank must call it; returns True on the rank that may :meth:`compute`."""
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return True
        rank = dist.get_rank()
        gathered: list[Any] | None = [None] * dist.get_world_size() if rank == dst else None
        dist.gather_object(self.entries, gathered, dst=dst)
        if gathered is None:
            return False
        for other_rank, other in enumerate(gathered):
            if other_rank != rank and other is not None:
                self.entries.update(other)
        return True

    def compute(self) -> AccuracyResult:
        """Accuracies, per-class table and confusion matrix of every image scored so far."""
        nc = self.num_classes
        labels = np.array([label for label, _ in self.entries.values()], dtype=np.int64)
        ranked = [ranks for _, ranks in self.entries.values()]
        first = np.array([r[0] for r in ranked], dtype=np.int64)
        in_top5 = np.array([label in r for label, r in zip(labels.tolist(), ranked)], dtype=bool)
        hit1 = first == labels
        counts = np.zeros((nc + 1, nc + 1), dtype=np.int64)
        np.add.at(counts, (labels, first), 1)
        images = np.bincount(labels, minlength=nc)
        predicted = np.bincount(first, minlength=nc)
        right1 = np.bincount(labels[hit1], minlength=nc)
        right5 = np.bincount(labels[in_top5], minlength=nc)
        precision = np.divide(right1, predicted, out=np.zeros(nc), where=predicted > 0)
        rows: list[tuple[object, ...]] = [
            (
                name,
                int(images[i]),
                float(right1[i] / images[i]) if images[i] else 0.0,
                float(right5[i] / images[i]) if images[i] else 0.0,
                float(precision[i]),
            )
            for i, name in enumerate(self.names)
        ]
        n = len(labels)
        top1 = float(hit1.mean()) if n else 0.0
        top5 = float(in_top5.mean()) if n else 0.0
        mean_precision = float(precision[images > 0].mean()) if (images > 0).any() else 0.0
        total = ("all", n, top1, top5, mean_precision)
        table = PerClassTable(PER_CLASS_COLUMNS, (total, *rows))
        confusion = ConfusionMatrix(ACCURACY_TYPE, counts, self.names, 0.0, 0.0)
        return AccuracyResult(self.names, n, top1, top5, table, confusion)


def evaluate_accuracy(
    model: nn.Module,
    source_or_dataset: Any,
    *,
    imgsz: int = 224,
    batch_size: int = 16,
    device: str | torch.device | None = None,
    workers: int = 0,
    names: Sequence[str] | Mapping[int, str] | None = None,
    artifacts: bool = False,
) -> AccuracyResult:
    """Top-1 / top-5 accuracy of the classifier ``model`` on a split, with its per-class table and confusion
    matrix (module docstring).

    ``source_or_dataset``: a ``lucid_data.DetectionDataset`` of an image-level task (its ``imgsz`` wins), a
    ``DatasetSource`` or a path ``lucid_data.readers.load_dataset`` reads (its ``val`` split: ``val/`` or ``test/``
    of a folder-per-class dataset). Images are resized on their shorter side and centre-cropped to ``imgsz``
    (``lucid_data.augment.classify.classify_eval``, the same input ``lucid_core.predict`` makes). ``names``:
    default the dataset's. ``artifacts``: also build ``result.artifacts`` (confusion figures, per-class table and
    the split's label statistics) for :func:`lucid_train.eval.artifacts.write_artifacts`.
    """
    if isinstance(source_or_dataset, DetectionDataset):
        dataset = source_or_dataset
    else:
        source = source_or_dataset
        if isinstance(source, (str, Path)):
            source = load_dataset(source, "val", getattr(model, "task", None))
        dataset = DetectionDataset(source, imgsz=imgsz, augment=False, verify="none")
    if dataset.augment or not dataset.image_level:
        raise ValueError(
            "evaluate_accuracy needs an evaluation dataset (augment=False) of an image-level task (classify)"
        )
    if device is not None:
        model.to(device)
    num_classes = int(getattr(model, "num_classes", dataset.num_classes))
    scorer = AccuracyScorer(
        task=str(getattr(model, "task", dataset.task)),
        num_classes=num_classes,
        names=names if names is not None else dataset.names,
    )
    loader = DataLoader(
        dataset, batch_size=batch_size, shuffle=False, num_workers=workers, collate_fn=collate
    )
    tic = time.perf_counter()
    for batch in loader:
        scorer.update(model, batch)
    result = scorer.compute()
    result.seconds = time.perf_counter() - tic
    if artifacts:
        result.artifacts = result.validation_artifacts(label_statistics(dataset.source))
    return result
