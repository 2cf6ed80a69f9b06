"""`ShardedEpochSampler`: one seeded shuffle per epoch, identical on every rank, each rank taking its slice.

The order is ``lucid_data.order.rank_order``: ``torch.randperm(n, generator=Generator().manual_seed(seed + epoch))``
(the scheme of ``torch.utils.data.DistributedSampler``), padded by wrapping so every rank gets the same number of
samples, then strided by rank (``indices[rank::world_size]``), the order the dataset reads for mosaic partners; augmentation streams still differ per rank (the dataset is keyed by
(seed, epoch, index, rank)). Lightning calls :meth:`ShardedEpochSampler.set_epoch` before every epoch.

``key`` (optional) maps each index to what the DataLoader hands the dataset (for the training set
``DetectionDataset.sample_key``, which carries the main process's epoch state to persistent workers); the keys are
made when the epoch's iterator is created, after the epoch state is set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import Sampler

from lucid_data.order import epoch_permutation, rank_order


class ShardedEpochSampler(Sampler[Any]):
    """Seeded per-epoch permutation of ``range(num_samples)``, sharded over ``world_size`` ranks."""

    def __init__(
        self,
        num_samples: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        key: Callable[[int], Any] | None = None,
    ) -> None:
        if num_samples < 1:
            raise ValueError(f"num_samples: expected >= 1, got {num_samples}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        self.num_samples = num_samples
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.key = key
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def permutation(self) -> list[int]:
        """The epoch's full permutation (the same on every rank), padded to a multiple of ``world_size``."""
        return epoch_permutation(
            self.num_samples,
            seed=self.seed,
            epoch=self.epoch,
            shuffle=self.shuffle,
            world_size=self.world_size,
        )

    def __iter__(self) -> Iterator[Any]:
        indices = rank_order(
            self.num_samples,
            seed=self.seed,
            epoch=self.epoch,
            rank=self.rank,
            world_size=self.world_size,
            shuffle=self.shuffle,
        )
        return iter(indices if self.key is None else [self.key(i) for i in indices])

    def __len__(self) -> int:
        return math.ceil(self.num_samples / self.world_size)
