"""What a Lightning trainer and its data module say about the run: global batch, batches per epoch, images."""

from __future__ import annotations

import math
from typing import Any


def global_batch_size(trainer: Any) -> int:
    """The data module's ``batch_size`` (16 without one) × the world size."""
    batch = int(getattr(getattr(trainer, "datamodule", None), "batch_size", 16))
    return batch * max(int(trainer.world_size), 1)


def batches_per_epoch(trainer: Any) -> int:
    """Training batches per epoch: the trainer's count once known, else the data module's train loader length."""
    nb = trainer.num_training_batches
    if isinstance(nb, int | float) and math.isfinite(nb) and nb > 0:
        return int(nb)
    dm = getattr(trainer, "datamodule", None)
    return max(len(dm.train_dataloader()) if dm is not None else 1, 1)


def train_images(trainer: Any) -> int:
    """Training images N (the data module's train dataset; else batches × global batch)."""
    dataset = getattr(getattr(trainer, "datamodule", None), "train_dataset", None)
    if dataset is not None:
        return len(dataset)
    return batches_per_epoch(trainer) * global_batch_size(trainer)  # pragma: no cover - no datamodule
