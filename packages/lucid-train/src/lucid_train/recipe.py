"""The training recipe: documented defaults as typed dataclasses, and the ``optimizer=auto`` resolution.

Every field is a constructor argument of :class:`~lucid_train.module.DetectionLitModule` and therefore a
``lucid-train`` flag (``--optimizer.lr0 0.02``, ``--ema.decay 0.9998``, ``--loss.box 7.5``). Defaults and their
sources are listed in ``docs/TRAINING.md`` (issue 6 "What to build"; the reference's published default
hyper-parameters: lr0 0.01, lrf 0.01, momentum 0.937, weight_decay 5e-4, warmup_epochs 3, warmup_momentum 0.8,
warmup_bias_lr 0.1, nominal batch 64, box 7.5, cls 0.5, dfl 1.5, close_mosaic 10).

``optimizer=auto`` (the reference's documented ``optimizer: auto`` behaviour): when the run has more than
10,000 iterations it uses SGD (MuSGD for yolo26) with lr0 0.01 and momentum 0.937; shorter runs use AdamW with
``lr0 = round(0.002 * 5 / (4 + nc), 6)`` and momentum (β1) 0.9. An ``lr0`` or ``momentum`` the user set explicitly
is never overridden: unset values are ``None`` until resolved, and the resolution is printed and saved in the run
directory (``optimizer.json``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

OptimizerName = Literal["auto", "SGD", "MuSGD", "AdamW"]

#: the recipe values used when ``lr0`` / ``momentum`` are left unset for SGD and MuSGD.
SGD_LR0 = 0.01
SGD_MOMENTUM = 0.937
#: ``optimizer=auto`` picks SGD/MuSGD above this many iterations (optimizer steps × accumulate), AdamW below.
AUTO_ITERATION_THRESHOLD = 10_000


@dataclass
class OptimizerConfig:
    """Optimiser, learning-rate schedule, warm-up, accumulation and clipping (issue 6 "Recipe defaults").

    ``lr0``/``momentum`` = ``None`` means "the recipe value for the resolved optimiser" (see module docstring).
    ``weight_decay`` is scaled by ``batch × accumulate / nominal_batch`` with
    ``accumulate = max(round(nominal_batch / batch), 1)``.
    """

    name: OptimizerName = "auto"
    lr0: float | None = None
    lrf: float = 0.01
    momentum: float | None = None
    weight_decay: float = 5e-4
    nesterov: bool = True
    nominal_batch: int = 64
    warmup_epochs: float = 3.0
    warmup_min_iters: int = 100
    warmup_momentum: float = 0.8
    warmup_bias_lr: float = 0.1
    grad_clip_norm: float = 10.0

    def __post_init__(self) -> None:
        if self.name not in ("auto", "SGD", "MuSGD", "AdamW"):
            raise ValueError(f"optimizer.name: expected one of auto, SGD, MuSGD, AdamW, got {self.name!r}")
        for field_name in ("lrf", "weight_decay", "warmup_epochs", "grad_clip_norm"):
            value = getattr(self, field_name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"optimizer.{field_name}: expected a finite value >= 0, got {value!r}")
        if self.lr0 is not None and not (self.lr0 > 0 and math.isfinite(self.lr0)):
            raise ValueError(f"optimizer.lr0: expected a finite value > 0, got {self.lr0!r}")
        if self.nominal_batch < 1:
            raise ValueError(f"optimizer.nominal_batch: expected >= 1, got {self.nominal_batch!r}")


@dataclass
class EMAConfig:
    """Exponential moving average of weights and buffers: ``d = decay · (1 − exp(−updates / tau))``."""

    enabled: bool = True
    decay: float = 0.9999
    tau: float = 2000.0


@dataclass
class LossConfig:
    """Loss gains (reference defaults box 7.5, cls 0.5, dfl 1.5) and assigner constants."""

    box: float = 7.5
    cls: float = 0.5
    dfl: float = 1.5
    topk: int = 10
    alpha: float = 0.5
    beta: float = 6.0


@dataclass(frozen=True)
class ResolvedOptimizer:
    """What ``optimizer=auto`` (or an explicit choice) resolved to; saved as ``optimizer.json``."""

    name: Literal["SGD", "MuSGD", "AdamW"]
    lr0: float
    momentum: float
    weight_decay: float
    accumulate: int
    batch_size: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return (
            f"optimizer: {self.name}(lr0={self.lr0:g}, momentum={self.momentum:g}, "
            f"weight_decay={self.weight_decay:g}) accumulate={self.accumulate} batch={self.batch_size} "
            f"[{self.reason}]"
        )


def accumulate_steps(batch_size: int, nominal_batch: int = 64) -> int:
    """Batches per optimizer step so the effective batch approaches ``nominal_batch``: ``max(round(nbs/bs), 1)``."""
    from lucid_core.optim import gradient_accumulation

    return int(gradient_accumulation(batch_size, nominal_batch))


def scaled_weight_decay(weight_decay: float, batch_size: int, nominal_batch: int = 64) -> float:
    """Weight decay scaled by ``batch × accumulate / nominal_batch`` (issue 6; lucid_core's rule)."""
    from lucid_core.optim import scaled_weight_decay as core_scaled_weight_decay

    return float(core_scaled_weight_decay(weight_decay, batch_size, nominal_batch))


def resolve_optimizer(
    config: OptimizerConfig,
    *,
    family: str,
    num_classes: int,
    batch_size: int,
    total_iterations: int,
) -> ResolvedOptimizer:
    """Resolve ``optimizer=auto`` and unset ``lr0``/``momentum`` without overriding explicit values.

    ``total_iterations`` counts batches over the whole run (the reference counts ``epochs × batches`` against its
    10,000 threshold). ``weight_decay`` in the result is the configured (unscaled) value; scaling happens in the
    parameter groups.
    """
    accumulate = accumulate_steps(batch_size, config.nominal_batch)
    name = config.name
    if name == "auto":
        if total_iterations > AUTO_ITERATION_THRESHOLD:
            name = "MuSGD" if family == "yolo26" else "SGD"
            reason = f"auto: {total_iterations} iterations > {AUTO_ITERATION_THRESHOLD}"
        else:
            name = "AdamW"
            reason = f"auto: {total_iterations} iterations <= {AUTO_ITERATION_THRESHOLD}"
    else:
        reason = "explicit"
    if name == "AdamW":
        default_lr, default_momentum = round(0.002 * 5 / (4 + num_classes), 6), 0.9
    else:
        default_lr, default_momentum = SGD_LR0, SGD_MOMENTUM
    lr0 = config.lr0 if config.lr0 is not None else default_lr
    momentum = config.momentum if config.momentum is not None else default_momentum
    if config.lr0 is not None:
        reason += ", lr0 explicit"
    if config.momentum is not None:
        reason += ", momentum explicit"
    return ResolvedOptimizer(
        name=name,
        lr0=float(lr0),
        momentum=float(momentum),
        weight_decay=config.weight_decay,
        accumulate=accumulate,
        batch_size=batch_size,
        reason=reason,
    )
