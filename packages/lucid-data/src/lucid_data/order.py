"""The epoch order of a training set, and the recent images a mosaic sample's partners are drawn from.

One seeded shuffle per epoch, the same on every rank: ``torch.randperm(n, generator=Generator().manual_seed(seed +
epoch))`` (the scheme of ``torch.utils.data.DistributedSampler``), padded by wrapping to a multiple of
``world_size``, each rank taking ``order[rank::world_size]``. lucid-train's training sampler serves this order;
``DetectionDataset`` reads it to find the images that precede a sample (:func:`recent_images`), because the
reference's mosaic takes its partners from recently loaded images (docs/DATA.md, "Mosaic partners").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def epoch_permutation(
    num_samples: int, *, seed: int, epoch: int, shuffle: bool = True, world_size: int = 1
) -> list[int]:
    """The epoch's full order of ``range(num_samples)`` (shuffled when ``shuffle``), padded by wrapping to a
    multiple of ``world_size``."""
    if num_samples < 1:
        raise ValueError(f"num_samples: expected >= 1, got {num_samples}")
    if world_size < 1:
        raise ValueError(f"world_size: expected >= 1, got {world_size}")
    if shuffle:
        generator = torch.Generator().manual_seed(int(seed) + int(epoch))
        order = torch.randperm(num_samples, generator=generator).tolist()
    else:
        order = list(range(num_samples))
    total = math.ceil(num_samples / world_size) * world_size
    while len(order) < total:
        order += order[: total - len(order)]
    return order


def rank_order(
    num_samples: int, *, seed: int, epoch: int, rank: int = 0, world_size: int = 1, shuffle: bool = True
) -> list[int]:
    """The indices rank ``rank`` of ``world_size`` visits in ``epoch``, in order."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world_size {world_size}")
    order = epoch_permutation(num_samples, seed=seed, epoch=epoch, shuffle=shuffle, world_size=world_size)
    return order[rank::world_size]


def recent_images(order: Sequence[int], before: Sequence[int], position: int, size: int) -> list[int]:
    """The ``size`` indices visited up to and including ``order[position]``, continued into the end of the previous
    epoch's order ``before`` when this epoch has not yet visited that many (fewer at the start of the first epoch)."""
    if size < 1:
        raise ValueError(f"size: expected >= 1, got {size}")
    if not 0 <= position < len(order):
        raise ValueError(f"position {position} is outside an order of {len(order)}")
    window = list(order[max(0, position - size + 1) : position + 1])
    missing = size - len(window)
    if missing > 0 and before:
        window = list(before[max(0, len(before) - missing) :]) + window
    return window
