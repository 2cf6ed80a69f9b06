"""Bounded memory (issue 18): with the RAM cache on and 2 DataLoader workers, resident memory stays flat over
epochs (within 10 %) and the forked workers share the cache's arena instead of copying it.

Every batch carries its worker's Rss and Private_Dirty (`/proc/self/smaps_rollup`, Linux `proc(5)`); the main
process's Rss is read after each epoch. Workers are forked afresh every epoch (not persistent), as in training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import pytest
from torch.utils.data import DataLoader

from lucid_data import collate
from lucid_data.dataset import DetectionDataset, single_threaded_worker
from lucid_data.synth import synthesize

pytestmark = [pytest.mark.slow]

EPOCHS = 3
FLAT = 1.10


def _memory_kib() -> dict[str, int]:
    values = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Private_Dirty"):
            values[key] = int(rest.split()[0])
    return values


_AT_START: dict[str, int] = {}


def _worker_init(worker_id: int) -> None:
    single_threaded_worker(worker_id)
    _AT_START.update(_memory_kib())  # before this worker reads a single cached pixel


def _collate_with_memory(samples: list[dict[str, Any]]) -> dict[str, Any]:
    batch = collate(samples)
    batch["worker_memory"] = (dict(_AT_START), _memory_kib())
    return batch


def _epoch_loader(ds: DetectionDataset) -> DataLoader[Any]:
    """One epoch's loader: 2 workers forked afresh (not persistent), each batch carrying its worker's memory."""
    return DataLoader(
        ds,
        batch_size=8,
        shuffle=True,
        num_workers=2,
        collate_fn=_collate_with_memory,
        worker_init_fn=_worker_init,
    )


@pytest.mark.skipif(
    not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux /proc/self/smaps_rollup"
)
def test_rss_is_flat_over_epochs_and_workers_share_the_cache(tmp_path: Path) -> None:
    # OpenCV's pthread pool is not fork-safe: a pool started in this process before the fork can leave the
    # workers waiting on its lock, so the parent does its pixel work single-threaded (as a training process
    # whose workers do the augmentation does)
    cv2.setNumThreads(1)
    data = synthesize("detect", tmp_path / "mem", n_train=128, n_val=1, imgsz=512, seed=11)
    ds = DetectionDataset(data, imgsz=512, augment=True, cache="ram")
    assert ds.cache is not None
    arena_kib = ds.cache.arena.nbytes // 1024
    main_rss, worker_rss, worker_private_growth = [], [], []
    for epoch in range(EPOCHS + 1):  # epoch 0 warms up allocators and the targets cache
        ds.set_epoch(epoch)
        loader = _epoch_loader(ds)
        last: list[tuple[dict[str, int], dict[str, int]]] = []
        for batch in loader:
            last.append(batch["worker_memory"])
        del loader
        if epoch == 0:
            continue
        main_rss.append(_memory_kib()["Rss"])
        worker_rss.extend(end["Rss"] for _, end in last[-2:])
        worker_private_growth.extend(end["Private_Dirty"] - start["Private_Dirty"] for start, end in last)
    assert max(main_rss) <= FLAT * min(main_rss), main_rss
    assert max(worker_rss) <= FLAT * min(worker_rss), worker_rss
    # every worker read the whole arena (128 images, shuffled; 96 MiB) without a private copy, which alone would add the whole arena without making it private
    assert max(worker_private_growth) < arena_kib, (worker_private_growth, arena_kib)


def _uncached_worker_memory(data: Path, decode_buffer_mib: float) -> tuple[list[int], list[int]]:
    """Worker Rss at the end of each epoch and Private_Dirty growth per batch over EPOCHS (after a warm-up)."""
    ds = DetectionDataset(data, imgsz=512, augment=True, decode_buffer_mib=decode_buffer_mib)
    worker_rss, worker_private_growth = [], []
    for epoch in range(EPOCHS + 1):
        ds.set_epoch(epoch)
        loader = _epoch_loader(ds)
        last = [batch["worker_memory"] for batch in loader]
        del loader
        if epoch == 0:
            continue
        worker_rss.extend(end["Rss"] for _, end in last[-2:])
        worker_private_growth.extend(end["Private_Dirty"] - start["Private_Dirty"] for start, end in last)
    return worker_rss, worker_private_growth


@pytest.mark.skipif(
    not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux /proc/self/smaps_rollup"
)
def test_uncached_workers_hold_at_most_their_decode_buffer(tmp_path: Path) -> None:
    """Without the cache each worker keeps its recent decodes (`RecentDecodes`); over 3 epochs of 96 MiB of
    images its resident memory stays flat, and it grows by no more than twice the buffer's bound beyond a worker
    that keeps none (the same loader, `decode_buffer_mib=0`)."""
    cv2.setNumThreads(1)
    data = synthesize("detect", tmp_path / "mem", n_train=128, n_val=1, imgsz=512, seed=12)
    bound_mib = 16
    rss, growth = _uncached_worker_memory(data, bound_mib)
    _, growth_without = _uncached_worker_memory(data, 0)
    assert max(rss) <= FLAT * min(rss), rss
    images_kib = 128 * 512 * 512 * 3 // 1024  # what an unbounded buffer would end up holding
    extra_kib = max(growth) - max(growth_without)
    # the bound plus as much again for the heap's freed-but-kept blocks of evicted images; no bound: ~+65 MiB
    assert extra_kib <= 2 * bound_mib * 1024 < images_kib / 2, (growth, growth_without)
