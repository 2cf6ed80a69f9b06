"""Per-epoch dataset state: epoch of the augmentation streams and the close-mosaic switch (reference close_mosaic 10).

Runs at ``on_train_epoch_start``. Persistent workers get the state with every sample key
(``DetectionDataset.sample_key``); the first epoch of a run (or of a resumed run), whose keys Lightning draws before
this hook, is set by ``YOLODataModule.train_dataloader``.
"""

from __future__ import annotations

import lightning.pytorch as pl

from lucid_train.datamodule import planned_epochs


class EpochStateCallback(pl.Callback):
    """Calls ``datamodule.start_epoch(epoch, max_epochs)`` at the start of every training epoch."""

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        if datamodule is None or not hasattr(datamodule, "start_epoch"):
            return
        datamodule.start_epoch(int(trainer.current_epoch), planned_epochs(trainer))
