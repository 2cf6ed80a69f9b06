"""Learning-rate and momentum schedule of the reference recipe, as pure functions.

Sources: the reference's documented recipe defaults (docs/TRAINING.md) — lr0 0.01, lrf 0.01 with linear decay
``lf(e) = (1 − e / epochs)·(1 − lrf) + lrf`` applied per epoch; per-iteration linear warm-up: the bias group's lr
from ``warmup_bias_lr`` (0.1) down to ``initial_lr·lf(e)``, every other group's lr from 0 up to ``initial_lr·lf(e)``,
and momentum from ``warmup_momentum`` (0.8) up to ``momentum`` (0.937) in SGD-style groups (Adam-style groups keep
their betas, :func:`apply_lr_momentum`). ``iteration`` counts batches from the start
of training (epoch · iters_per_epoch + batch index).

The warm-up length follows the reference since 8.4.103 (ultralytics PR 25321, "Prevent training from ending
during warmup"; the trajectories of ``shared/trajectories`` were recorded with 8.4.190): ``warmup_epochs`` is an
epoch count, ``nw = round(warmup_epochs · iters_per_epoch)`` with no 100-iteration floor, capped at
``(epochs − 1) · iters_per_epoch`` so that a run always reaches the regular schedule (``epochs = 1`` → no warm-up),
and an iteration is in warm-up while ``iteration < nw``. After it nothing writes momentum again, so it keeps its
last warm-up value, and the lr keeps its last warm-up value until the epoch's scheduler step (the per-epoch
``initial_lr·lf(e)`` from the next epoch on). The old floor is ``min_warmup_iters`` (default 0; 100 = before 8.4.103).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class WarmupSchedule:
    """Hyperparameters of the linear-decay schedule with warm-up (recipe defaults)."""

    epochs: int
    iters_per_epoch: int
    lrf: float = 0.01
    momentum: float = 0.937
    warmup_epochs: float = 3.0
    warmup_bias_lr: float = 0.1
    warmup_momentum: float = 0.8
    min_warmup_iters: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.iters_per_epoch < 1:
            raise ValueError(
                f"WarmupSchedule: epochs and iters_per_epoch must be >= 1, got {self.epochs}, {self.iters_per_epoch}"
            )


def linear_lr_factor(epoch: float, epochs: int, lrf: float = 0.01) -> float:
    """lf(e) = (1 − e / epochs)·(1 − lrf) + lrf: 1 at epoch 0, lrf at the end."""
    return (1 - epoch / epochs) * (1.0 - lrf) + lrf


def warmup_iterations(
    iters_per_epoch: int,
    warmup_epochs: float = 3.0,
    *,
    epochs: int | None = None,
    min_iters: int = 0,
) -> int:
    """nw = max(round(warmup_epochs · iters_per_epoch), min_iters), capped at (epochs − 1) · iters_per_epoch.

    0 when warm-up is off (``warmup_epochs <= 0``) or the run has one epoch; ``epochs=None`` applies no cap.
    """
    if warmup_epochs <= 0:
        return 0
    nw = max(round(warmup_epochs * iters_per_epoch), int(min_iters))
    if epochs is not None:
        nw = min(nw, max(int(epochs) - 1, 0) * int(iters_per_epoch))
    return nw


def _interp(x: float, x1: float, y0: float, y1: float) -> float:
    """Linear interpolation from (0, y0) to (x1, y1), clamped to the end points (like numpy.interp)."""
    if x <= 0:
        return y0
    if x >= x1:
        return y1
    return y0 + (y1 - y0) * (x / x1)


def lr_momentum_at(
    iteration: int,
    epoch: int,
    groups: Sequence[Mapping[str, Any]],
    schedule: WarmupSchedule,
) -> list[tuple[float, float]]:
    """Per-group (lr, momentum) at a global batch ``iteration`` in ``epoch``.

    ``groups`` are parameter groups as built by :func:`~lucid_core.optim.build_param_groups`: each needs
    ``initial_lr``; a group whose ``param_group`` is ``"bias"`` warms up from ``warmup_bias_lr``.
    """
    lf = linear_lr_factor(epoch, schedule.epochs, schedule.lrf)
    nb = schedule.iters_per_epoch
    nw = warmup_iterations(
        nb, schedule.warmup_epochs, epochs=schedule.epochs, min_iters=schedule.min_warmup_iters
    )
    last = nw - 1  # the last warm-up iteration (-1: none)
    # after warm-up the lr waits for the scheduler's next epoch step: held inside the epoch where warm-up ended
    held_lr = nw > 0 and iteration >= nw and epoch == last // nb
    values: list[tuple[float, float]] = []
    for i, group in enumerate(groups):
        if "initial_lr" not in group:
            raise KeyError(
                f"lr_momentum_at: parameter group {i} has no 'initial_lr' (build it with build_param_groups)"
            )
        target_lr = float(group["initial_lr"]) * lf
        start_lr = schedule.warmup_bias_lr if group.get("param_group") == "bias" else 0.0
        if iteration < nw:
            values.append(
                (
                    _interp(iteration, nw, start_lr, target_lr),
                    _interp(iteration, nw, schedule.warmup_momentum, schedule.momentum),
                )
            )
        else:
            lr = _interp(last, nw, start_lr, target_lr) if held_lr else target_lr
            momentum = (
                _interp(last, nw, schedule.warmup_momentum, schedule.momentum)
                if nw > 0
                else schedule.momentum
            )
            values.append((lr, momentum))
    return values


def apply_lr_momentum(optimizer: torch.optim.Optimizer, values: Sequence[tuple[float, float]]) -> None:
    """Write per-group (lr, momentum) into an optimiser; Adam-style groups take the lr only.

    The reference writes the warm-up momentum into a group's ``momentum`` entry, which Adam-style groups do not
    have: measured black-box on 8.4.190 (AdamW, lr0 0.004, momentum 0.9, one warm-up epoch of 63 iterations,
    the optimizer read from an ``on_train_batch_end`` callback), every group's ``betas`` stay ``(0.9, 0.999)``
    at iterations 0, 1, 31 and 62 while the lr ramps. So ``betas[0]`` keeps the value the groups were built with.
    """
    if len(values) != len(optimizer.param_groups):
        raise ValueError(f"apply_lr_momentum: {len(values)} values for {len(optimizer.param_groups)} groups")
    for group, (lr, momentum) in zip(optimizer.param_groups, values, strict=True):
        group["lr"] = lr
        if "momentum" in group and "betas" not in group:
            group["momentum"] = momentum
