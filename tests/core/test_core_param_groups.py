"""Parameter-group routing, batch-scaled weight decay and the MuSGD eight-group layout of the fixture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from lucid_core.optim import MuSGD, build_param_groups, gradient_accumulation, scaled_weight_decay


class _BiasOnly(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(size))


class _FixtureModel(nn.Module):
    """Parameter names/shapes of the fixture (conv3x3.weight, conv1x1.weight, bn_or_conv.bias, linear.weight)."""

    def __init__(self, shapes: dict[str, list[int]]) -> None:
        super().__init__()
        o, i, k, _ = shapes["conv3x3.weight"]
        self.conv3x3 = nn.Conv2d(i, o, k, bias=False)
        o, i, k, _ = shapes["conv1x1.weight"]
        self.conv1x1 = nn.Conv2d(i, o, k, bias=False)
        self.bn_or_conv = _BiasOnly(shapes["bn_or_conv.bias"][0])
        o, i = shapes["linear.weight"]
        self.linear = nn.Linear(i, o, bias=False)


class _SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.cls = nn.Conv2d(8, 4, 1)
        self.frozen = nn.Conv2d(4, 4, 1)
        self.frozen.requires_grad_(False)


@pytest.mark.shared
def test_musgd_groups_reproduce_fixture(shared_dir: Path) -> None:
    fx: dict[str, Any] = torch.load(
        shared_dir / "fixtures" / "musgd_public.pt", weights_only=True, map_location="cpu"
    )
    opt_fx = fx["optimizer"]
    hyp = opt_fx["hyperparameters"]
    model = _FixtureModel(dict(zip(opt_fx["param_names"], opt_fx["param_shapes"], strict=True)))
    # README: "decay = weight_decay · batch · accumulate / nbs (0.0005 for batch 16)", i.e. factor 1 at batch 16.
    groups = build_param_groups(
        model,
        optimizer="MuSGD",
        lr=hyp["lr"],
        momentum=hyp["momentum"],
        weight_decay=hyp["weight_decay"],
        batch_size=16,
    )
    assert len(groups) == len(opt_fx["param_groups"])
    for ours, ref in zip(groups, opt_fx["param_groups"], strict=True):
        assert {k: ours[k] for k in ref} == ref
        assert ("weight_decay" in ours) == ("weight_decay" in ref) and ("use_muon" in ours) == (
            "use_muon" in ref
        )
    routed = {n: g["param_group"] for g in groups for n in g["param_names"]}
    assert routed == opt_fx["routing"]
    optimizer = MuSGD(groups, muon=hyp["muon"], sgd=hyp["sgd"])
    for effective, actual in zip(opt_fx["effective_param_groups"], optimizer.param_groups, strict=True):
        assert {k: actual[k] for k in effective} == effective


def test_weight_decay_scaling_with_accumulation() -> None:
    assert (
        gradient_accumulation(16) == 4 and gradient_accumulation(128) == 1 and gradient_accumulation(24) == 3
    )
    assert scaled_weight_decay(5e-4, 16) == pytest.approx(5e-4)
    assert scaled_weight_decay(5e-4, 24) == pytest.approx(5e-4 * 24 * 3 / 64)
    assert scaled_weight_decay(5e-4, 128) == pytest.approx(1e-3)


@pytest.mark.parametrize("optimizer", ["SGD", "AdamW"])
def test_three_groups_for_sgd_and_adamw(optimizer: str) -> None:
    model = _SmallNet()
    groups = build_param_groups(
        model,
        optimizer=optimizer,
        lr=0.01,
        momentum=0.937,
        weight_decay=5e-4,
        batch_size=8,
        boost=lambda n: True,  # type: ignore[arg-type]
    )
    names = {g["param_group"]: g["param_names"] for g in groups}
    assert [g["param_group"] for g in groups] == ["weight", "bn", "bias"]
    assert names == {
        "weight": ["conv.weight", "cls.weight"],
        "bn": ["bn.weight"],
        "bias": ["bn.bias", "cls.bias"],
    }
    decays = {g["param_group"]: g["weight_decay"] for g in groups}
    assert decays == {"weight": pytest.approx(5e-4 * 8 * 8 / 64), "bn": 0.0, "bias": 0.0}
    assert all(g["lr"] == 0.01 and not g["lr_boosted_x3"] for g in groups)
    opt = torch.optim.SGD(groups, lr=0.01) if optimizer == "SGD" else torch.optim.AdamW(groups, lr=0.01)
    assert sum(len(g["params"]) for g in opt.param_groups) == 5  # frozen parameters are left out


def test_musgd_boost_predicate_splits_groups() -> None:
    model = _SmallNet()
    groups = build_param_groups(
        model,
        optimizer="MuSGD",
        lr=0.01,
        momentum=0.9,
        weight_decay=5e-4,
        batch_size=64,
        boost=lambda n: n.startswith("cls."),
    )
    layout = [(g["param_group"], g["lr_boosted_x3"], g["lr"], g["param_names"]) for g in groups]
    assert layout == [
        ("weight", True, pytest.approx(0.03), []),
        ("weight", False, 0.01, []),
        ("bn", True, pytest.approx(0.03), []),
        ("bn", False, 0.01, ["bn.weight"]),
        ("bias", True, pytest.approx(0.03), ["cls.bias"]),
        ("bias", False, 0.01, ["bn.bias"]),
        ("muon", True, pytest.approx(0.03), ["cls.weight"]),
        ("muon", False, 0.01, ["conv.weight"]),
    ]


def test_unknown_optimizer_is_rejected() -> None:
    with pytest.raises(ValueError, match="optimizer"):
        build_param_groups(
            _SmallNet(), optimizer="Adam", lr=0.01, momentum=0.9, weight_decay=0.0, batch_size=8
        )  # type: ignore[arg-type]
