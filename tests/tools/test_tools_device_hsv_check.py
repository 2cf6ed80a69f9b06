"""``tools/gpu/device_hsv_check.py`` in its CPU smoke mode: the plumbing runs, and a byte that differs from the
worker path fails it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu" / "device_hsv_check.py"


@pytest.fixture
def check(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("DEVICE_HSV_CHECK_SMOKE", "1")  # read at import: toy sizes on the CPU
    spec = importlib.util.spec_from_file_location("device_hsv_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_run_checks_bytes_and_prints_the_costs(
    check: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.set_num_threads(1)
    assert check.main() == 0
    out = capsys.readouterr().out
    assert f"bytes: {check.BATCHES} batches, 0 of " in out
    assert "% of the step" in out and "ms deferred" in out and out.rstrip().endswith("ok")


def test_a_differing_byte_fails(
    check: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lucid_data.augment import hsv_torch

    exact = hsv_torch.augment_hsv_batch

    def off_by_one(images: torch.Tensor, gains: torch.Tensor) -> torch.Tensor:
        out = exact(images, gains)
        out[0, 0, 0, 0] ^= 1
        return out

    monkeypatch.setattr(hsv_torch, "augment_hsv_batch", off_by_one)
    torch.set_num_threads(1)
    assert check.main() == 1
    out = capsys.readouterr().out
    assert f"bytes: {check.BATCHES} batches, {check.BATCHES} of " in out and "FAILED" in out
