"""The recipe's flag groups (``--optimizer.*``, ``--ema.*``, ``--loss.*``) and their conversions.

Every field is a constructor argument of :class:`~lucid_train.module.YOLOLitModule` and therefore a ``lucid-train``
flag (``--optimizer.lr0 0.02``, ``--ema.decay 0.9998``, ``--loss.box 7.5``). The optimizer group and the
``optimizer=auto`` rule live in :mod:`lucid_core.optim.recipe` (re-exported here); defaults and their sources are
listed in ``docs/TRAINING.md``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, is_dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from lucid_core.loss.gains import CLS_WEIGHTS
from lucid_core.optim import ModelEMA, scaled_weight_decay
from lucid_core.optim import gradient_accumulation as accumulate_steps
from lucid_core.optim.recipe import (
    AUTO_ITERATION_THRESHOLD,
    AUTO_LONG_LR0,
    AUTO_LONG_OPTIMIZER,
    AUTO_MOMENTUM,
    AUTO_WARMUP_BIAS_LR,
    SGD_LR0,
    SGD_MOMENTUM,
    OptimizerConfig,
    OptimizerName,
    ResolvedOptimizer,
    planned_optimizer_steps,
    resolve_optimizer,
)

__all__ = [
    "AUTO_ITERATION_THRESHOLD",
    "AUTO_LONG_LR0",
    "AUTO_LONG_OPTIMIZER",
    "AUTO_MOMENTUM",
    "AUTO_WARMUP_BIAS_LR",
    "SGD_LR0",
    "SGD_MOMENTUM",
    "EMAConfig",
    "LossConfig",
    "OptimizerConfig",
    "OptimizerName",
    "ResolvedOptimizer",
    "accumulate_steps",
    "as_config",
    "inverse_frequency_weights",
    "plain",
    "planned_optimizer_steps",
    "read_class_weights",
    "resolve_class_weights",
    "resolve_optimizer",
    "scaled_weight_decay",
]


@dataclass
class EMAConfig:
    """Exponential moving average of weights and buffers: ``d = decay · (1 − exp(−updates / tau))``."""

    enabled: bool = True
    decay: float = 0.9999
    tau: float = 2000.0

    def ema_of(self, model: nn.Module) -> ModelEMA:
        """The EMA copy of ``model`` these settings describe (``enabled`` false: decay 0, the copy follows it)."""
        return ModelEMA(model, decay=self.decay if self.enabled else 0.0, tau=self.tau)


@dataclass
class LossConfig:
    """Loss gains and assigner constants (reference defaults, ``shared/fixtures/README.md`` ``hyp`` records).

    ``box``/``cls``/``dfl`` apply to every task (the segment mask and semantic terms use the box gain, fixture
    README S4/S5); ``pose``/``kobj``/``rle`` only to pose, ``angle`` only to obb.

    ``cls_weights`` (opt-in, default off = the reference): per-class weights of the classification term —
    ``"auto"`` (inverse class frequency of the training labels, normalised to mean 1), a file with one weight per
    class line, or the weights themselves. ``"auto"`` and a file are turned into weights when the fit is set up
    (:func:`resolve_class_weights`, called by :class:`lucid_train.callbacks.RunArtifacts`); until then, and for
    ``None``, :meth:`gains` carries no weights. Rule and source: docs/TRAINING.md, "Class weighting".
    """

    box: float = 7.5
    cls: float = 0.5
    dfl: float = 1.5
    pose: float = 12.0
    kobj: float = 1.0
    rle: float = 1.0
    angle: float = 1.0
    topk: int = 10
    alpha: float = 0.5
    beta: float = 6.0
    cls_weights: list[float] | str | None = None

    def gains(self) -> dict[str, Any]:
        """Every gain by name, as the task objectives take them; ``cls_weights`` too once they are numbers."""
        names = ("box", "cls", "dfl", "pose", "kobj", "rle", "angle")
        gains: dict[str, Any] = {name: float(getattr(self, name)) for name in names}
        if self.cls_weights is not None and not isinstance(self.cls_weights, str):
            gains[CLS_WEIGHTS] = [float(w) for w in self.cls_weights]
        return gains

    def needs_labels(self) -> bool:
        """True while ``cls_weights`` is ``"auto"`` or a file, i.e. not yet resolved into weights."""
        return isinstance(self.cls_weights, str)


def inverse_frequency_weights(class_counts: Sequence[int] | np.ndarray) -> list[float]:
    """``w_c = (1 / n_c) / mean_k(1 / n_k)`` over the classes with ``n_c > 0`` training instances (so their mean
    is 1); a class without any training instance gets 1. docs/TRAINING.md, "Class weighting"."""
    counts = np.asarray(class_counts, dtype=np.float64).reshape(-1)
    present = counts > 0
    weights = np.ones(counts.size, dtype=np.float64)
    if present.any():
        inverse = 1.0 / counts[present]
        weights[present] = inverse / inverse.mean()
    return [float(w) for w in weights]


def read_class_weights(path: str | os.PathLike[str], num_classes: int) -> list[float]:
    """One weight per class line of the text file ``path`` (blank lines and ``#`` comments skipped); a
    ``ValueError`` names the file and line of a value that is not a finite number >= 0, or a wrong count."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(
            f"loss.cls_weights: {file} is not a file (expected 'auto' or a file, one weight per class)"
        )
    weights: list[float] = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"loss.cls_weights: {file}:{number}: {text!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"loss.cls_weights: {file}:{number}: weight {text!r} must be finite and >= 0")
        weights.append(value)
    if len(weights) != num_classes:
        raise ValueError(
            f"loss.cls_weights: {file} has {len(weights)} weights for the dataset's {num_classes} classes"
        )
    return weights


def resolve_class_weights(
    config: LossConfig, *, num_classes: int, class_counts: Sequence[int] | np.ndarray | None = None
) -> LossConfig:
    """``config`` with ``cls_weights`` as numbers: ``"auto"`` from ``class_counts`` (the training labels'
    instances per class, :func:`inverse_frequency_weights`), a file read (:func:`read_class_weights`); a list is
    checked against ``num_classes``. Unchanged when ``cls_weights`` is ``None``."""
    spec = config.cls_weights
    if spec is None:
        return config
    if isinstance(spec, str):
        if spec == "auto":
            if class_counts is None:
                raise ValueError("loss.cls_weights auto: needs the training labels' instances per class")
            if len(class_counts) != num_classes:
                raise ValueError(
                    f"loss.cls_weights auto: {len(class_counts)} class counts for {num_classes} classes"
                )
            weights = inverse_frequency_weights(class_counts)
        else:
            weights = read_class_weights(spec, num_classes)
    else:
        weights = [float(w) for w in spec]
        if len(weights) != num_classes:
            raise ValueError(
                f"loss.cls_weights: {len(weights)} weights for the dataset's {num_classes} classes"
            )
    return replace(config, cls_weights=weights)


def as_config(value: Any, cls: type[Any]) -> Any:
    """``value`` as a ``cls`` instance: ``None`` → the defaults, a mapping → ``cls(**value)``, an instance as is."""
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls(**value)
    raise TypeError(f"expected {cls.__name__} or a mapping, got {type(value).__name__}")


def plain(value: Any) -> Any:
    """Dataclasses → dicts, recursively (checkpoints stay loadable with ``torch.load(weights_only=True)``)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: plain(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
