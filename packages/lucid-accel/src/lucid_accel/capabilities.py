"""What acceleration this process can use; Triton is an optional extra (`lucid-accel[cuda]`)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from types import ModuleType

import torch

TRITON_EXTRA_HINT = (
    "Triton kernels need the CUDA extra: pip install 'lucid-accel[cuda]' (or 'lucid-train[cuda]')"
)


@dataclass(frozen=True)
class Capabilities:
    cuda: bool
    cuda_graphs: bool
    triton: bool
    bf16: bool


def capabilities() -> Capabilities:
    """Probe the process once; never raises. Fast paths are used only when their capability is present."""
    cuda = torch.cuda.is_available()
    return Capabilities(
        cuda=cuda,
        cuda_graphs=cuda and hasattr(torch.cuda, "CUDAGraph"),
        triton=importlib.util.find_spec("triton") is not None,
        bf16=cuda and torch.cuda.is_bf16_supported(),
    )


def require_triton() -> ModuleType:
    """Import Triton or fail with a message naming the extra to install."""
    try:
        triton = importlib.import_module("triton")
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(TRITON_EXTRA_HINT) from exc
    return triton
