"""Recipe resolution (optimizer=auto never overrides explicit values), accumulation/decay scaling, the sampler."""

from __future__ import annotations

import pytest

from lucid_train.recipe import (
    AUTO_ITERATION_THRESHOLD,
    OptimizerConfig,
    accumulate_steps,
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


def test_auto_picks_adamw_for_short_runs_and_sgd_or_musgd_for_long_runs() -> None:
    short = resolve_optimizer(
        OptimizerConfig(),
        family="yolo26",
        num_classes=6,
        batch_size=16,
        total_iterations=AUTO_ITERATION_THRESHOLD,
    )
    assert short.name == "AdamW"
    assert short.lr0 == round(0.002 * 5 / (4 + 6), 6)
    assert short.momentum == 0.9
    long26 = resolve_optimizer(
        OptimizerConfig(),
        family="yolo26",
        num_classes=6,
        batch_size=16,
        total_iterations=AUTO_ITERATION_THRESHOLD + 1,
    )
    assert (long26.name, long26.lr0, long26.momentum) == ("MuSGD", 0.01, 0.937)
    long8 = resolve_optimizer(
        OptimizerConfig(), family="yolov8", num_classes=6, batch_size=16, total_iterations=10**6
    )
    assert (long8.name, long8.lr0, long8.momentum) == ("SGD", 0.01, 0.937)
    assert "auto" in long8.reason and long8.accumulate == 4


def test_explicit_lr_and_momentum_are_never_overridden() -> None:
    config = OptimizerConfig(lr0=0.02, momentum=0.5)
    for iterations in (10, 10**6):
        resolved = resolve_optimizer(
            config, family="yolo26", num_classes=3, batch_size=8, total_iterations=iterations
        )
        assert (resolved.lr0, resolved.momentum) == (0.02, 0.5)
        assert "lr0 explicit" in resolved.reason and "momentum explicit" in resolved.reason
    explicit_sgd = resolve_optimizer(
        OptimizerConfig(name="SGD"), family="yolo26", num_classes=3, batch_size=8, total_iterations=10
    )
    assert (explicit_sgd.name, explicit_sgd.lr0, explicit_sgd.momentum, explicit_sgd.reason) == (
        "SGD",
        0.01,
        0.937,
        "explicit",
    )


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
