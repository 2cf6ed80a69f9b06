"""The training forward's fast paths: the network's memory format and, optionally, ``torch.compile``.

Channels-last (NHWC) is the default on the CPU, where oneDNN's convolutions work in NHWC, and off on CUDA and under
``--model.compile``; both layouts compute the same step up to float rounding. Measurements: docs/benchmarks.md and
docs/TRAINING.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn

__all__ = ["FastPaths", "resolve_channels_last"]


def resolve_channels_last(option: bool | None, device_type: str, *, compile: bool = False) -> bool:
    """``option`` when given; else channels-last exactly when training on the CPU without ``torch.compile``."""
    if option is not None:
        return bool(option)
    return device_type == "cpu" and not compile


class FastPaths:
    """``--model.channels_last`` (``None``: by device) and ``--model.compile`` of one trained network.

    The compiled network is held here, outside the LightningModule's tree (no duplicate ``state_dict`` keys).
    """

    def __init__(self, channels_last: bool | None = None, compile: bool = False) -> None:
        #: the user's choice (``None`` = by device); :attr:`channels_last` is what it resolved to.
        self.option = None if channels_last is None else bool(channels_last)
        self.channels_last = bool(channels_last)
        self.compile = bool(compile)
        self.compiled: Callable[[Tensor], Any] | None = None
        self.layout_ready = False

    def set_layout(self, model: nn.Module, device_type: str) -> bool:
        """Resolve the layout for ``device_type`` and put ``model``'s 4-D weights in it, in place (parameter
        identities are kept); returns whether it is channels-last.

        Call it before the optimizer is built and before DDP wraps the model (its gradient buckets take the
        parameters' strides).
        """
        self.channels_last = resolve_channels_last(self.option, device_type, compile=self.compile)
        model.to(memory_format=torch.channels_last if self.channels_last else torch.contiguous_format)
        self.layout_ready = True
        return self.channels_last

    def prepare(self, model: nn.Module, device_type: str, *, accel: bool = False) -> None:
        """At fit start: the layout when :meth:`set_layout` has not run, and the compiled network unless a
        lucid-accel session (``accel``) drives the forward (then compilation is skipped, with a note)."""
        if not self.layout_ready:
            self.set_layout(model, device_type)
        if self.compile and self.compiled is None:
            if accel:
                rank_zero_info("lucid-train: --model.compile ignored: a --accel.* session drives the forward")
            else:
                self.compiled = torch.compile(model)

    def __call__(self, images: Tensor, eager: Callable[[Tensor], Any]) -> Any:
        """The training forward of ``images`` in the network's layout: compiled when prepared, else ``eager``."""
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return self.compiled(images) if self.compiled is not None else eager(images)
