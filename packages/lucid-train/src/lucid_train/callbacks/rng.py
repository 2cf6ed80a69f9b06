"""RNG state in the training checkpoint: a resumed run continues every random stream where it stopped."""

from __future__ import annotations

import random
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

#: the checkpoint entry that holds lucid-train's own state (``checkpoint[LUCID_STATE]["rng"]`` here).
LUCID_STATE = "lucid"


def rng_state() -> dict[str, Any]:
    """Every RNG the training touches (python, numpy legacy global, torch CPU, CUDA if present), weights_only-safe."""
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [
            np_name,
            torch.from_numpy(np.asarray(np_keys).copy()),
            int(np_pos),
            int(np_has_gauss),
            float(np_gauss),
        ],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, gauss_value = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss_value))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class RNGStateCallback(pl.Callback):
    """Saves :func:`rng_state` as ``checkpoint["lucid"]["rng"]`` and restores it when a checkpoint is loaded."""

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        checkpoint.setdefault(LUCID_STATE, {})["rng"] = rng_state()

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        state = checkpoint.get(LUCID_STATE, {})
        if "rng" in state:
            set_rng_state(state["rng"])
