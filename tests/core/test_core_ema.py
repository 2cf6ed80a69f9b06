"""ModelEMA: decay sequence, buffers averaged, integer buffers copied, state round trip."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lucid_core.optim import ModelEMA, ema_decay


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))


def test_decay_sequence() -> None:
    for n in (1, 2, 10, 2000, 10000):
        assert ema_decay(n) == pytest.approx(0.9999 * (1 - math.exp(-n / 2000)), rel=1e-15)
    model = _model()
    ema = ModelEMA(model)
    used = [ema.update(model) for _ in range(5)]
    assert used == [ema_decay(n) for n in range(1, 6)]
    assert ema.updates == 5


def test_update_averages_parameters_and_buffers() -> None:
    model = _model()
    ema = ModelEMA(model, decay=0.5, tau=1.0)
    before = {k: v.clone() for k, v in ema.ema.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    model.train()(torch.randn(2, 3, 8, 8))  # changes BN running stats and num_batches_tracked
    d = ema.update(model)
    assert d == pytest.approx(0.5 * (1 - math.exp(-1)))
    current = model.state_dict()
    for name, value in ema.ema.state_dict().items():
        if value.dtype.is_floating_point:
            torch.testing.assert_close(value, before[name] * d + current[name] * (1 - d))
        else:
            assert torch.equal(value, current[name])
    assert not any(p.requires_grad for p in ema.ema.parameters())
    assert not ema.ema.training


def test_state_dict_round_trip() -> None:
    model = _model()
    ema = ModelEMA(model)
    for _ in range(3):
        ema.update(model)
    restored = ModelEMA(_model())
    restored.load_state_dict(ema.state_dict())
    assert restored.updates == 3
    for a, b in zip(restored.ema.state_dict().values(), ema.ema.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(KeyError, match="updates"):
        restored.load_state_dict({"ema": {}})
