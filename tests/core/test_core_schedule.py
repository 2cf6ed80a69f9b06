"""LR / momentum per group per iteration against the recipe formulas (issue 6)."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from lucid_core.optim import (
    WarmupSchedule,
    apply_lr_momentum,
    build_param_groups,
    linear_lr_factor,
    lr_momentum_at,
    warmup_iterations,
)


def _groups() -> list[dict[str, object]]:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    return build_param_groups(
        model, optimizer="SGD", lr=0.01, momentum=0.937, weight_decay=5e-4, batch_size=16
    )


def test_linear_lr_factor() -> None:
    assert linear_lr_factor(0, 100) == 1.0
    assert linear_lr_factor(100, 100) == pytest.approx(0.01)
    assert linear_lr_factor(50, 100, lrf=0.01) == pytest.approx(0.5 * 0.99 + 0.01)


def test_warmup_iterations() -> None:
    # the reference since 8.4.103 (PR 25321's own examples): an epoch count, no 100-iteration floor ...
    assert warmup_iterations(9, 3.0, epochs=10) == 27
    assert warmup_iterations(2, 3.0, epochs=10) == 6
    assert warmup_iterations(1000) == 3000
    assert warmup_iterations(333, warmup_epochs=0.5) == 166  # round(166.5) = 166 (banker's rounding)
    # ... capped before the final epoch, so a run always reaches the regular schedule
    assert warmup_iterations(10, 3.0, epochs=3) == 20
    assert warmup_iterations(10, 3.0, epochs=1) == 0
    assert warmup_iterations(50, warmup_epochs=0) == 0
    # the old floor stays available (before 8.4.103: max(3 epochs, 100 iterations)), still under the cap
    assert warmup_iterations(10, min_iters=100) == 100
    assert warmup_iterations(2, 3.0, epochs=8, min_iters=100) == 14


def _expected(
    iteration: int, epoch: int, group: dict[str, object], nw: int, nb: int, epochs: int
) -> tuple[float, float]:
    """The rule written out: warm-up while iteration < nw; then momentum keeps its last warm-up value and the lr
    its last warm-up value until the epoch ends (the scheduler's step), then initial_lr · lf(epoch)."""
    lf = (1 - epoch / epochs) * (1 - 0.01) + 0.01
    target = 0.01 * lf
    start = 0.1 if group["param_group"] == "bias" else 0.0
    if iteration < nw:
        frac = iteration / nw
        return start + (target - start) * frac, 0.8 + (0.937 - 0.8) * frac
    frac = (nw - 1) / nw
    lr = start + (target - start) * frac if epoch == (nw - 1) // nb else target
    return lr, 0.8 + (0.937 - 0.8) * frac


@pytest.mark.parametrize(
    ("nb", "warmup_epochs", "iterations"),
    [
        (50, 3.0, (0, 1, 37, 75, 148, 149, 150, 151, 260, 499)),  # nw = 150 ends at an epoch boundary
        (50, 0.5, (0, 10, 24, 25, 30, 49, 50, 51, 499)),  # nw = 25 ends mid-epoch 0: lr held until epoch 1
    ],
)
def test_lr_momentum_per_group_per_iteration(
    nb: int, warmup_epochs: float, iterations: tuple[int, ...]
) -> None:
    groups = _groups()
    assert [g["param_group"] for g in groups] == ["weight", "bn", "bias"]
    schedule = WarmupSchedule(epochs=10, iters_per_epoch=nb, warmup_epochs=warmup_epochs)
    nw = warmup_iterations(nb, warmup_epochs, epochs=10)
    for iteration in iterations:
        epoch = iteration // nb
        values = lr_momentum_at(iteration, epoch, groups, schedule)
        for group, (lr, momentum) in zip(groups, values, strict=True):
            want_lr, want_momentum = _expected(iteration, epoch, group, nw, nb, 10)
            assert lr == pytest.approx(want_lr, rel=1e-12, abs=1e-15), (iteration, group["param_group"])
            assert momentum == pytest.approx(want_momentum, rel=1e-12), (iteration, group["param_group"])
    bias_lr = [lr_momentum_at(i, i // nb, groups, schedule)[2][0] for i in range(nw)]
    assert bias_lr[0] == 0.1 and all(a > b for a, b in itertools.pairwise(bias_lr))


def test_no_warmup_uses_the_schedule_from_the_first_batch() -> None:
    groups = _groups()
    for schedule in (
        WarmupSchedule(epochs=1, iters_per_epoch=20),  # one epoch: the cap leaves no warm-up
        WarmupSchedule(epochs=5, iters_per_epoch=20, warmup_epochs=0.0),
    ):
        for lr, momentum in lr_momentum_at(0, 0, groups, schedule):
            assert (lr, momentum) == (0.01, 0.937)


def test_apply_lr_momentum_sets_sgd_momentum_and_keeps_adam_betas() -> None:
    """SGD-style groups take the warm-up momentum; AdamW groups keep their betas (reference 8.4.190, black-box)."""
    sgd = torch.optim.SGD(_groups(), lr=0.01)
    apply_lr_momentum(sgd, [(0.1, 0.8), (0.2, 0.85), (0.3, 0.9)])
    assert [(g["lr"], g["momentum"]) for g in sgd.param_groups] == [(0.1, 0.8), (0.2, 0.85), (0.3, 0.9)]
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    adam_groups = build_param_groups(
        model, optimizer="AdamW", lr=0.01, momentum=0.9, weight_decay=5e-4, batch_size=16
    )
    adam = torch.optim.AdamW(adam_groups, lr=0.01)
    apply_lr_momentum(adam, [(0.1, 0.8), (0.2, 0.8), (0.3, 0.8)])
    assert [g["lr"] for g in adam.param_groups] == [0.1, 0.2, 0.3]
    assert all(g["betas"] == (0.9, 0.999) for g in adam.param_groups)
    with pytest.raises(ValueError, match="groups"):
        apply_lr_momentum(adam, [(0.1, 0.8)])


def test_missing_initial_lr_is_named() -> None:
    with pytest.raises(KeyError, match="initial_lr"):
        lr_momentum_at(0, 0, [{"lr": 0.01}], WarmupSchedule(epochs=1, iters_per_epoch=1))
