"""The training recipe: documented defaults as typed dataclasses, and the ``optimizer=auto`` resolution.

Every field is a constructor argument of :class:`~lucid_train.module.DetectionLitModule` and therefore a
``lucid-train`` flag (``--optimizer.lr0 0.02``, ``--ema.decay 0.9998``, ``--loss.box 7.5``). Defaults and their
sources are listed in ``docs/TRAINING.md`` (issue 6 "What to build"; the reference's published default
hyper-parameters: lr0 0.01, lrf 0.01, momentum 0.937, weight_decay 5e-4, warmup_epochs 3, warmup_momentum 0.8,
warmup_bias_lr 0.1, nominal batch 64, box 7.5, cls 0.5, dfl 1.5, close_mosaic 10).

``optimizer=auto`` (the reference's documented ``optimizer: auto`` behaviour, issue 12; fixtures README "How the
reference trainer builds the optimiser"): the planned number of optimizer steps is
``iterations = ceil(N / max(batch, nominal_batch)) × epochs`` (N = training images, batch = the global batch). Above
10,000 it picks **MuSGD** with lr0 0.01 and momentum 0.9 for every family; otherwise **AdamW** with
``lr0 = round(0.002 * 5 / (4 + nc), 6)`` and momentum (β1) 0.9. Under auto the warm-up bias lr is 0.0 (biases warm
up from 0 like every other group), whatever ``warmup_bias_lr`` says. An explicit ``--optimizer.name`` keeps the
recipe values (SGD/MuSGD lr0 0.01, momentum 0.937; AdamW as above) and ``warmup_bias_lr`` (0.1). An ``lr0`` or
``momentum`` the user set explicitly is never overridden: unset values are ``None`` until resolved. The
resolution and its reason are printed (with the trainer precision) and saved in the run directory
(``optimizer.json``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

OptimizerName = Literal["auto", "SGD", "MuSGD", "AdamW"]

#: the recipe values used when ``lr0`` / ``momentum`` are left unset for an explicit SGD or MuSGD.
SGD_LR0 = 0.01
SGD_MOMENTUM = 0.937
#: ``optimizer=auto`` picks MuSGD above this many planned optimizer steps (:func:`planned_optimizer_steps`).
AUTO_ITERATION_THRESHOLD = 10_000
#: what ``optimizer=auto`` resolves to above the threshold (every family; reference ``optimizer: auto``).
AUTO_LONG_OPTIMIZER: Literal["MuSGD"] = "MuSGD"
AUTO_LONG_LR0 = 0.01
AUTO_MOMENTUM = 0.9
#: the warm-up bias lr under ``optimizer=auto`` (an explicit optimizer keeps ``warmup_bias_lr``).
AUTO_WARMUP_BIAS_LR = 0.0


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
    warmup_min_iters: int = 0
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
    """Loss gains and assigner constants (reference defaults, ``shared/fixtures/README.md`` ``hyp`` records).

    ``box``/``cls``/``dfl`` apply to every task (the segment mask and semantic terms use the box gain, fixture
    README S4/S5); ``pose``/``kobj``/``rle`` only to pose, ``angle`` only to obb.
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

    def gains(self) -> dict[str, float]:
        """Every gain by name, as the task objectives take them."""
        names = ("box", "cls", "dfl", "pose", "kobj", "rle", "angle")
        return {name: float(getattr(self, name)) for name in names}


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
    #: the bias group's warm-up start lr (0.0 under auto, ``OptimizerConfig.warmup_bias_lr`` otherwise).
    warmup_bias_lr: float = 0.1
    #: planned optimizer steps ``ceil(N / max(batch, nbs)) × epochs`` (what auto compared with its threshold).
    iterations: int | None = None
    #: the trainer's resolved precision (``32-true``, ``16-mixed``, ...); printed with the optimizer line.
    precision: str | None = None
    #: the training network's memory format (``channels_last`` or ``contiguous``, :func:`resolve_channels_last`).
    memory_format: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        step = f" precision={self.precision}" if self.precision else ""
        step += f" memory_format={self.memory_format}" if self.memory_format else ""
        return (
            f"optimizer: {self.name}(lr0={self.lr0:g}, momentum={self.momentum:g}, "
            f"weight_decay={self.weight_decay:g}) warmup_bias_lr={self.warmup_bias_lr:g} "
            f"accumulate={self.accumulate} batch={self.batch_size}{step} [{self.reason}]"
        )


def accumulate_steps(batch_size: int, nominal_batch: int = 64) -> int:
    """Batches per optimizer step so the effective batch approaches ``nominal_batch``: ``max(round(nbs/bs), 1)``."""
    from lucid_core.optim import gradient_accumulation

    return int(gradient_accumulation(batch_size, nominal_batch))


def scaled_weight_decay(weight_decay: float, batch_size: int, nominal_batch: int = 64) -> float:
    """Weight decay scaled by ``batch × accumulate / nominal_batch`` (issue 6; lucid_core's rule)."""
    from lucid_core.optim import scaled_weight_decay as core_scaled_weight_decay

    return float(core_scaled_weight_decay(weight_decay, batch_size, nominal_batch))


def planned_optimizer_steps(dataset_size: int, batch_size: int, nominal_batch: int, epochs: int) -> int:
    """``ceil(N / max(batch, nominal_batch)) × epochs``: the optimizer steps ``optimizer=auto`` counts (issue 12).

    ``batch_size`` is the global batch (per-device batch × world size); one optimizer step consumes
    ``max(batch, nominal_batch)`` images, so this counts steps, not batches.
    """
    if dataset_size < 0 or batch_size < 1 or nominal_batch < 1 or epochs < 0:
        raise ValueError(
            f"planned_optimizer_steps: expected dataset_size >= 0, batch_size >= 1, nominal_batch >= 1 and "
            f"epochs >= 0, got {dataset_size}, {batch_size}, {nominal_batch}, {epochs}"
        )
    return math.ceil(dataset_size / max(batch_size, nominal_batch)) * epochs


def resolve_optimizer(
    config: OptimizerConfig,
    *,
    num_classes: int,
    batch_size: int,
    iterations: int,
    family: str | None = None,
) -> ResolvedOptimizer:
    """Resolve ``optimizer=auto`` and unset ``lr0``/``momentum`` without overriding explicit values.

    ``iterations`` is :func:`planned_optimizer_steps` of the run. ``family`` is accepted for the record only: the
    reference's auto rule is the same for every family. ``weight_decay`` in the result is the configured (unscaled)
    value; scaling happens in the parameter groups.
    """
    del family  # auto picks the same optimiser for yolov8, yolo11 and yolo26 (reference behaviour)
    accumulate = accumulate_steps(batch_size, config.nominal_batch)
    name: Literal["SGD", "MuSGD", "AdamW"]
    adamw_lr = round(0.002 * 5 / (4 + num_classes), 6)
    warmup_bias_lr = config.warmup_bias_lr
    if config.name == "auto":
        warmup_bias_lr = AUTO_WARMUP_BIAS_LR
        if iterations > AUTO_ITERATION_THRESHOLD:
            name, default_lr = AUTO_LONG_OPTIMIZER, AUTO_LONG_LR0
            comparison = ">"
        else:
            name, default_lr = "AdamW", adamw_lr
            comparison = "<="
        default_momentum = AUTO_MOMENTUM
        reason = (
            f"auto: {iterations} planned optimizer steps (ceil(images / max(batch, nbs)) x epochs) "
            f"{comparison} {AUTO_ITERATION_THRESHOLD}; warmup_bias_lr 0.0"
        )
    else:
        name = config.name
        reason = "explicit"
        if name == "AdamW":
            default_lr, default_momentum = adamw_lr, AUTO_MOMENTUM
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
        warmup_bias_lr=float(warmup_bias_lr),
        iterations=int(iterations),
    )
