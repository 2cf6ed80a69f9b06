"""Tiny end-to-end fits: run directory, determinism, resume after a kill, EMA, non-finite guard (yolo26 n, 64 px)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lucid_train_testing import (
    make_shapes,
    recorded_losses,
    state_hash,
    tiny_data,
    tiny_module,
    tiny_trainer,
)

from lucid_train.errors import NonFiniteLossError


@pytest.fixture(scope="module")
def shapes_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shapes(tmp_path_factory.mktemp("shapes"), n_train=16, n_val=4)


class _Killed(Exception):
    pass


class _KillAtEpoch(pl.Callback):
    """Simulates a kill: raises at the start of ``epoch`` (after the previous epoch's last.ckpt was written)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.current_epoch == self.epoch:
            raise _Killed


def _fit(
    yaml_path: Path,
    run_dir: Path,
    *,
    epochs: int,
    ckpt_path: Path | None = None,
    callbacks: list[Any] | None = None,
    **module_kwargs: Any,
) -> tuple[Any, pl.Trainer]:
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    data = tiny_data(yaml_path, batch_size=8)
    module = tiny_module(data, **module_kwargs)
    trainer = tiny_trainer(run_dir, max_epochs=epochs, callbacks=callbacks)
    trainer.fit(module, datamodule=data, ckpt_path=str(ckpt_path) if ckpt_path else None)
    return module, trainer


@pytest.mark.slow
def test_fit_writes_the_run_directory(shapes_yaml: Path, tmp_path: Path) -> None:
    module, trainer = _fit(shapes_yaml, tmp_path, epochs=2)
    for name in ("last.ckpt", "best.ckpt", "metrics.csv", "metrics.jsonl", "optimizer.json", "summary.txt"):
        assert (tmp_path / name).is_file(), name
    with (tmp_path / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    for column in (
        "train/box_loss",
        "train/cls_loss",
        "lr/pg0",
        "lr/pg1",
        "lr/pg2",
        "metrics/mAP50",
        "metrics/mAP50-95",
        "epoch_seconds",
    ):
        assert column in rows[0], column
        assert all(math.isfinite(float(r[column])) for r in rows)
    jsonl = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in jsonl] == [0, 1]
    resolved = json.loads((tmp_path / "optimizer.json").read_text())
    assert resolved["name"] in ("SGD", "MuSGD", "AdamW") and resolved["lr0"] > 0
    # checkpoints are plain data (loadable without unpickling code) and carry the EMA, loss schedule and RNG
    ckpt = torch.load(tmp_path / "last.ckpt", weights_only=True)
    assert ckpt["epoch"] == 1
    assert {"ema_updates", "rng", "loss", "last_opt_step"} <= set(ckpt["lucid"])
    assert any(k.startswith("ema_model.") for k in ckpt["state_dict"])
    # EMA: one update per optimizer step
    assert module.ema_updates == trainer.global_step > 0
    # best is also exported in the lucid-core format and loads back as the EMA model
    from lucid_core.checkpoint import load_model

    exported = sorted(p.name for p in tmp_path.glob("best.*"))
    assert any(name.endswith(".safetensors") for name in exported), exported
    loaded = load_model(tmp_path / "best.safetensors")
    assert int(loaded.num_classes) == module.num_classes
    assert "lucid-train:" in (tmp_path / "summary.txt").read_text()


@pytest.mark.slow
def test_same_seed_gives_byte_identical_losses_and_weights(shapes_yaml: Path, tmp_path: Path) -> None:
    first, first_trainer = _fit(shapes_yaml, tmp_path / "a", epochs=1)
    second, second_trainer = _fit(shapes_yaml, tmp_path / "b", epochs=1)
    first_losses = recorded_losses(first_trainer)
    assert first_losses and first_losses == recorded_losses(second_trainer)
    assert state_hash(first.model) == state_hash(second.model)
    assert state_hash(first.ema_model) == state_hash(second.ema_model)


@pytest.mark.slow
def test_resume_after_kill_continues_bit_exactly(shapes_yaml: Path, tmp_path: Path) -> None:
    straight, straight_trainer = _fit(shapes_yaml, tmp_path / "straight", epochs=2)
    straight_losses = recorded_losses(straight_trainer)
    with pytest.raises(_Killed):
        _fit(shapes_yaml, tmp_path / "killed", epochs=2, callbacks=[_KillAtEpoch(1)])
    last = tmp_path / "killed" / "last.ckpt"
    assert torch.load(last, weights_only=True)["epoch"] == 0
    resumed, trainer = _fit(shapes_yaml, tmp_path / "killed", epochs=2, ckpt_path=last)
    assert trainer.current_epoch == 2
    per_epoch = len(straight_losses) // 2
    assert recorded_losses(trainer) == straight_losses[per_epoch:]
    assert resumed.ema_updates == straight.ema_updates
    assert state_hash(resumed.model) == state_hash(straight.model)
    assert state_hash(resumed.ema_model) == state_hash(straight.ema_model)
    # a resumed run with more epochs continues from where it stopped
    _longer, trainer = _fit(
        shapes_yaml, tmp_path / "killed", epochs=3, ckpt_path=tmp_path / "killed" / "last.ckpt"
    )
    assert trainer.current_epoch == 3 and len(recorded_losses(trainer)) == per_epoch
    rows = (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["epoch"] for r in rows] == [0, 1, 2]


def test_ema_updates_weights_and_buffers_with_the_decay_ramp(shapes_yaml: Path) -> None:
    module = tiny_module(tiny_data(shapes_yaml))
    with torch.no_grad():
        for value in module.ema_model.state_dict().values():
            if value.dtype.is_floating_point:
                value.zero_()
        for value in module.model.state_dict().values():
            if value.dtype.is_floating_point:
                value.fill_(1.0)
    decays = []
    expected_value = 0.0
    for updates in (1, 2, 3):
        module.ema.update(module.model)
        d = 0.9999 * (1 - math.exp(-updates / 2000))
        decays.append(d)
        expected_value = expected_value * d + (1 - d)
        for key, value in module.ema_model.state_dict().items():
            if value.dtype.is_floating_point:
                assert torch.allclose(value, torch.full_like(value, expected_value), rtol=1e-5, atol=0), key
    assert any("running_mean" in k for k in module.ema_model.state_dict())  # buffers are averaged too
    assert module.ema_updates == 3 and decays == sorted(decays)


def test_non_finite_loss_stops_naming_step_and_batch_and_keeps_last_checkpoint(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    class _PoisonAtEpoch(pl.Callback):
        def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
            if trainer.current_epoch == 1:
                real = pl_module.criterion

                def poisoned(output: Any, batch: Any) -> Any:
                    total, items = real(output, batch)
                    return total * float("nan"), items

                pl_module.criterion = poisoned

    with pytest.raises(NonFiniteLossError) as info:
        _fit(shapes_yaml, tmp_path, epochs=2, callbacks=[_PoisonAtEpoch()])
    message = str(info.value)
    assert "step" in message and "batch 0" in message and "epoch 1" in message
    assert info.value.epoch == 1 and info.value.batch_index == 0
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["epoch"] == 0


class _RecordSteps(pl.Callback):
    """Records (iteration, per-group (lr, momentum)) whenever an optimizer step happened on a batch."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, list[tuple[float, float]]]] = []
        self._last_step = 0

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step != self._last_step:
            self._last_step = trainer.global_step
            iteration = batch_idx + trainer.num_training_batches * trainer.current_epoch
            groups = trainer.optimizers[0].param_groups
            self.steps.append((iteration, [(g["lr"], g["momentum"]) for g in groups]))


def test_lr_and_momentum_per_group_follow_the_warmup_and_decay_formulas(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    from lucid_train.recipe import OptimizerConfig

    recorder = _RecordSteps()
    epochs, lr0, lrf = 2, 0.02, 0.01
    config = OptimizerConfig(name="SGD", lr0=lr0, lrf=lrf, warmup_min_iters=3)
    _module, trainer = _fit(shapes_yaml, tmp_path, epochs=epochs, callbacks=[recorder], optimizer=config)
    nb = trainer.num_training_batches
    nw = min(max(round(3.0 * nb), 3), (epochs - 1) * nb)  # 3 warm-up epochs, capped before the final epoch
    names = [g["param_group"] for g in trainer.optimizers[0].param_groups]
    assert names == ["weight", "bn", "bias"]
    assert len(recorder.steps) == trainer.global_step > 0
    assert any(iteration >= nw for iteration, _ in recorder.steps)  # the run leaves warm-up
    for iteration, values in recorder.steps:
        epoch = iteration // nb
        target = lr0 * ((1 - epoch / epochs) * (1 - lrf) + lrf)
        for name, (lr, momentum) in zip(names, values):
            start = 0.1 if name == "bias" else 0.0
            if iteration < nw:
                assert lr == pytest.approx(start + (target - start) * iteration / nw, rel=1e-9, abs=1e-12)
                assert momentum == pytest.approx(0.8 + (0.937 - 0.8) * iteration / nw, rel=1e-9)
            else:  # momentum keeps its last warm-up value; the lr follows the per-epoch schedule
                held = epoch == (nw - 1) // nb
                frac = (nw - 1) / nw
                assert lr == pytest.approx(start + (target - start) * frac if held else target, rel=1e-9)
                assert momentum == pytest.approx(0.8 + (0.937 - 0.8) * frac, rel=1e-9)
