"""Recipe resolution (optimizer=auto as the reference, never overriding explicit values), accumulation/decay scaling,
the sampler."""

from __future__ import annotations

import math

import pytest

from lucid_train.recipe import (
    AUTO_ITERATION_THRESHOLD,
    SGD_LR0,
    SGD_MOMENTUM,
    OptimizerConfig,
    accumulate_steps,
    planned_optimizer_steps,
    resolve_optimizer,
    scaled_weight_decay,
)
from lucid_train.sampler import ShardedEpochSampler


@pytest.mark.parametrize(("batch", "expected"), [(1, 64), (16, 4), (24, 3), (64, 1), (128, 1), (40, 2)])
def test_accumulate_steps_rounds_nominal_over_batch(batch: int, expected: int) -> None:
    assert accumulate_steps(batch, 64) == expected == max(round(64 / batch), 1)


def test_weight_decay_scaled_by_batch_times_accumulate() -> None:
    assert scaled_weight_decay(5e-4, 16) == pytest.approx(5e-4 * 16 * 4 / 64)
    assert scaled_weight_decay(5e-4, 24) == pytest.approx(5e-4 * 24 * 3 / 64)
    assert scaled_weight_decay(5e-4, 128) == pytest.approx(5e-4 * 2)


# (images N, global batch, epochs, nc, family) -> (optimizer, lr0, momentum); issue 12 "optimizer=auto":
# iterations = ceil(N / max(batch, nbs=64)) x epochs; > 10,000 -> MuSGD lr0 0.01 momentum 0.9 (every family), else
# AdamW lr0 round(0.002 * 5 / (4 + nc), 6) momentum 0.9.
AUTO_TABLE = [
    ((3000, 16, 100, 80, "yolo26"), ("AdamW", round(0.002 * 5 / 84, 6), 0.9)),
    ((3000, 16, 100, 3, "yolov8"), ("AdamW", round(0.002 * 5 / 7, 6), 0.9)),
    ((118287, 16, 300, 80, "yolov8"), ("MuSGD", 0.01, 0.9)),
    ((118287, 16, 300, 80, "yolo11"), ("MuSGD", 0.01, 0.9)),
    ((118287, 16, 300, 80, "yolo26"), ("MuSGD", 0.01, 0.9)),
    # exactly 10,000 planned steps stays AdamW; one epoch more crosses the threshold
    ((64 * 100, 16, 100, 3, "yolo26"), ("AdamW", round(0.002 * 5 / 7, 6), 0.9)),
    ((64 * 100, 16, 101, 3, "yolo26"), ("MuSGD", 0.01, 0.9)),
    # a global batch above nbs consumes more images per step: fewer planned steps
    ((118287, 256, 20, 3, "yolo11"), ("AdamW", round(0.002 * 5 / 7, 6), 0.9)),
]


@pytest.mark.parametrize(("run", "expected"), AUTO_TABLE)
def test_auto_resolves_like_the_reference(
    run: tuple[int, int, int, int, str], expected: tuple[str, float, float]
) -> None:
    images, batch, epochs, nc, family = run
    iterations = planned_optimizer_steps(images, batch, 64, epochs)
    assert iterations == math.ceil(images / max(batch, 64)) * epochs
    resolved = resolve_optimizer(
        OptimizerConfig(), family=family, num_classes=nc, batch_size=batch, iterations=iterations
    )
    assert (resolved.name, resolved.lr0, resolved.momentum) == expected
    assert resolved.warmup_bias_lr == 0.0  # under auto biases warm up from 0
    assert resolved.iterations == iterations
    comparison = ">" if iterations > AUTO_ITERATION_THRESHOLD else "<="
    assert (
        resolved.reason.startswith(f"auto: {iterations} planned optimizer steps")
        and comparison in resolved.reason
    )
    assert resolved.as_dict()["reason"] == resolved.reason  # saved with its reason (optimizer.json)


def test_auto_counts_optimizer_steps_not_batches() -> None:
    """N=118287, batch 16: 7,393 batches per epoch but 1,849 optimizer steps (nbs 64)."""
    assert planned_optimizer_steps(118287, 16, 64, 1) == math.ceil(118287 / 64)
    assert planned_optimizer_steps(118287, 128, 64, 1) == math.ceil(118287 / 128)
    with pytest.raises(ValueError, match="planned_optimizer_steps"):
        planned_optimizer_steps(10, 0, 64, 1)


@pytest.mark.parametrize("name", ["SGD", "MuSGD", "AdamW"])
def test_an_explicit_optimizer_keeps_its_recipe_values_and_warmup_bias_lr(name: str) -> None:
    for iterations in (10, 10**6):
        resolved = resolve_optimizer(
            OptimizerConfig(name=name),  # type: ignore[arg-type]
            family="yolo26",
            num_classes=3,
            batch_size=16,
            iterations=iterations,
        )
        expected = (round(0.002 * 5 / 7, 6), 0.9) if name == "AdamW" else (SGD_LR0, SGD_MOMENTUM)
        assert (resolved.name, resolved.lr0, resolved.momentum) == (name, *expected)
        assert resolved.warmup_bias_lr == OptimizerConfig().warmup_bias_lr == 0.1
        assert resolved.reason == "explicit"


def test_bad_optimizer_values_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"optimizer\.name"):
        OptimizerConfig(name="Adam")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"optimizer\.lr0"):
        OptimizerConfig(lr0=-1.0)
    with pytest.raises(ValueError, match=r"optimizer\.grad_clip_norm"):
        OptimizerConfig(grad_clip_norm=float("nan"))


@pytest.mark.parametrize(("n", "world"), [(10, 2), (11, 2), (7, 3), (5, 1)])
def test_sampler_shards_one_permutation_identically_on_every_rank(n: int, world: int) -> None:
    samplers = [ShardedEpochSampler(n, seed=3, rank=r, world_size=world) for r in range(world)]
    for epoch in (0, 1):
        for s in samplers:
            s.set_epoch(epoch)
        permutations = [s.permutation() for s in samplers]
        assert all(p == permutations[0] for p in permutations)  # identical shuffle on every rank
        shards = [list(s) for s in samplers]
        assert all(len(shard) == len(samplers[0]) for shard in shards)
        assert set().union(*map(set, shards)) == set(range(n))  # every sample seen
        if n % world == 0:
            assert sorted(i for shard in shards for i in shard) == list(range(n))  # disjoint
    samplers[0].set_epoch(0)
    first = samplers[0].permutation()
    samplers[0].set_epoch(1)
    assert samplers[0].permutation() != first  # a new order every epoch


def test_sampler_without_shuffle_is_in_order() -> None:
    assert list(ShardedEpochSampler(5, shuffle=False)) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="rank 2"):
        ShardedEpochSampler(5, rank=2, world_size=2)
