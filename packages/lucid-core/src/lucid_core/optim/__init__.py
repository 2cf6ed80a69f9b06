"""Optimiser math: MuSGD / Newton–Schulz, recipe parameter groups, LR/momentum schedule, weight EMA, and the
framework-free training recipe (``optimizer=auto``, warm-up, accumulation, clipping, the EMA step)."""

from lucid_core.optim.ema import ModelEMA, ema_decay
from lucid_core.optim.musgd import MuSGD, newton_schulz5, orthogonalise_batched
from lucid_core.optim.param_groups import (
    build_param_groups,
    gradient_accumulation,
    route_parameter,
    scaled_weight_decay,
)
from lucid_core.optim.recipe import (
    Iteration,
    OptimizerConfig,
    ResolvedOptimizer,
    TrainingRecipe,
    build_optimizer,
    clip_gradients,
    planned_optimizer_steps,
    resolve_optimizer,
)
from lucid_core.optim.schedule import (
    WarmupSchedule,
    apply_lr_momentum,
    linear_lr_factor,
    lr_momentum_at,
    warmup_iterations,
)

__all__ = [
    "Iteration",
    "ModelEMA",
    "MuSGD",
    "OptimizerConfig",
    "ResolvedOptimizer",
    "TrainingRecipe",
    "WarmupSchedule",
    "apply_lr_momentum",
    "build_optimizer",
    "build_param_groups",
    "clip_gradients",
    "ema_decay",
    "gradient_accumulation",
    "linear_lr_factor",
    "lr_momentum_at",
    "newton_schulz5",
    "orthogonalise_batched",
    "planned_optimizer_steps",
    "resolve_optimizer",
    "route_parameter",
    "scaled_weight_decay",
    "warmup_iterations",
]
