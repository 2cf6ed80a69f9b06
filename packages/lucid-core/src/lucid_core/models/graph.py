"""Layer-graph description of a family (a list of layer specs) and its compound scaling.

Each layer reads the previous output (``-1``) or a list of earlier layer outputs; index i is the reference's
layer i (shared/fixtures/model_params.json ``layers_n``). Scaling (shared/fixtures/README.md "model_params.json";
the reference's scale rows): channels ``ceil(min(c, max_channels) * width / 8) * 8``, repeats ``max(round(n * depth), 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from lucid_core.models.config import ScaleRow
from lucid_core.nn.attention import C2PSA
from lucid_core.nn.blocks import SPPF, C2f, C3k2
from lucid_core.nn.conv import Concat, Conv


@dataclass(frozen=True)
class LayerSpec:
    """``sources`` (-1 = previous), block ``kind``, base ``repeats`` and block options before scaling."""

    sources: int | tuple[int, ...]
    kind: str
    out_channels: int = 0  # before width scaling; 0 for parameter-free nodes
    repeats: int = 1
    options: dict[str, Any] = field(default_factory=dict)


def scale_channels(channels: int, row: ScaleRow) -> int:
    return row.channels(channels)


def scale_repeats(repeats: int, row: ScaleRow) -> int:
    return max(round(repeats * row.depth), 1) if repeats > 1 else repeats


def build_layer(spec: LayerSpec, in_channels: list[int], row: ScaleRow) -> tuple[nn.Module, int]:
    """Instantiate one non-head layer; returns ``(module, out_channels)``."""
    c_in = in_channels[0]
    if spec.kind == "Upsample":
        return nn.Upsample(scale_factor=2, mode="nearest"), c_in
    if spec.kind == "Concat":
        return Concat(1), sum(in_channels)
    c_out = scale_channels(spec.out_channels, row)
    n = scale_repeats(spec.repeats, row)
    opts = dict(spec.options)
    if spec.kind == "Conv":
        return Conv(c_in, c_out, opts.get("kernel_size", 1), opts.get("stride", 1)), c_out
    if spec.kind == "C2f":
        return C2f(c_in, c_out, n, shortcut=opts.get("shortcut", False)), c_out
    if spec.kind == "C3k2":
        block = C3k2(
            c_in,
            c_out,
            n,
            c3k=opts.get("c3k", False),
            expansion=opts.get("expansion", 0.5),
            attn=opts.get("attn", False),
        )
        return block, c_out
    if spec.kind == "SPPF":
        return SPPF(
            c_in, c_out, opts.get("kernel_size", 5), opts.get("n", 3), opts.get("shortcut", False)
        ), c_out
    if spec.kind == "C2PSA":
        return C2PSA(c_in, c_out, n), c_out
    raise ValueError(f"unknown layer kind {spec.kind!r}")
