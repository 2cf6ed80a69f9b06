"""``tools/gpu/accel_check.py report``: identity and the 1.3x combined speed-up decide the exit status."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu" / "accel_check.py"


@pytest.fixture(scope="module")
def check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("accel_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_runs(check: ModuleType, out: Path, **changes: dict[str, Any]) -> None:
    for name, flags, no_warmup, _ in check.PLAN:
        run: dict[str, Any] = {
            "name": name,
            "flags": list(flags),
            "no_warmup": no_warmup,
            "device": "test",
            "losses": ["00ff"] * check.STEPS,
            "hashes": {"model": "m", "optimizer": "o", "ema": "e"},
            "median_step_ms": 100.0 if not flags else 90.0,
            "steady_median_step_ms": 100.0 if not flags else 90.0,
            "fit_wall_s": 10.0,
            "fallbacks": {},
            "network_recordings": 0,
            "optimizer_replays": {},
            "fused_assigners": 0,
        }
        if name == "all":
            run["median_step_ms"] = run["steady_median_step_ms"] = 70.0
        run.update(changes.get(name, {}))
        (out / f"{name}.json").write_text(json.dumps(run))


def test_identical_and_fast_enough_passes(
    check: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_runs(check, tmp_path)
    assert check.report(tmp_path) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "1.43x" in text  # 100 ms native / 70 ms all
    assert set(json.loads((tmp_path / "results.json").read_text())) == {name for name, *_ in check.PLAN}


def test_a_changed_loss_byte_fails(
    check: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    losses = ["00ff"] * check.STEPS
    losses[7] = "00fe"
    _write_runs(check, tmp_path, fused_assignment={"losses": losses})
    assert check.report(tmp_path) == 1
    assert "FAIL fused_assignment: differs from native (losses diff@7" in capsys.readouterr().out


def test_a_changed_state_hash_or_a_slow_combination_fails(check: ModuleType, tmp_path: Path) -> None:
    _write_runs(
        check, tmp_path, capture_updates_no_warmup={"hashes": {"model": "m", "optimizer": "X", "ema": "e"}}
    )
    assert check.report(tmp_path) == 1
    _write_runs(check, tmp_path, all={"median_step_ms": 80.0})  # 1.25x < 1.3x
    assert check.report(tmp_path) == 1
