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
    assert warmup_iterations(10) == 100  # max(round(3 · 10), 100)
    assert warmup_iterations(1000) == 3000
    assert warmup_iterations(333, warmup_epochs=0.5) == 166  # round(166.5) = 166 (banker's rounding)
    assert warmup_iterations(50, warmup_epochs=0) == 0


def test_lr_momentum_per_group_per_iteration() -> None:
    groups = _groups()
    assert [g["param_group"] for g in groups] == ["weight", "bn", "bias"]
    schedule = WarmupSchedule(epochs=10, iters_per_epoch=50)  # nw = max(150, 100) = 150
    nw = 150
    for iteration in (0, 1, 37, 75, 149, 150, 151, 260, 499):
        epoch = iteration // 50
        lf = (1 - epoch / 10) * (1 - 0.01) + 0.01
        values = lr_momentum_at(iteration, epoch, groups, schedule)
        for group, (lr, momentum) in zip(groups, values, strict=True):
            target = 0.01 * lf
            if iteration <= nw:
                frac = iteration / nw
                start = 0.1 if group["param_group"] == "bias" else 0.0
                assert lr == pytest.approx(start + (target - start) * frac, rel=1e-12, abs=1e-15)
                assert momentum == pytest.approx(0.8 + (0.937 - 0.8) * frac, rel=1e-12)
            else:
                assert lr == pytest.approx(target, rel=1e-12)
                assert momentum == 0.937
    bias_lr = [lr_momentum_at(i, 0, groups, schedule)[2][0] for i in range(nw + 1)]
    assert (
        bias_lr[0] == 0.1
        and bias_lr[-1] == pytest.approx(0.01)
        and all(a > b for a, b in itertools.pairwise(bias_lr))
    )


def test_apply_lr_momentum_sets_sgd_momentum_and_adam_betas() -> None:
    sgd = torch.optim.SGD(_groups(), lr=0.01)
    apply_lr_momentum(sgd, [(0.1, 0.8), (0.2, 0.85), (0.3, 0.9)])
    assert [(g["lr"], g["momentum"]) for g in sgd.param_groups] == [(0.1, 0.8), (0.2, 0.85), (0.3, 0.9)]
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    adam_groups = build_param_groups(
        model, optimizer="AdamW", lr=0.01, momentum=0.9, weight_decay=5e-4, batch_size=16
    )
    adam = torch.optim.AdamW(adam_groups, lr=0.01)
    apply_lr_momentum(adam, [(0.1, 0.8)] * 3)
    assert all(g["betas"] == (0.8, 0.999) for g in adam.param_groups)
    with pytest.raises(ValueError, match="groups"):
        apply_lr_momentum(adam, [(0.1, 0.8)])


def test_missing_initial_lr_is_named() -> None:
    with pytest.raises(KeyError, match="initial_lr"):
        lr_momentum_at(0, 0, [{"lr": 0.01}], WarmupSchedule(epochs=1, iters_per_epoch=1))
