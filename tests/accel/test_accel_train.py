"""``lucid-train --accel.*``: the flags reach the module, and a CPU fit with every flag on is the native fit.

On a CPU every fast path falls back (one warning per flag) and the run must be identical to the native run: the
same loss every step and the same model/EMA state bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from lucid_accel import AccelConfig, AccelFallbackWarning
from lucid_train.accel import AccelFlags
from lucid_train.cli import build_cli

FLAGS = tuple(f.name for f in dataclasses.fields(AccelConfig))


@pytest.fixture(scope="module")
def shapes_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lucid_data.synth import synthesize

    root = tmp_path_factory.mktemp("accel-shapes")
    return Path(synthesize("detect", root, n_train=8, n_val=4, imgsz=64, seed=0))


def _args(shapes_yaml: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        "--data.root",
        str(shapes_yaml),
        "--data.imgsz",
        "64",
        "--data.workers",
        "0",
        "--data.batch_size",
        "4",
        "--trainer.default_root_dir",
        str(run_dir),
        "--trainer.accelerator",
        "cpu",
        "--trainer.max_epochs",
        "1",
        "--trainer.enable_progress_bar",
        "false",
        *extra,
    ]


def test_flag_group_mirrors_accel_config() -> None:
    assert [f.name for f in dataclasses.fields(AccelFlags)] == list(FLAGS)
    assert all(f.default is False for f in dataclasses.fields(AccelFlags))


def test_accel_flags_reach_the_module(shapes_yaml: Path, tmp_path: Path) -> None:
    cli = build_cli(
        _args(shapes_yaml, tmp_path, "--accel.capture_network", "true", "--accel.fused_assignment", "true"),
        run=False,
    )
    assert cli.model.accel == {
        "capture_network": True,
        "capture_orthogonalization": False,
        "capture_updates": False,
        "fused_assignment": True,
    }
    default = build_cli(_args(shapes_yaml, tmp_path / "default"), run=False)
    assert not any(default.model.accel.values())


def _fit(shapes_yaml: Path, run_dir: Path, *extra: str) -> tuple[list[bytes], str, Any]:
    torch.manual_seed(0)
    cli = build_cli(_args(shapes_yaml, run_dir, "--optimizer.name", "MuSGD", *extra), run=False)
    module = cli.model
    losses: list[bytes] = []
    original = module.criterion.__class__.__call__

    class Recorder:  # wraps the objective to record every step's loss bytes
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.__dict__["inner"], name)

        def __call__(self, output: Any, batch: Any) -> Any:
            total, items = original(self.inner, output, batch)
            losses.append(total.detach().numpy().tobytes() + items.detach().numpy().tobytes())
            return total, items

    setup = module.setup

    def setup_and_record(stage: str) -> None:
        setup(stage)
        module.criterion = Recorder(module.criterion)

    module.setup = setup_and_record  # type: ignore[method-assign]
    cli.trainer.fit(module, cli.datamodule)
    digest = hashlib.sha256()
    for value in [*module.model.state_dict().values(), *module.ema_model.state_dict().values()]:
        digest.update(value.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return losses, digest.hexdigest(), module


@pytest.mark.slow  # two tiny CPU fits (~20 s)
def test_cpu_fit_with_every_flag_is_the_native_fit_and_warns_once(shapes_yaml: Path, tmp_path: Path) -> None:
    native_losses, native_state, _ = _fit(shapes_yaml, tmp_path / "native")
    on = [arg for flag in FLAGS for arg in (f"--accel.{flag}", "true")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses, state, module = _fit(shapes_yaml, tmp_path / "accel", *on)
    assert native_losses and losses == native_losses
    assert state == native_state
    messages = [str(w.message) for w in caught if issubclass(w.category, AccelFallbackWarning)]
    for flag in FLAGS:
        assert sum(f"lucid-accel: {flag} is not applied" in m for m in messages) == 1, (flag, messages)
    assert module._accel is not None and module._accel.fused_assigners == 2
