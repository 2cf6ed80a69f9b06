"""EMA bookkeeping of a training run: the update count in the checkpoint, and one EMA for every rank.

The module's ``ema`` (:class:`lucid_core.optim.ModelEMA`) holds the averaged copy, which Lightning checkpoints as
``ema_model.*``; its update count, which sets the decay ramp, is saved here as ``checkpoint["lucid"]["ema_updates"]``.
Before every validation or test pass each rank takes rank 0's EMA weights and buffers: BatchNorm running statistics
follow each rank's own batches, so the ranks' EMA buffers drift apart at float-rounding level, and scoring every
shard with rank 0's (checkpointed) EMA makes the gathered metric that of one process scoring those weights.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl

from lucid_train.callbacks.rng import LUCID_STATE
from lucid_train.distributed import broadcast_tensors


class EMACallback(pl.Callback):
    """Checkpoints ``pl_module.ema.updates`` and broadcasts rank 0's ``pl_module.ema_model`` before evaluation."""

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        checkpoint.setdefault(LUCID_STATE, {})["ema_updates"] = pl_module.ema.updates

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        pl_module.ema.updates = int(checkpoint.get(LUCID_STATE, {}).get("ema_updates", 0))

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        broadcast_tensors(pl_module.ema_model.state_dict().values(), trainer.world_size)

    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        broadcast_tensors(pl_module.ema_model.state_dict().values(), trainer.world_size)
