"""lucid_data.order: the epoch order a training set is visited in, and the recent images mosaic partners come
from; DetectionDataset draws every mosaic partner from that pool."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_data.augment import AugmentConfig
from lucid_data.augment.pipeline import RECENT_BATCHES, RECENT_MAX
from lucid_data.dataset import DetectionDataset
from lucid_data.order import epoch_permutation, rank_order, recent_images
from lucid_data.synth import synthesize


def test_epoch_permutation_is_distributed_samplers_shuffle_padded_by_wrapping() -> None:
    expected = torch.randperm(10, generator=torch.Generator().manual_seed(3 + 2)).tolist()
    assert epoch_permutation(10, seed=3, epoch=2) == expected
    padded = epoch_permutation(10, seed=3, epoch=2, world_size=4)
    assert padded == expected + expected[:2]
    assert epoch_permutation(5, seed=0, epoch=0, shuffle=False) == [0, 1, 2, 3, 4]


def test_ranks_split_the_padded_order_and_together_visit_every_index() -> None:
    orders = [rank_order(10, seed=1, epoch=4, rank=r, world_size=3) for r in range(3)]
    assert {len(o) for o in orders} == {4}
    assert set().union(*orders) == set(range(10))
    with pytest.raises(ValueError, match="rank 3 is outside world_size 3"):
        rank_order(10, seed=1, epoch=4, rank=3, world_size=3)


def test_recent_images_end_at_the_sample_and_reach_back_into_the_previous_epoch() -> None:
    order, before = [5, 1, 4, 0, 2, 3], [3, 0, 2, 5, 4, 1]
    assert recent_images(order, before, 4, 3) == [4, 0, 2]
    assert recent_images(order, before, 1, 4) == [4, 1, 5, 1]  # two of this epoch, two from the previous one
    assert recent_images(order, [], 1, 4) == [5, 1]  # the first epoch starts with fewer
    assert recent_images(order, before, 0, 100) == [*before, 5]
    with pytest.raises(ValueError, match="position 6 is outside an order of 6"):
        recent_images(order, before, 6, 3)
    with pytest.raises(ValueError, match="size: expected >= 1"):
        recent_images(order, before, 0, 0)


@pytest.fixture(scope="module")
def detect_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize(
        "detect", tmp_path_factory.mktemp("synth") / "detect", n_train=24, n_val=2, imgsz=48, seed=5
    )


def _loaded_by_sample(ds: DetectionDataset, index: int) -> list[int]:
    loaded: list[int] = []
    load = ds.pipeline.load

    def spy(i: int) -> object:
        loaded.append(int(i))
        return load(i)

    ds.pipeline.load = spy
    try:
        ds[index]
    finally:
        ds.pipeline.load = load
    return loaded


@pytest.mark.parametrize("epoch", [0, 3])
def test_mosaic_partners_come_from_the_recent_images_of_the_epoch_order(
    detect_root: Path, epoch: int
) -> None:
    config = AugmentConfig(mosaic=1.0, mosaic_recent=5)
    ds = DetectionDataset(detect_root, imgsz=48, augment=True, augment_config=config, seed=2)
    ds.set_epoch(epoch)
    order = rank_order(len(ds), seed=2, epoch=epoch)
    seen_outside_window = False
    for position, index in enumerate(order):
        pool = ds.mosaic_partner_pool(index)
        assert pool is not None and pool[-1] == index
        this_epoch = order[max(0, position - 4) : position + 1]
        assert pool[len(pool) - len(this_epoch) :] == this_epoch
        before = rank_order(len(ds), seed=2, epoch=epoch - 1) if epoch else []
        window = (list(before) + list(order[: position + 1]))[-5:]
        assert sorted(pool) == sorted(set(window))  # the window's distinct images
        loaded = _loaded_by_sample(ds, index)
        assert set(loaded) <= set(pool), (index, loaded, pool)
        seen_outside_window |= any(i not in order[: position + 1] for i in pool)
    assert seen_outside_window == (epoch > 0)  # later epochs start with the previous epoch's last images


def test_a_window_as_large_as_the_order_keeps_every_image_visited(detect_root: Path) -> None:
    # a window larger than the 24 images: the reference evicts none
    config = AugmentConfig(mosaic=1.0, mosaic_recent=100)
    ds = DetectionDataset(detect_root, imgsz=48, augment=True, augment_config=config, seed=2)
    order = rank_order(len(ds), seed=2, epoch=0)
    for position in (0, 5, len(order) - 1):
        assert ds.mosaic_partner_pool(order[position]) == order[: position + 1]
    ds.set_epoch(1)
    assert ds.mosaic_partner_pool(order[0]) is None  # every image has been visited


def test_the_default_window_is_resolved_by_the_batch(detect_root: Path) -> None:
    assert AugmentConfig().mosaic_recent is None
    assert AugmentConfig().for_batch(16).mosaic_recent == RECENT_BATCHES * 16
    assert AugmentConfig().for_batch(10_000).mosaic_recent == RECENT_MAX
    assert AugmentConfig(mosaic_recent=0).for_batch(16).mosaic_recent == 0  # a set value is kept
    with pytest.raises(ValueError, match="batch_size: expected >= 1, got 0"):
        AugmentConfig().for_batch(0)
    ds = DetectionDataset(detect_root, imgsz=48, augment=True, seed=2)
    assert ds.mosaic_partner_pool(0) is None  # no batch known: partners from every image


def test_mosaic_recent_0_draws_partners_from_every_image(detect_root: Path) -> None:
    ds = DetectionDataset(
        detect_root, imgsz=48, augment=True, augment_config=AugmentConfig(mosaic_recent=0), seed=2
    )
    assert ds.mosaic_partner_pool(0) is None
    partners = {i for index in range(len(ds)) for i in _loaded_by_sample(ds, index)}
    assert len(partners) > 12  # drawn over the whole set, not a window of 5 around each sample


def test_the_pool_follows_the_rank_of_a_distributed_loader(detect_root: Path) -> None:
    ds = DetectionDataset(
        detect_root, imgsz=48, augment=True, augment_config=AugmentConfig(mosaic_recent=3), seed=2
    )
    ds.rank, ds.world_size = 1, 2
    order = rank_order(len(ds), seed=2, epoch=0, rank=1, world_size=2)
    assert ds.mosaic_partner_pool(order[4]) == order[2:5]
    other = next(i for i in range(len(ds)) if i not in order)
    assert ds.mosaic_partner_pool(other) is None  # not this rank's image: drawn from every image


def test_mosaic_recent_is_a_count() -> None:
    with pytest.raises(ValueError, match=r"AugmentConfig\.mosaic_recent must be >= 0, got -1"):
        AugmentConfig(mosaic_recent=-1)
    with pytest.raises(ValueError, match=r"AugmentConfig\.mosaic_recent is a count, got 2\.5"):
        AugmentConfig(mosaic_recent=2.5)  # type: ignore[arg-type]
    assert AugmentConfig(mosaic_recent=128.0).mosaic_recent == 128  # type: ignore[arg-type]
    assert type(AugmentConfig(close_mosaic=3.0).close_mosaic) is int  # type: ignore[arg-type]


def test_samples_stay_a_function_of_seed_epoch_index_rank(detect_root: Path) -> None:
    config = AugmentConfig(mosaic_recent=4)
    a = DetectionDataset(detect_root, imgsz=48, augment=True, augment_config=config, seed=9)
    b = DetectionDataset(detect_root, imgsz=48, augment=True, augment_config=config, seed=9)
    a.set_epoch(2)
    b.set_epoch(2)
    for index in (7, 0, 13):  # any visiting order gives the same sample
        assert torch.equal(a[index]["image"], b[index]["image"])
    assert np.array_equal(a[3]["targets"].boxes, b[3]["targets"].boxes)
