"""EMA with ``torch._foreach_*`` per (device, dtype) bucket is bit-identical to one update per tensor (issue 19)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from lucid_core.optim import ModelEMA, ema_decay


def _model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Conv2d(8, 4, 1), nn.BatchNorm2d(4))
    model[2].to(torch.float64)  # a second float dtype bucket
    model.register_buffer("half_stat", torch.randn(5).to(torch.bfloat16))  # a third
    return model


def _per_tensor_update(ema: nn.Module, model: nn.Module, d: float) -> None:
    """The pre-foreach ModelEMA.update body (the native reference)."""
    source = model.state_dict()
    with torch.no_grad():
        for name, value in ema.state_dict().items():
            new = source[name].detach()
            if value.dtype.is_floating_point:
                value.mul_(d).add_(new.to(value.dtype), alpha=1 - d)
            else:
                value.copy_(new)


def _train_step(model: nn.Module, step: int) -> None:
    gen = torch.Generator().manual_seed(step)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.1)
        model.half_stat.mul_(1.5)
    x = torch.randn(2, 3, 9, 9, generator=gen)
    model[1](model[0](x))  # BatchNorm running stats and num_batches_tracked change
    model[3](model[2](model[1](model[0](x)).double()).float())


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_foreach_ema_bit_identical_to_per_tensor(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    model = _model().to(device)
    ema = ModelEMA(model, decay=0.9999, tau=3.0)
    reference = copy.deepcopy(ema.ema)
    for step in range(1, 8):
        _train_step(model, step)
        d = ema.update(model)
        assert d == ema_decay(step, 0.9999, 3.0)
        _per_tensor_update(reference, model, d)
        for (name, got), want in zip(
            ema.ema.state_dict().items(), reference.state_dict().values(), strict=True
        ):
            assert got.dtype == want.dtype, name
            assert torch.equal(got, want), f"{name} differs at update {step}"
    dtypes = {v.dtype for v in ema.ema.state_dict().values()}
    assert {torch.float32, torch.float64, torch.bfloat16, torch.int64} <= dtypes
