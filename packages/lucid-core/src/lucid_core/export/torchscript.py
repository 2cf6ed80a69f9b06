"""TorchScript export: a trace of the fused eval model (:class:`.graph.ExportModule`), frozen, with the metadata
record inside the file (extra file :data:`~.metadata.METADATA_KEY`). Fixed input size and batch (a trace bakes the
anchor grid); written atomically."""

from __future__ import annotations

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
    """Trace ``module`` (already in its export dtype) on a ``(batch, 3, *hw)`` zero batch, freeze it and save it
    with ``metadata`` to ``path``."""
    example = torch.zeros(batch, 3, *hw, dtype=torch.float16 if half else torch.float32)
    with warnings.catch_warnings(), torch.no_grad():  # tracer warnings about shape arithmetic (fixed size)
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(  # type: ignore[no-untyped-call]
            module.eval(), (example,), strict=False, check_trace=False
        )
        frozen = torch.jit.freeze(traced)
    with atomic_path(path) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch >= 2.9 announces TorchScript's deprecation
        torch.jit.save(frozen, str(tmp), _extra_files={METADATA_KEY: json.dumps(dict(metadata))})
    return path
