"""Exponential moving average of model weights and buffers (Polyak averaging with a warm-up ramp).

Source: issue 6 ("Recipe defaults"): updated every optimiser step, including buffers (BatchNorm running
statistics), with decay d = decay·(1 − exp(−updates / tau)), decay 0.9999, tau 2000; integer buffers are copied.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn


def ema_decay(updates: int, decay: float = 0.9999, tau: float = 2000.0) -> float:
    """d = decay·(1 − exp(−updates / tau)) — small early on so the average follows the fast-moving weights."""
    return decay * (1 - math.exp(-updates / tau))


def _unwrap(model: nn.Module) -> nn.Module:
    """The wrapped module of DataParallel / DistributedDataParallel / compiled models."""
    inner = getattr(model, "module", None)
    if isinstance(inner, nn.Module):
        return inner
    orig = getattr(model, "_orig_mod", None)
    return orig if isinstance(orig, nn.Module) else model


class ModelEMA:
    """EMA copy of a model: every float parameter and buffer averaged, non-float buffers copied."""

    def __init__(
        self, model: nn.Module, decay: float = 0.9999, tau: float = 2000.0, updates: int = 0
    ) -> None:
        self.ema = copy.deepcopy(_unwrap(model)).eval()
        self.ema.requires_grad_(False)
        self.decay = float(decay)
        self.tau = float(tau)
        self.updates = int(updates)

    @torch.no_grad()
    def update(self, model: nn.Module) -> float:
        """One EMA step (call after every optimiser step); returns the decay used."""
        self.updates += 1
        d = ema_decay(self.updates, self.decay, self.tau)
        source = _unwrap(model).state_dict()
        for name, value in self.ema.state_dict().items():
            if name not in source:
                raise KeyError(f"ModelEMA.update: model has no entry {name!r} (different architecture?)")
            new = source[name].detach()
            if value.dtype.is_floating_point:
                value.mul_(d).add_(new.to(value.dtype), alpha=1 - d)
            else:
                value.copy_(new)
        return d

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates, "decay": self.decay, "tau": self.tau, "ema": self.ema.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        missing = {"updates", "ema"} - set(state)
        if missing:
            raise KeyError(f"ModelEMA.load_state_dict: missing {sorted(missing)} in {sorted(state)}")
        self.ema.load_state_dict(state["ema"])
        self.updates = int(state["updates"])
        self.decay = float(state.get("decay", self.decay))
        self.tau = float(state.get("tau", self.tau))
