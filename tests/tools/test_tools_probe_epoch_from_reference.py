"""tools/probe_epoch_from_reference.py: the reference's optimiser groups by name, the state copy, the epoch's lr
(no reference run needed: the committed canary checkpoint's module tree)."""

from __future__ import annotations

import pytest
import torch

from lucid_core.interop.reference import import_checkpoint, read_reference_checkpoint, reference_to_lucid_key
from lucid_core.optim.param_groups import build_param_groups
from tool_testing import load_tool

probe = load_tool("probe_epoch_from_reference")
record_reference = load_tool("record_reference")
CANARY = record_reference.CANARY_DIR / "shapes_yolo26n_detect_seed0_last.refpt"


def _our_groups(model: torch.nn.Module) -> list[dict]:
    return build_param_groups(
        model, optimizer="AdamW", lr=0.004, momentum=0.9, weight_decay=5e-4, batch_size=16
    )


def test_reference_groups_name_the_parameters_our_routing_puts_in_each_group() -> None:
    checkpoint = read_reference_checkpoint(CANARY)
    names = probe.reference_group_names(checkpoint["model"])
    model = import_checkpoint(CANARY)[0]
    ours = {g["param_group"]: set(g["param_names"]) for g in _our_groups(model)}
    for kind in ("weight", "bn", "bias"):
        assert {reference_to_lucid_key(n) for n in names[kind]} == ours[kind], kind
        assert len(names[kind]) == len(set(names[kind]))


def _reference_optimizer(names: dict[str, list[str]], model: torch.nn.Module) -> dict:
    params = dict(model.named_parameters())
    state, groups, index = {}, [], 0
    for kind in ("weight", "bn", "bias"):
        indices = []
        for name in names[kind]:
            shape = params[reference_to_lucid_key(name)].shape
            state[index] = {
                "step": torch.tensor(7.0),
                "exp_avg": torch.full(shape, index + 0.5),
                "exp_avg_sq": torch.ones(shape),
            }
            indices.append(index)
            index += 1
        groups.append({"param_group": kind, "params": indices})
    return {"state": state, "param_groups": groups}


def test_the_state_reaches_each_parameter_by_name_and_a_mismatch_is_named() -> None:
    checkpoint = read_reference_checkpoint(CANARY)
    model = import_checkpoint(CANARY)[0]
    names = probe.reference_group_names(checkpoint["model"])
    checkpoint = {"ema": checkpoint["model"], "optimizer": _reference_optimizer(names, model)}
    optimizer = torch.optim.AdamW(_our_groups(model))
    assert probe.load_reference_optimizer(optimizer, checkpoint) == sum(len(v) for v in names.values())
    params = dict(model.named_parameters())
    first_bias = params[reference_to_lucid_key(names["bias"][0])]
    expected = len(names["weight"]) + len(names["bn"]) + 0.5
    assert torch.all(optimizer.state[first_bias]["exp_avg"] == expected)
    wrong = checkpoint["optimizer"]["state"][0]
    wrong["exp_avg"] = torch.zeros(1)
    with pytest.raises(ValueError, match=r"reference moments \(1,\)"):
        probe.load_reference_optimizer(torch.optim.AdamW(_our_groups(model)), checkpoint)


def test_epoch_lr_is_the_linear_schedule() -> None:
    recipe = {"lr0": 0.004, "lrf": 0.01}
    assert probe.epoch_lr(recipe, 7, 10) == pytest.approx(0.001228)
    assert probe.epoch_lr(recipe, 0, 10) == pytest.approx(0.004)
