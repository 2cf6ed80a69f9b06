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


class _Holder(nn.Module):
    """A module that only holds the parameters the fixture names under it."""


class _NormHolder(nn.BatchNorm1d):
    """A normalisation layer (what routes a parameter to "bn") holding only the fixture's parameters."""

    def __init__(self) -> None:
        super().__init__(1, affine=False, track_running_stats=False)


def _fixture_model(names: list[str], shapes: list[list[int]], routing: dict[str, str]) -> nn.Module:
    """A module tree with exactly the fixture's parameter names and shapes.

    A parameter routed to "bn" lives in a normalisation layer (the README's routing rule); every other one in a
    plain holder module. Names may be nested (``a.b.weight``); each dotted prefix becomes a submodule.
    """
    modules: dict[str, nn.Module] = {"": _Holder()}
    norm_owners = {name.rpartition(".")[0] for name in names if routing[name] == "bn"}
    for name, shape in zip(names, shapes, strict=True):
        owner, _, leaf = name.rpartition(".")
        parts = owner.split(".") if owner else []
        for depth in range(1, len(parts) + 1):
            path = ".".join(parts[:depth])
            if path not in modules:
                parent = modules[".".join(parts[: depth - 1])]
                child = _NormHolder() if path in norm_owners else _Holder()
                parent.add_module(parts[depth - 1], child)
                modules[path] = child
        modules[owner].register_parameter(leaf, nn.Parameter(torch.zeros(shape)))
    return modules[""]


def _batch_for_decay(weight_decay: float, decayed: float) -> int:
    """The batch size whose scaled decay (README: weight_decay · batch · accumulate / 64) is the fixture's."""
    for batch in range(1, 1025):
        if scaled_weight_decay(weight_decay, batch) == pytest.approx(decayed, rel=1e-12):
            return batch
    raise AssertionError(f"no batch size gives decay {decayed} from weight_decay {weight_decay}")


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
    names, routing = list(opt_fx["param_names"]), dict(opt_fx["routing"])
    model = _fixture_model(names, opt_fx["param_shapes"], routing)
    assert sorted(n for n, _ in model.named_parameters()) == sorted(names)
    boosted = {n for g in opt_fx["param_groups"] if g["lr_boosted_x3"] for n in g["param_names"]}
    decays = {g["weight_decay"] for g in opt_fx["param_groups"] if g.get("weight_decay")}
    assert len(decays) <= 1
    batch = _batch_for_decay(hyp["weight_decay"], decays.pop()) if decays else 64
    groups = build_param_groups(
        model,
        optimizer="MuSGD",
        lr=hyp["lr"],
        momentum=hyp["momentum"],
        weight_decay=hyp["weight_decay"],
        batch_size=batch,
        boost=boosted.__contains__,
    )
    assert len(groups) == len(opt_fx["param_groups"])
    for ours, ref in zip(groups, opt_fx["param_groups"], strict=True):
        plain = {k: v for k, v in ref.items() if k != "param_names"}
        assert {k: ours[k] for k in plain} == plain
        assert sorted(ours["param_names"]) == sorted(ref["param_names"])
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
