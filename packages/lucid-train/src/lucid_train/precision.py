"""Mixed precision with BatchNorm and the loss kept in float32 (BatchNorm in half precision is a known silent
divergence of from-scratch reproductions; docs/TRAINING.md).

Lightning's ``bf16-mixed`` / ``16-mixed`` precision runs the forward under ``torch.autocast``. This module wraps every
BatchNorm instance's ``forward`` so it runs with autocast disabled on a float32 input (and returns float32), and
offers :func:`float32_output` to lift a model's training output to float32 before the objective runs.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

T = TypeVar("T")

_FLOAT32_BN_MARK = "_lucid_float32_bn"


def _float32_forward(forward: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    @functools.wraps(forward)
    def wrapped(x: Tensor) -> Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            return forward(x.float())

    return wrapped


#: trainer precisions that run the forward under autocast.
MIXED_PRECISIONS = ("bf16-mixed", "16-mixed", "bf16", "16")


def is_mixed(precision: object) -> bool:
    """Whether a trainer ``precision`` runs the forward under autocast (BatchNorm is then kept in float32)."""
    return precision in MIXED_PRECISIONS


def keep_batchnorm_float32(model: nn.Module) -> int:
    """Make every ``_BatchNorm`` of ``model`` compute in float32 under autocast; returns how many were wrapped.

    Idempotent (an already-wrapped module is skipped). The wrapper is an instance attribute, so the module's
    ``state_dict`` and class are unchanged.
    """
    count = 0
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and not getattr(
            module, _FLOAT32_BN_MARK, False
        ):
            module.forward = _float32_forward(module.forward)  # type: ignore[method-assign,assignment]
            setattr(module, _FLOAT32_BN_MARK, True)
            count += 1
    return count


def float32_output(value: T) -> T:
    """Return ``value`` with every floating tensor inside (dataclasses, dicts, lists, tuples) cast to float32."""
    return _cast(value)  # type: ignore[no-any-return]


def _cast(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.float() if value.is_floating_point() else value
    if is_dataclass(value) and not isinstance(value, type):
        return replace(value, **{f.name: _cast(getattr(value, f.name)) for f in fields(value) if f.init})
    if isinstance(value, dict):
        return {k: _cast(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cast(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_cast(v) for v in value)
    return value


def default_precision(cuda_available: bool | None = None) -> str:
    """The trainer precision when ``--trainer.precision`` is not given.

    ``16-mixed`` when CUDA is available (the reference trains with AMP by default: fp16 autocast + GradScaler,
    BatchNorm and the loss in float32, :func:`keep_batchnorm_float32`), ``32-true`` otherwise (on CPU Lightning
    would turn ``16-mixed`` into bf16 autocast, which CPUs without native bf16 run slowly). ``bf16-mixed`` is the
    documented option for Ampere-or-newer GPUs (no scaler needed). Gradients are clipped after the scaler's
    unscale in every precision (``YOLOLitModule.on_before_optimizer_step``).
    """
    if cuda_available is None:
        cuda_available = bool(torch.cuda.is_available())
    return "16-mixed" if cuda_available else "32-true"


def autocast_off(device_type: str) -> contextlib.AbstractContextManager[Any]:
    """Autocast switched off on ``device_type`` (a no-op context where torch has no autocast for it).

    The module's manual optimizer step runs inside Lightning's ``training_step`` autocast; the optimizer's matrix
    products (MuSGD's Newton–Schulz), the clip and the EMA run outside it, as the reference's optimizer step does.
    """
    if device_type in ("cpu", "cuda"):
        return torch.autocast(device_type=device_type, enabled=False)
    return contextlib.nullcontext()
