"""tools/check_fixture_independence.py: its mutations change names, order and case count but never a value, keep
``same_as`` references resolvable, and rename MuSGD parameters consistently; building a copy links everything but
the rewritten fixture files (synthetic fixture trees, no ../shared needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tool_testing import load_tool

tool = load_tool("check_fixture_independence")


def _segment_like() -> dict[str, Any]:
    return {
        "schema": "lucid-fixture/segment_loss/1",
        "meta": {"seed": 0},
        "cases": {
            "a": {"config": {"empty": False}, "value": torch.tensor([1.0, 2.0])},
            "b": {"config": {"empty": True}, "grads": {"proto_blocks": "same_as:a"}},
        },
    }


def _resolve(cases: dict[str, Any], name: str) -> dict[str, Any]:
    record = cases[name]["grads"]["proto_blocks"]
    assert record.startswith("same_as:")
    resolved: dict[str, Any] = cases[record.removeprefix("same_as:")]
    return resolved


def test_renamed_changes_every_case_name_and_order_but_no_value() -> None:
    original = _segment_like()
    mutated = tool.mutate_renamed("segment_loss_x.pt", original)
    assert set(mutated["cases"]).isdisjoint(original["cases"])
    assert len(mutated["cases"]) == len(original["cases"])
    first, second = mutated["cases"].values()
    assert first["config"]["empty"] and not second["config"]["empty"]  # reversed order
    assert torch.equal(second["value"], original["cases"]["a"]["value"])
    new_b = next(n for n, c in mutated["cases"].items() if c["config"]["empty"])
    assert torch.equal(_resolve(mutated["cases"], new_b)["value"], original["cases"]["a"]["value"])
    assert list(original["cases"]) == ["a", "b"]  # the input is not modified


def test_renamed_renames_musgd_parameters_everywhere() -> None:
    fx = {
        "optimizer": {
            "param_names": ["conv.weight", "bn.bias"],
            "routing": {"conv.weight": "muon", "bn.bias": "sgd"},
            "param_groups": [{"params": ["conv.weight"]}, {"params": ["bn.bias"]}],
        },
        "newton_schulz": {"cases": {"tall": {"input": torch.ones(2)}}},
    }
    mutated = tool.mutate_renamed("musgd_x.pt", fx)
    names = mutated["optimizer"]["param_names"]
    assert not set(names) & {"conv.weight", "bn.bias"}
    assert list(mutated["optimizer"]["routing"]) == names
    assert [g["params"][0] for g in mutated["optimizer"]["param_groups"]] == names
    assert "tall" not in mutated["newton_schulz"]["cases"] and len(mutated["newton_schulz"]["cases"]) == 1


def test_extended_adds_a_copy_and_a_pose_variant() -> None:
    mutated = tool.mutate_extended("segment_loss_x.pt", _segment_like())
    assert len(mutated["cases"]) == 3 and {"a", "b"} <= set(mutated["cases"])
    pose = {"schema": "lucid-fixture/pose_loss/1", "meta": {"seed": 0}, "targets": {}, "results": {"r": 1}}
    variants = tool.mutate_extended("pose_loss_x.pt", pose)["variants"]
    assert list(variants.values()) == [{"meta": {"seed": 0}, "targets": {}, "results": {"r": 1}}]


def test_build_shared_copy_links_all_but_the_rewritten_fixtures(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "fixtures").mkdir(parents=True)
    (shared / "data").mkdir()
    (shared / "fixtures" / "README.md").write_text("schemas")
    torch.save(_segment_like(), shared / "fixtures" / "segment_loss_x.pt")
    target = tmp_path / "copy"
    tool.build_shared_copy(shared, target, tool.mutate_renamed)
    assert (target / "data").is_symlink() and (target / "fixtures" / "README.md").is_symlink()
    written = target / "fixtures" / "segment_loss_x.pt"
    assert not written.is_symlink()
    assert set(torch.load(written, weights_only=True)["cases"]).isdisjoint({"a", "b"})


def test_fixture_test_files_finds_the_modules_that_read_fixtures() -> None:
    found = {p.name for p in tool.fixture_test_files()}
    assert "test_core_loss_segment.py" in found and Path(__file__).name not in found
