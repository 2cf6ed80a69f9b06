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


def _rows(
    recipe: Any, trajectory: dict[str, Any], factor: dict[int, float], offset: dict[int, float] | None = None
) -> list[dict[str, Any]]:
    """Our rows = the reference values × factor[epoch] (1 by default) + offset[epoch] (0 by default)."""
    rows = []
    for record in trajectory["epochs"]:
        epoch = int(record["epoch"])
        row: dict[str, Any] = {
            "epoch": epoch,
            "in_training": {"metrics/mAP50-95": 0.5},
            "losses": {"box": 1.0},
        }
        for curve in recipe.curves:
            row[curve.label] = factor.get(epoch, 1.0) * trajectory_tool.reference_value(
                record, curve.reference_key
            ) + (offset or {}).get(epoch, 0.0)
        rows.append(row)
    return rows


RATIO_RECIPES = [r for r in trajectory_tool.RECIPES if r.band.each > 0]
ABSOLUTE_RECIPES = [r for r in trajectory_tool.RECIPES if r.band.abs_each is not None]


@pytest.mark.shared
@pytest.mark.parametrize("recipe", RATIO_RECIPES, ids=lambda r: r.name)
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


@pytest.mark.shared
@pytest.mark.parametrize("recipe", ABSOLUTE_RECIPES, ids=lambda r: r.name)
def test_absolute_band_logic_on_the_shared_trajectory(recipe: Any, shared_dir: Path) -> None:
    """|ours − reference| <= abs_each at every epoch from from_epoch, mean |difference| <= abs_mean (issue 16);
    both directions count (a fine-tune that does not over-fit like the reference misses too)."""
    trajectory = trajectory_tool.load_trajectory(recipe, shared_dir)
    band, epochs = recipe.band, recipe.epochs
    checked = list(range(band.from_epoch, epochs))
    assert checked, "an absolute band checks at least one epoch"
    exact = _rows(recipe, trajectory, {})
    assert trajectory_tool.check_rows(recipe, trajectory, exact) == []
    # one epoch just outside abs_each, above or below: one failure per curve naming the epoch (the mean of one
    # deviation over the checked epochs stays inside abs_mean when the band allows it)
    middle = checked[len(checked) // 2]
    for sign in (1.0, -1.0):
        off = trajectory_tool.check_rows(
            recipe, trajectory, _rows(recipe, trajectory, {}, {middle: sign * band.abs_each * 1.01})
        )
        each_lines = [line for line in off if "each epoch absolute band" in line]
        assert len(each_lines) == len(recipe.curves) and all(
            f"epoch {middle} " in line for line in each_lines
        )
    # every epoch inside abs_each but the mean deviation above abs_mean: one mean failure per curve
    assert band.abs_mean is not None and band.abs_mean < band.abs_each
    mean_off = (band.abs_mean + band.abs_each) / 2
    drift = trajectory_tool.check_rows(
        recipe, trajectory, _rows(recipe, trajectory, {}, {e: mean_off for e in checked})
    )
    assert len(drift) == len(recipe.curves) and all("mean absolute band" in line for line in drift)
    inside = trajectory_tool.check_rows(
        recipe, trajectory, _rows(recipe, trajectory, {}, {e: -band.abs_mean * 0.99 for e in checked})
    )
    assert inside == []
    # a non-finite training loss fails its epoch whatever the metrics
    nan_rows = _rows(recipe, trajectory, {})
    nan_rows[-1]["losses"] = {"box": float("nan")}
    nan_failures = trajectory_tool.check_rows(recipe, trajectory, nan_rows)
    assert len(nan_failures) == 1 and "non-finite training loss" in nan_failures[0]
    table = trajectory_tool.format_table(recipe, trajectory, exact).splitlines()
    assert len(table) == epochs + 1 and "ours-ref" in table[0]
    assert all(curve.label in table[0] for curve in recipe.curves)


def test_a_missing_trajectory_is_a_skip(tmp_path: Path) -> None:
    with pytest.raises(trajectory_tool.TrajectorySkipped):
        trajectory_tool.load_trajectory(trajectory_tool.RECIPES[0], tmp_path)


@pytest.mark.slow
@pytest.mark.shared
def test_trajectory_gate_passes(shared_dir: Path) -> None:
    assert trajectory_tool.main([]) == 0
