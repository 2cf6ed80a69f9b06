"""The training recipe's step mechanics, free of any training framework.

:func:`resolve_optimizer` is the reference's ``optimizer=auto`` rule, :func:`build_optimizer` builds the optimizer
over the recipe's parameter groups, and :class:`TrainingRecipe` is the per-batch flow of one run: the warm-up
lr/momentum schedule, accumulation to the nominal batch, clipping after the AMP unscale, and the EMA step.
Defaults and their sources: docs/TRAINING.md; the flow: docs/INTERFACES.md, "Training flow".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from lucid_core.optim.ema import ModelEMA
from lucid_core.optim.musgd import MuSGD
from lucid_core.optim.param_groups import build_param_groups, gradient_accumulation
from lucid_core.optim.schedule import WarmupSchedule, apply_lr_momentum, lr_momentum_at, warmup_iterations

__all__ = [
    "AUTO_ITERATION_THRESHOLD",
    "AUTO_LONG_LR0",
    "AUTO_LONG_OPTIMIZER",
    "AUTO_MOMENTUM",
    "AUTO_WARMUP_BIAS_LR",
    "SGD_LR0",
    "SGD_MOMENTUM",
    "Iteration",
    "OptimizerConfig",
    "OptimizerName",
    "ResolvedOptimizer",
    "TrainingRecipe",
    "build_optimizer",
    "clip_gradients",
    "planned_optimizer_steps",
    "resolve_optimizer",
]

OptimizerName = Literal["auto", "SGD", "MuSGD", "AdamW"]
ResolvedName = Literal["SGD", "MuSGD", "AdamW"]

#: the recipe values used when ``lr0`` / ``momentum`` are left unset for an explicit SGD or MuSGD.
SGD_LR0 = 0.01
SGD_MOMENTUM = 0.937
#: ``optimizer=auto`` picks MuSGD above this many planned optimizer steps (:func:`planned_optimizer_steps`).
AUTO_ITERATION_THRESHOLD = 10_000
#: what ``optimizer=auto`` resolves to above the threshold (every family).
AUTO_LONG_OPTIMIZER: Literal["MuSGD"] = "MuSGD"
AUTO_LONG_LR0 = 0.01
AUTO_MOMENTUM = 0.9
#: the warm-up bias lr under ``optimizer=auto`` (an explicit optimizer keeps ``warmup_bias_lr``).
AUTO_WARMUP_BIAS_LR = 0.0


@dataclass
class OptimizerConfig:
    """Optimiser, learning-rate schedule, warm-up, accumulation and clipping (the reference's recipe defaults).

    ``lr0``/``momentum`` = ``None`` means "the recipe value for the resolved optimiser" (:func:`resolve_optimizer`).
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


@dataclass(frozen=True)
class ResolvedOptimizer:
    """What ``optimizer=auto`` (or an explicit choice) resolved to; saved as ``optimizer.json``."""

    name: ResolvedName
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
    #: the training network's memory format (``channels_last`` or ``contiguous``).
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


def planned_optimizer_steps(dataset_size: int, batch_size: int, nominal_batch: int, epochs: int) -> int:
    """``ceil(N / max(batch, nominal_batch)) × epochs``: the optimizer steps ``optimizer=auto`` counts.

    ``batch_size`` is the global batch (per-device batch × world size).
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
    """The reference's ``optimizer=auto`` rule; unset ``lr0``/``momentum`` take recipe values, set ones are kept.

    Auto: MuSGD (lr0 0.01, momentum 0.9) above :data:`AUTO_ITERATION_THRESHOLD` planned ``iterations``, else AdamW
    (lr0 ``round(0.002 · 5 / (4 + nc), 6)``, momentum 0.9), warm-up bias lr 0. The rule is the same for every
    ``family`` (recorded only). ``weight_decay`` is the configured, unscaled value.
    """
    del family
    accumulate = gradient_accumulation(batch_size, config.nominal_batch)
    name: ResolvedName
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
        accumulate=int(accumulate),
        batch_size=batch_size,
        reason=reason,
        warmup_bias_lr=float(warmup_bias_lr),
        iterations=int(iterations),
    )


_Groups = list[dict[str, Any]]
_OPTIMIZERS: dict[str, Callable[[_Groups, ResolvedOptimizer, bool], torch.optim.Optimizer]] = {
    "SGD": lambda groups, r, nesterov: torch.optim.SGD(
        groups, lr=r.lr0, momentum=r.momentum, nesterov=nesterov
    ),
    "AdamW": lambda groups, r, _: torch.optim.AdamW(
        groups, lr=r.lr0, betas=(r.momentum, 0.999), weight_decay=0.0
    ),
    "MuSGD": lambda groups, r, nesterov: MuSGD(groups, lr=r.lr0, momentum=r.momentum, nesterov=nesterov),
}


def build_optimizer(
    model: nn.Module, resolved: ResolvedOptimizer, *, nominal_batch: int = 64, nesterov: bool = True
) -> torch.optim.Optimizer:
    """``resolved``'s optimizer over ``model``'s recipe parameter groups (:func:`build_param_groups`).

    The weight decay is scaled for ``resolved.batch_size`` against ``nominal_batch``; MuSGD trains the parameters
    of ``model.cls_branch_parameter_names()`` (when the model has it) with lr × 3.
    """
    names = getattr(model, "cls_branch_parameter_names", None)
    boost = set(names()).__contains__ if callable(names) else None
    groups = build_param_groups(
        model,
        optimizer=resolved.name,
        lr=resolved.lr0,
        momentum=resolved.momentum,
        weight_decay=resolved.weight_decay,
        batch_size=resolved.batch_size,
        nominal_batch=nominal_batch,
        boost=boost,
    )
    return _OPTIMIZERS[resolved.name](groups, resolved, nesterov)


def clip_gradients(optimizer: torch.optim.Optimizer, max_norm: float) -> None:
    """Clip the global L2 norm of every gradient the optimizer steps to ``max_norm`` (no-op when ``max_norm <= 0``).

    Call it on true gradients: after an AMP scaler's ``unscale_``, before its ``step``.
    """
    if max_norm > 0:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, max_norm)


@dataclass(frozen=True)
class Iteration:
    """Where a training batch is: batch ``batch`` of epoch ``epoch``, of ``batches`` batches per epoch."""

    epoch: int
    batch: int
    batches: int

    @property
    def index(self) -> int:
        """Batches since the start of training: ``batch + epoch · batches``."""
        return self.batch + self.batches * self.epoch

    @property
    def last_of_epoch(self) -> bool:
        return self.batch == self.batches - 1


class TrainingRecipe:
    """The per-batch recipe of one run: :meth:`plan` it once, build its :meth:`optimizer`, then after every
    backward ask :meth:`should_step` and, if so, call :meth:`step`.

    ``last_opt_step`` (the :attr:`Iteration.index` of the last optimizer step, -1 before the first) is the state a
    resumed run must restore.
    """

    def __init__(self, config: OptimizerConfig | None = None) -> None:
        self.config = config if config is not None else OptimizerConfig()
        self.resolved: ResolvedOptimizer | None = None
        self.epochs = 1
        self.last_opt_step = -1

    def plan(
        self,
        *,
        images: int,
        batch_size: int,
        epochs: int,
        num_classes: int,
        family: str | None = None,
        precision: str | None = None,
        memory_format: str | None = None,
    ) -> ResolvedOptimizer:
        """Resolve the optimizer of ``epochs`` epochs over ``images`` images at global batch ``batch_size``.

        ``precision`` and ``memory_format`` are recorded in the result (printed and saved with it).
        """
        iterations = planned_optimizer_steps(images, batch_size, self.config.nominal_batch, max(epochs, 0))
        resolved = resolve_optimizer(
            self.config, family=family, num_classes=num_classes, batch_size=batch_size, iterations=iterations
        )
        self.resolved = replace(resolved, precision=precision, memory_format=memory_format)
        self.epochs = int(epochs)
        return self.resolved

    def _planned(self) -> ResolvedOptimizer:
        if self.resolved is None:
            raise RuntimeError("TrainingRecipe: call plan(...) before building or stepping the optimizer")
        return self.resolved

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        """The planned optimizer over ``model`` (:func:`build_optimizer`)."""
        return build_optimizer(
            model, self._planned(), nominal_batch=self.config.nominal_batch, nesterov=self.config.nesterov
        )

    def schedule(self, batches: int) -> WarmupSchedule:
        """The warm-up + linear-decay schedule of the run at ``batches`` batches per epoch."""
        resolved, cfg = self._planned(), self.config
        return WarmupSchedule(
            epochs=self.epochs,
            iters_per_epoch=batches,
            lrf=cfg.lrf,
            momentum=resolved.momentum,
            warmup_epochs=cfg.warmup_epochs,
            warmup_bias_lr=resolved.warmup_bias_lr,
            warmup_momentum=cfg.warmup_momentum,
            min_warmup_iters=cfg.warmup_min_iters,
        )

    def warmup_iterations(self, batches: int) -> int:
        """Warm-up length in batches (:func:`~lucid_core.optim.warmup_iterations`)."""
        cfg = self.config
        return warmup_iterations(
            batches, cfg.warmup_epochs, epochs=self.epochs, min_iters=cfg.warmup_min_iters
        )

    def accumulate_at(self, at: Iteration) -> int:
        """Batches per optimizer step at ``at``: ramped from 1 to ``nominal_batch / batch`` (rounded) during the
        warm-up, the planned accumulation after it."""
        resolved = self._planned()
        nw = self.warmup_iterations(at.batches)
        if at.index < nw:
            target = self.config.nominal_batch / resolved.batch_size
            return max(1, round(float(np.interp(at.index, [0, nw], [1, target]))))
        return resolved.accumulate

    def should_step(self, at: Iteration) -> bool:
        """Whether the optimizer steps after ``at``'s backward: :meth:`accumulate_at` batches since the last step,
        and always on the last batch of an epoch (a checkpoint never holds half-accumulated gradients)."""
        return at.index - self.last_opt_step >= self.accumulate_at(at) or at.last_of_epoch

    def apply_schedule(self, optimizer: torch.optim.Optimizer, at: Iteration) -> None:
        """Write ``at``'s lr and momentum into every parameter group."""
        schedule = self.schedule(at.batches)
        apply_lr_momentum(optimizer, lr_momentum_at(at.index, at.epoch, optimizer.param_groups, schedule))

    def clip(self, optimizer: torch.optim.Optimizer) -> None:
        """:func:`clip_gradients` at ``grad_clip_norm``."""
        clip_gradients(optimizer, self.config.grad_clip_norm)

    def step(
        self,
        optimizer: torch.optim.Optimizer,
        at: Iteration,
        *,
        ema: ModelEMA | None = None,
        model: nn.Module | None = None,
        scaler: torch.amp.GradScaler | None = None,
        step: Callable[[], object] | None = None,
    ) -> None:
        """One optimizer step after ``at``'s backward, in the recipe's order.

        ``at``'s lr/momentum; unscale (``scaler``), :meth:`clip`, step (a step the scaler skips still counts);
        zero the gradients; ``ema.update(model)``; record ``at`` as the last step. ``step`` replaces the
        unscale-clip-step part where a framework owns it and calls :meth:`clip` itself after its unscale.
        """
        self.apply_schedule(optimizer, at)
        if step is not None:
            step()
        elif scaler is not None:
            scaler.unscale_(optimizer)
            self.clip(optimizer)
            scaler.step(optimizer)
            scaler.update()
        else:
            self.clip(optimizer)
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if ema is not None:
            if model is None:
                raise ValueError("TrainingRecipe.step: ema needs the trained model")
            ema.update(model)
        self.last_opt_step = at.index
