"""Gradient clipping under a real fp16 GradScaler (issue 12): clip after unscale, never on scaled gradients.

Lightning's ``16-mixed`` precision unscales the gradients inside ``optimizer.step()`` (after the closure, before
``on_before_optimizer_step``) and then lets the scaler step. The precision plugin here is Lightning's own
``MixedPrecision`` with a real ``torch.amp.GradScaler`` on the CPU; only its autocast is switched off, so the forward
runs in float32 and the scaled backward gives exactly ``scale ×`` the float32 gradients (the scale is a power of two).
The update must then equal a float32 run's update - unscaled, then clipped - within 1e-6.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.plugins.precision import MixedPrecision
from lucid_train_testing import make_shapes, tiny_data, tiny_module, tiny_trainer

from lucid_train.precision import default_precision

INIT_SCALE = 512.0
#: explicit SGD without warm-up: the update is proportional to the (clipped) gradient, so a clip on still-scaled
#: gradients (norm x 512) would shrink it 512-fold; AdamW would hide that (it normalises the gradient).
SGD_NO_WARMUP = {"name": "SGD", "lr0": 0.01, "nominal_batch": 4, "warmup_epochs": 0.0}


class _ScalerWithoutAutocast(MixedPrecision):
    """``16-mixed`` with its GradScaler but a float32 forward (so both runs share the same gradients)."""

    @contextmanager
    def forward_context(self) -> Iterator[None]:
        yield


class _RecordGradNorm(pl.Callback):
    """Callbacks' ``on_before_optimizer_step`` runs before the module's (the clip): the norm it sees is unclipped."""

    def __init__(self) -> None:
        self.norms: list[float] = []
        self.scales: list[float] = []

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: Any, optimizer: Any) -> None:
        grads = [p.grad for p in pl_module.model.parameters() if p.grad is not None]
        self.norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        self.scales.append(float(scaler.get_scale()) if scaler is not None else 1.0)


def _one_step(yaml_path: Path, run_dir: Path, plugin: Any | None) -> tuple[Any, _RecordGradNorm]:
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    data = tiny_data(yaml_path, batch_size=4)
    module = tiny_module(data, family="yolov8", optimizer=SGD_NO_WARMUP)
    record = _RecordGradNorm()
    options: dict[str, Any] = {"plugins": [plugin]} if plugin is not None else {}
    trainer = tiny_trainer(
        run_dir, max_epochs=1, limit_train_batches=1, limit_val_batches=0, callbacks=[record], **options
    )
    trainer.fit(module, datamodule=data)
    return module, record


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shapes(tmp_path_factory.mktemp("amp") / "shapes", n_train=8, n_val=2)


def test_grad_scaler_update_is_the_unscaled_then_clipped_update(shapes: Path, tmp_path: Path) -> None:
    reference, ref_norms = _one_step(shapes, tmp_path / "fp32", None)
    scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE)
    plugin = _ScalerWithoutAutocast("16-mixed", "cpu", scaler=scaler)
    scaled, scaled_norms = _one_step(shapes, tmp_path / "amp", plugin)

    assert scaled_norms.scales == [INIT_SCALE]  # the step ran with the real scaler at scale 512 ...
    # ... and the hook saw the unscaled gradients: the norm equals the float32 run's (and needs the clip at 10)
    assert scaled_norms.norms[0] == pytest.approx(ref_norms.norms[0], rel=1e-5)
    assert ref_norms.norms[0] > scaled.optimizer_config.grad_clip_norm
    assert scaler.get_scale() == INIT_SCALE  # finite gradients: the scaler stepped and kept its scale
    for (name, ours), theirs in zip(
        scaled.model.state_dict().items(), reference.model.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0, msg=name)
    assert scaled.ema_updates == reference.ema_updates == 1


def test_the_update_is_not_shrunk_by_the_scale(shapes: Path, tmp_path: Path) -> None:
    """Clipped-update size: the float32 update and the scaler run's update have the same norm (not 1/512 of it)."""
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    data = tiny_data(shapes, batch_size=4)
    start = {k: v.clone() for k, v in tiny_module(data, family="yolov8").model.state_dict().items()}
    reference, _ = _one_step(shapes, tmp_path / "fp32", None)
    plugin = _ScalerWithoutAutocast(
        "16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", init_scale=INIT_SCALE)
    )
    scaled, _ = _one_step(shapes, tmp_path / "amp", plugin)

    def update_norm(module: Any) -> float:
        deltas = [
            (v - start[k]).flatten()
            for k, v in module.model.state_dict().items()
            if v.is_floating_point() and "running" not in k
        ]
        return float(torch.linalg.vector_norm(torch.cat(deltas)))

    assert update_norm(reference) > 0
    assert update_norm(scaled) == pytest.approx(update_norm(reference), rel=1e-4)


def test_a_step_the_scaler_skips_still_updates_the_ema(shapes: Path, tmp_path: Path) -> None:
    """init_scale 2^127: the scaled loss overflows, the scaler skips the step; the EMA still counts an update."""
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    data = tiny_data(shapes, batch_size=4)
    start = {k: v.clone() for k, v in tiny_module(data, family="yolov8").model.state_dict().items()}
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)
    skipped, _ = _one_step(
        shapes, tmp_path / "skip", _ScalerWithoutAutocast("16-mixed", "cpu", scaler=scaler)
    )
    assert scaler.get_scale() < 2.0**127  # the scaler saw non-finite gradients and backed off
    for name, value in skipped.model.state_dict().items():
        if "running" in name or "num_batches" in name:
            continue  # BatchNorm statistics move in the forward, step or not
        torch.testing.assert_close(value, start[name], atol=0, rtol=0, msg=name)
    assert skipped.ema_updates == 1


def test_default_precision_is_amp_on_cuda_and_fp32_on_cpu() -> None:
    assert default_precision(cuda_available=True) == "16-mixed"
    assert default_precision(cuda_available=False) == "32-true"
    assert default_precision() == ("16-mixed" if torch.cuda.is_available() else "32-true")


def test_resolved_precision_is_printed_with_the_optimizer_line(shapes: Path, tmp_path: Path) -> None:
    module, _ = _one_step(shapes, tmp_path / "fp32", None)
    assert module.resolved.precision == "32-true"
    assert "precision=32-true" in module.resolved.describe()
    assert module.resolved.as_dict()["precision"] == "32-true"  # saved in optimizer.json


def test_cpu_accelerator_on_a_cuda_host_gets_the_cpu_precision(
    shapes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The host default is 16-mixed where CUDA is present; a run pinned to the CPU must not inherit it (Lightning
    would turn it into bf16 autocast). Simulated: the default precision is made the CUDA one."""
    import lucid_train.cli as cli_module

    monkeypatch.setattr(cli_module, "default_precision", lambda: "16-mixed")
    args = [
        "--data.root",
        str(shapes),
        "--data.workers",
        "0",
        "--trainer.default_root_dir",
        str(tmp_path / "r"),
    ]
    cpu = cli_module.build_cli(
        [*args, "--trainer.accelerator", "cpu", "--trainer.precision", "16-mixed"], run=False
    )
    assert cpu.trainer.precision == "32-true"
    assert "precision 32-true" in capsys.readouterr().out
    bf16 = cli_module.build_cli(
        [*args, "--trainer.accelerator", "cpu", "--trainer.precision", "bf16-mixed"], run=False
    )
    assert bf16.trainer.precision == "bf16-mixed"  # an explicit other precision is left alone


class _RecordAutocast(pl.Callback):
    """Whether CPU autocast is on in the forward (a hook on the network) and in the optimizer step (the hook Lightning
    calls inside ``optimizer.step()``)."""

    def __init__(self) -> None:
        self.forward: list[bool] = []
        self.step: list[bool] = []

    def on_fit_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        pl_module.model.register_forward_hook(
            lambda *_: self.forward.append(torch.is_autocast_enabled("cpu"))
        )

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: Any, optimizer: Any) -> None:
        self.step.append(torch.is_autocast_enabled("cpu"))


def test_the_optimizer_step_runs_outside_the_forward_autocast(shapes: Path, tmp_path: Path) -> None:
    """Under ``bf16-mixed`` the forward is autocast but the manual optimizer step (MuSGD's Newton–Schulz, the clip)
    and the EMA are not, as in the reference, whose optimizer step runs outside autocast."""
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    data = tiny_data(shapes, batch_size=4)
    module = tiny_module(data, family="yolo26", optimizer={"name": "MuSGD", "nominal_batch": 4})
    record = _RecordAutocast()
    trainer = tiny_trainer(
        tmp_path / "bf16",
        max_epochs=1,
        limit_train_batches=2,
        limit_val_batches=0,
        callbacks=[record],
        precision="bf16-mixed",
    )
    trainer.fit(module, datamodule=data)
    assert record.forward and all(record.forward)
    assert record.step == [False, False]
    assert module.ema_updates == 2
