"""Rank-0 broadcasts for multi-process (DDP) runs; each is a no-op in a single process."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor


def distributed(world_size: int) -> bool:
    """Whether a ``world_size``-process run has an initialised process group to talk over."""
    return int(world_size) > 1 and dist.is_available() and dist.is_initialized()


def broadcast_tensors(tensors: Iterable[Tensor], world_size: int) -> None:
    """Overwrite every rank's ``tensors`` with rank 0's, in place."""
    if not distributed(world_size):
        return
    with torch.no_grad():
        for tensor in tensors:
            dist.broadcast(tensor, src=0)


def broadcast_object(value: Any, world_size: int) -> Any:
    """Rank 0's ``value`` (any picklable object) on every rank."""
    if not distributed(world_size):
        return value
    shared = [value]
    dist.broadcast_object_list(shared, src=0)
    return shared[0]
