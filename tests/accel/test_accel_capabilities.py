"""The accel probe never raises and reports no CUDA path on a CPU-only machine; Triton's absence names the extra."""

from __future__ import annotations

import builtins
from typing import Any

import pytest
import torch

import lucid_accel
from lucid_accel.capabilities import TRITON_EXTRA_HINT


def test_capabilities_consistent_with_torch() -> None:
    caps = lucid_accel.capabilities()
    assert caps.cuda == torch.cuda.is_available()
    if not caps.cuda:
        assert not caps.cuda_graphs and not caps.bf16


def test_missing_triton_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "triton":
            raise ImportError("No module named 'triton'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"lucid-accel\[cuda\]"):
        lucid_accel.require_triton()
    assert "lucid-accel[cuda]" in TRITON_EXTRA_HINT
