"""The accel probe never raises and reports no CUDA path on a CPU-only machine; Triton's absence names the extra."""

from __future__ import annotations

import sys

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
    monkeypatch.setitem(sys.modules, "triton", None)  # makes `import triton` raise ImportError
    with pytest.raises(ImportError, match=r"lucid-accel\[cuda\]"):
        lucid_accel.require_triton()
    assert "lucid-accel[cuda]" in TRITON_EXTRA_HINT
