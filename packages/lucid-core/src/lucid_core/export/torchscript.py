"""TorchScript export: a trace of the fused eval model (:class:`.graph.ExportModule`), frozen, with the metadata
record inside the file (extra file :data:`~.metadata.METADATA_KEY`). Fixed input size and batch (a trace bakes the
anchor grid); written atomically.

The trace is taken in channels_last (weights and example input), the layout oneDNN's CPU convolutions run fastest
in, and the runner (:class:`~.runtime.TorchScriptRunner`) feeds it channels_last: measured ~0.6x the latency of an
NCHW trace (docs/EXPORT.md "Latency"); outputs equal the NCHW trace's to float rounding."""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from lucid_core.atomic import atomic_path
from lucid_core.export.graph import ExportModule
from lucid_core.export.metadata import METADATA_KEY

__all__ = ["write_torchscript"]


def write_torchscript(
    module: ExportModule,
    path: Path,
    hw: tuple[int, int],
    *,
    batch: int,
    half: bool,
    metadata: Mapping[str, Any],
) -> Path:
    """Trace a channels_last copy of ``module`` (already in its export dtype; left untouched) on a
    ``(batch, 3, *hw)`` zero batch, freeze it and save it with ``metadata`` to ``path``."""
    example = torch.zeros(batch, 3, *hw, dtype=torch.float16 if half else torch.float32)
    example = example.contiguous(memory_format=torch.channels_last)
    channels_last = copy.deepcopy(module).eval().to(memory_format=torch.channels_last)
    with warnings.catch_warnings(), torch.no_grad():  # tracer warnings about shape arithmetic (fixed size)
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(  # type: ignore[no-untyped-call]
            channels_last, (example,), strict=False, check_trace=False
        )
        frozen = torch.jit.freeze(traced)
    with atomic_path(path) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch >= 2.9 announces TorchScript's deprecation
        torch.jit.save(frozen, str(tmp), _extra_files={METADATA_KEY: json.dumps(dict(metadata))})
    return path
