"""Per-epoch dataset state: epoch of the augmentation streams and the close-mosaic switch (reference close_mosaic 10).

Runs at ``on_train_epoch_start``, before the epoch's dataloader workers are created (workers are not persistent),
so every worker sees the epoch and the mosaic switch.
"""

from __future__ import annotations

import lightning.pytorch as pl
from lightning.pytorch.utilities import rank_zero_info


class EpochStateCallback(pl.Callback):
    """Calls ``datamodule.prepare_epoch(epoch, max_epochs)`` at the start of every training epoch."""

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        if datamodule is None or not hasattr(datamodule, "prepare_epoch"):
            return
        epoch = int(trainer.current_epoch)
        if datamodule.prepare_epoch(epoch, int(trainer.max_epochs or 0)):
            rank_zero_info(
                f"epoch {epoch}: mosaic closed for the last {datamodule.close_mosaic_epochs} epochs"
            )
