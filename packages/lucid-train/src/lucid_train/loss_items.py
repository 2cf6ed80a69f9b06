"""The objective's per-batch loss items: the non-finite check and their means over an epoch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from lucid_train.errors import NonFiniteLossError


def check_finite(
    total: Tensor,
    items: Tensor,
    names: Sequence[str],
    batch: dict[str, Any],
    *,
    step: int,
    epoch: int,
    batch_index: int,
) -> None:
    """Raise :class:`NonFiniteLossError` (naming the step, the loss terms and the batch's images) on a NaN/inf."""
    if not bool(torch.isfinite(total)) or not bool(torch.isfinite(items).all()):
        paths = [str(m.get("path", m.get("image_id", "?"))) for m in batch.get("meta", [])]
        raise NonFiniteLossError(
            step=step,
            epoch=epoch,
            batch_index=batch_index,
            items=dict(zip(names, items.tolist())),
            paths=paths,
        )


class EpochLosses:
    """The loss items of the current epoch: their running sum, and the epoch's close (once per epoch)."""

    def __init__(self) -> None:
        self.sums: Tensor | None = None
        self.count = 0
        self.closed_epoch = -1

    def start(self) -> None:
        self.sums, self.count = None, 0

    def add(self, items: Tensor) -> None:
        self.sums = items if self.sums is None else self.sums + items
        self.count += 1

    def close(self, epoch: int) -> bool:
        """Mark ``epoch`` closed; False when it already was."""
        if self.closed_epoch == epoch:
            return False
        self.closed_epoch = epoch
        return True

    def means(self, names: Sequence[str]) -> dict[str, float] | None:
        """``{name: mean}`` over the epoch's batches, or ``None`` when none was added."""
        if self.sums is None or not self.count:
            return None
        return dict(zip(names, (self.sums / self.count).tolist()))
