"""tools/check_trajectory.py: the band logic against the shared trajectory file (fast, every value derived from the
file), and (slow) the real level-4 gate: train the recipe and compare every epoch for both decode paths."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_trajectory", REPO / "tools" / "check_trajectory.py")
assert _spec and _spec.loader
trajectory_tool = importlib.util.module_from_spec(_spec)
sys.modules["check_trajectory"] = trajectory_tool
_spec.loader.exec_module(trajectory_tool)


def _rows(recipe: Any, trajectory: dict[str, Any], factor: dict[int, float]) -> list[dict[str, Any]]:
    """Our rows = the reference values × factor[epoch] (1 by default)."""
    rows = []
    for record in trajectory["epochs"]:
        epoch = int(record["epoch"])
        row: dict[str, Any] = {"epoch": epoch, "in_training": {"metrics/mAP50-95": 0.5}}
        for curve in recipe.curves:
            row[curve.label] = factor.get(epoch, 1.0) * trajectory_tool.reference_value(
                record, curve.reference_key
            )
        rows.append(row)
    return rows


@pytest.mark.shared
@pytest.mark.parametrize("recipe", trajectory_tool.RECIPES, ids=lambda r: r.name)
def test_band_logic_on_the_shared_trajectory(recipe: Any, shared_dir: Path) -> None:
    trajectory = trajectory_tool.load_trajectory(recipe, shared_dir)
    band, last = recipe.band, recipe.epochs - 1
    assert trajectory_tool.check_rows(recipe, trajectory, _rows(recipe, trajectory, {})) == []
    # before from_epoch anything goes; from it on, each epoch needs `each` x the reference
    early = {e: 0.0 for e in range(band.from_epoch)}
    assert trajectory_tool.check_rows(recipe, trajectory, _rows(recipe, trajectory, early)) == []
    middle = band.from_epoch if band.from_epoch < last else last
    low = trajectory_tool.check_rows(
        recipe, trajectory, _rows(recipe, trajectory, {middle: band.each * 0.99})
    )
    assert len(low) == len(recipe.curves) * (2 if middle == last else 1)
    assert all(f"epoch {middle}" in line for line in low)
    # the final epoch needs `final` x the reference (stricter than `each`)
    final = trajectory_tool.check_rows(
        recipe, trajectory, _rows(recipe, trajectory, {last: (band.each + band.final) / 2})
    )
    assert len(final) == len(recipe.curves) and all("final epoch band" in line for line in final)
    table = trajectory_tool.format_table(recipe, trajectory, _rows(recipe, trajectory, {}))
    assert len(table.splitlines()) == recipe.epochs + 1
    assert all(curve.label in table.splitlines()[0] for curve in recipe.curves)
    missing = trajectory_tool.check_rows(recipe, trajectory, _rows(recipe, trajectory, {})[:-1])
    assert missing == [f"{recipe.name}: scored {recipe.epochs - 1} epochs, expected {recipe.epochs}"]


def test_a_missing_trajectory_is_a_skip(tmp_path: Path) -> None:
    with pytest.raises(trajectory_tool.TrajectorySkipped):
        trajectory_tool.load_trajectory(trajectory_tool.RECIPES[0], tmp_path)


@pytest.mark.slow
@pytest.mark.shared
def test_trajectory_gate_passes(shared_dir: Path) -> None:
    assert trajectory_tool.main([]) == 0
