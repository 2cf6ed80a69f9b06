"""The framework-free training recipe (`lucid_core.optim.recipe`): warm-up, accumulation to the nominal batch, the
``optimizer=auto`` rule, clipping after the AMP unscale, and the EMA step. No Lightning is imported here."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
from torch import nn

from lucid_core.optim import ModelEMA, MuSGD, ema_decay, linear_lr_factor
from lucid_core.optim.recipe import (
    AUTO_ITERATION_THRESHOLD,
    SGD_LR0,
    SGD_MOMENTUM,
    Iteration,
    OptimizerConfig,
    TrainingRecipe,
    build_optimizer,
    resolve_optimizer,
)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))


def _recipe(
    config: OptimizerConfig, *, batch: int = 16, epochs: int = 10, images: int = 320
) -> TrainingRecipe:
    recipe = TrainingRecipe(config)
    recipe.plan(images=images, batch_size=batch, epochs=epochs, num_classes=3)
    return recipe


def test_the_core_recipe_imports_no_lightning() -> None:
    code = (
        "import sys, lucid_core.optim.recipe; print(any(m.split('.')[0] == 'lightning' for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------------------------------- warm-up
def test_warmup_lr_and_momentum_at_given_iterations() -> None:
    """SGD, 10 epochs of 20 batches, 3 warm-up epochs (nw = 60): the bias group's lr falls from warmup_bias_lr, the
    others rise from 0, momentum rises from warmup_momentum, each linearly to its epoch value; after the warm-up the
    lr is lr0 · lf(epoch) and momentum keeps its last warm-up value."""
    cfg = OptimizerConfig(name="SGD", warmup_epochs=3.0)
    recipe = _recipe(cfg)
    optimizer = recipe.optimizer(_model())
    kinds = [group["param_group"] for group in optimizer.param_groups]
    assert kinds == ["weight", "bn", "bias"]
    nw = recipe.warmup_iterations(20)
    assert nw == 60

    def lr_momentum(index: int) -> tuple[list[float], list[float]]:
        recipe.apply_schedule(optimizer, Iteration(epoch=index // 20, batch=index % 20, batches=20))
        return [g["lr"] for g in optimizer.param_groups], [g["momentum"] for g in optimizer.param_groups]

    lrs, momenta = lr_momentum(0)
    assert lrs == [0.0, 0.0, cfg.warmup_bias_lr]
    assert momenta == [cfg.warmup_momentum] * 3

    lrs, momenta = lr_momentum(30)  # half-way, in epoch 1
    target = SGD_LR0 * linear_lr_factor(1, 10, cfg.lrf)
    assert lrs[0] == pytest.approx(target / 2) and lrs[1] == pytest.approx(target / 2)
    assert lrs[2] == pytest.approx(cfg.warmup_bias_lr + (target - cfg.warmup_bias_lr) / 2)
    assert momenta == pytest.approx([(cfg.warmup_momentum + SGD_MOMENTUM) / 2] * 3)

    lrs, momenta = lr_momentum(60)  # the first iteration after the warm-up (epoch 3)
    assert lrs == pytest.approx([SGD_LR0 * linear_lr_factor(3, 10, cfg.lrf)] * 3)
    last = cfg.warmup_momentum + (SGD_MOMENTUM - cfg.warmup_momentum) * 59 / 60
    assert momenta == pytest.approx([last] * 3)


def test_no_warmup_in_a_one_epoch_run_and_adamw_keeps_its_betas() -> None:
    recipe = _recipe(OptimizerConfig(name="AdamW"), epochs=1)
    assert recipe.warmup_iterations(50) == 0  # capped at (epochs - 1) x batches: the run reaches its schedule
    optimizer = recipe.optimizer(_model())
    assert isinstance(optimizer, torch.optim.AdamW)
    recipe.apply_schedule(optimizer, Iteration(epoch=0, batch=0, batches=50))
    resolved = recipe.resolved
    assert resolved is not None
    assert all(g["lr"] == pytest.approx(resolved.lr0) for g in optimizer.param_groups)
    assert all(g["betas"] == (resolved.momentum, 0.999) for g in optimizer.param_groups)


# ---------------------------------------------------------------------------------------------------- accumulation
def _step_indices(recipe: TrainingRecipe, batches: int, epochs: int) -> list[int]:
    steps = []
    for epoch in range(epochs):
        for batch in range(batches):
            at = Iteration(epoch=epoch, batch=batch, batches=batches)
            if recipe.should_step(at):
                recipe.last_opt_step = at.index
                steps.append(at.index)
    return steps


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        (16, [3, 7, 9, 13, 17, 19]),  # 4 batches per step, and the epoch's last batch
        (24, [2, 5, 8, 9, 12, 15, 18, 19]),  # round(64 / 24) = 3
        (64, list(range(20))),  # the nominal batch: every batch
        (128, list(range(20))),  # above it: every batch
        (1, [9, 19]),  # 64 batches per step: only the epochs' last batches
    ],
)
def test_accumulation_boundaries_after_the_warmup(batch: int, expected: list[int]) -> None:
    recipe = _recipe(OptimizerConfig(name="SGD", warmup_epochs=0.0), batch=batch, epochs=2)
    assert _step_indices(recipe, batches=10, epochs=2) == expected


def test_accumulation_ramps_from_one_during_the_warmup() -> None:
    """Batch 16 (4 batches per step after the warm-up), nw = 100: the count is round(interp(i, [0, nw], [1, 4]))
    with Python's round (half to even: 2.5 -> 2), then the planned 4."""
    recipe = _recipe(OptimizerConfig(name="SGD", warmup_epochs=1.0), batch=16, epochs=5)
    counts = [
        recipe.accumulate_at(Iteration(epoch=i // 100, batch=i % 100, batches=100))
        for i in (0, 17, 50, 99, 100)
    ]
    assert counts == [1, 2, 2, 4, 4]
    steps = _step_indices(recipe, batches=100, epochs=1)
    assert steps[:3] == [0, 1, 2]  # one batch per step at the start of the warm-up
    assert steps[-1] == 99


# ---------------------------------------------------------------------------------------------------- auto rule
@pytest.mark.parametrize(
    ("images", "batch", "epochs", "nc", "expected"),
    [
        (118287, 16, 300, 80, ("MuSGD", 0.01, 0.9)),  # ceil(118287 / 64) x 300 planned steps > 10,000
        (3000, 16, 100, 80, ("AdamW", round(0.002 * 5 / 84, 6), 0.9)),  # 4,700 planned steps
        (64 * 100, 16, 100, 3, ("AdamW", round(0.002 * 5 / 7, 6), 0.9)),  # exactly the threshold stays AdamW
        (64 * 100, 16, 101, 3, ("MuSGD", 0.01, 0.9)),
    ],
)
def test_auto_rule_picks_the_reference_optimizer(
    images: int, batch: int, epochs: int, nc: int, expected: tuple[str, float, float]
) -> None:
    recipe = TrainingRecipe()
    resolved = recipe.plan(images=images, batch_size=batch, epochs=epochs, num_classes=nc)
    assert (resolved.name, resolved.lr0, resolved.momentum) == expected
    assert resolved.iterations == math.ceil(images / max(batch, 64)) * epochs
    assert (resolved.iterations > AUTO_ITERATION_THRESHOLD) == (resolved.name == "MuSGD")
    assert resolved.warmup_bias_lr == 0.0 and resolved.accumulate == 4
    assert isinstance(recipe.optimizer(_model()), MuSGD if expected[0] == "MuSGD" else torch.optim.AdamW)


def test_explicit_choices_are_kept() -> None:
    sgd = resolve_optimizer(OptimizerConfig(name="SGD"), num_classes=3, batch_size=16, iterations=10**6)
    assert (sgd.name, sgd.lr0, sgd.momentum, sgd.warmup_bias_lr) == ("SGD", SGD_LR0, SGD_MOMENTUM, 0.1)
    auto = resolve_optimizer(OptimizerConfig(lr0=0.004), num_classes=3, batch_size=16, iterations=10)
    assert (auto.name, auto.lr0) == ("AdamW", 0.004) and auto.reason.endswith("lr0 explicit")


def test_build_optimizer_routes_the_recipe_groups() -> None:
    model = _model()
    sgd = build_optimizer(
        model, resolve_optimizer(OptimizerConfig(name="SGD"), num_classes=3, batch_size=16, iterations=1)
    )
    assert isinstance(sgd, torch.optim.SGD) and len(sgd.param_groups) == 3
    musgd = build_optimizer(
        model, resolve_optimizer(OptimizerConfig(name="MuSGD"), num_classes=3, batch_size=16, iterations=1)
    )
    assert (
        isinstance(musgd, MuSGD) and len(musgd.param_groups) == 8
    )  # weight, bn, bias, muon; each x (lr x 3, x 1)
    decayed = [g["weight_decay"] for g in sgd.param_groups if g["param_group"] == "weight"]
    assert decayed == [pytest.approx(5e-4 * 16 * 4 / 64)]  # batch x accumulate / nominal batch


# ---------------------------------------------------------------------------------------------------- the step
def _loss(model: nn.Module) -> torch.Tensor:
    torch.manual_seed(1)
    x = torch.randn(4, 3, 8, 8)
    return model(x).pow(2).sum() * 100.0  # large gradients: the clip at 1.0 is active


def _stepped(scaler: torch.amp.GradScaler | None) -> tuple[nn.Module, list[float]]:
    model = _model()
    recipe = _recipe(OptimizerConfig(name="SGD", warmup_epochs=0.0, grad_clip_norm=1.0))
    optimizer = recipe.optimizer(model)
    seen: list[float] = []
    clip = recipe.clip

    def recording_clip(opt: torch.optim.Optimizer) -> None:
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        seen.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))
        clip(opt)

    recipe.clip = recording_clip  # type: ignore[method-assign]
    loss = _loss(model)
    (scaler.scale(loss) if scaler is not None else loss).backward()
    recipe.step(optimizer, Iteration(epoch=0, batch=0, batches=20), scaler=scaler)
    return model, seen


def test_clipping_runs_after_the_unscale() -> None:
    """With a GradScaler at 2^10 the clip sees the true gradients (the float32 run's norm, not 1024 x it) and the
    update equals the float32 run's."""
    reference, ref_norms = _stepped(None)
    scaled, norms = _stepped(torch.amp.GradScaler("cpu", init_scale=2.0**10))
    assert ref_norms[0] > 1.0  # the clip is active
    assert norms[0] == pytest.approx(ref_norms[0], rel=1e-5)
    for ours, theirs in zip(scaled.state_dict().values(), reference.state_dict().values(), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)


def test_step_order_schedule_step_zero_grad_then_ema() -> None:
    model = _model()
    ema = ModelEMA(model)
    recipe = _recipe(OptimizerConfig(name="SGD", warmup_epochs=0.0))
    optimizer = recipe.optimizer(model)
    _loss(model).backward()
    at = Iteration(epoch=2, batch=5, batches=20)
    before = {k: v.clone() for k, v in ema.ema.state_dict().items()}
    recipe.step(optimizer, at, ema=ema, model=model)
    assert recipe.last_opt_step == at.index == 45
    assert all(p.grad is None for p in model.parameters())  # zeroed (set to None) after the step
    assert optimizer.param_groups[0]["lr"] == pytest.approx(SGD_LR0 * linear_lr_factor(2, 10, 0.01))
    d = ema_decay(1)
    assert ema.updates == 1
    for name, value in ema.ema.state_dict().items():  # the EMA averaged the stepped weights
        if value.is_floating_point():
            expected = before[name] * d + model.state_dict()[name] * (1 - d)
            torch.testing.assert_close(value, expected)
    with pytest.raises(ValueError, match="ema needs the trained model"):
        recipe.step(optimizer, at, ema=ema)


def test_stepping_before_planning_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="plan"):
        TrainingRecipe().optimizer(_model())
