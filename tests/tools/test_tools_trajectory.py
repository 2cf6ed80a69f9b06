"""tools/check_trajectory.py: the band logic against the shared trajectory file (fast, every value derived from the
file), and (slow) the real level-4 gate: train the recipe and compare every epoch for both decode paths."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import cv2
import pytest
import yaml

from tool_testing import load_tool

REPO = Path(__file__).resolve().parents[2]
trajectory_tool = load_tool("check_trajectory")


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
    """|ours − reference| <= abs_each at every epoch from from_epoch, mean |difference| <= abs_mean;
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


@pytest.mark.shared
@pytest.mark.parametrize("recipe", RATIO_RECIPES, ids=lambda r: r.name)
def test_seed_mean_curve_and_summary(recipe: Any, shared_dir: Path) -> None:
    """--seed N ...: two seeds, one below the final band and one above it, average into a curve inside the band;
    the summary names each seed's final ratio and band status, then the mean's."""
    trajectory = trajectory_tool.load_trajectory(recipe, shared_dir)
    band, last = recipe.band, recipe.epochs - 1
    low_factor, high_factor = band.final - 0.02, 2.0 - band.final + 0.04
    runs = {
        7: _rows(recipe, trajectory, {last: low_factor}),
        11: _rows(recipe, trajectory, {last: high_factor}),
    }
    assert trajectory_tool.check_rows(recipe, trajectory, runs[7]) != []
    mean = trajectory_tool.mean_rows(recipe, runs)
    assert [row["epoch"] for row in mean] == [row["epoch"] for row in runs[7]]
    for curve in recipe.curves:
        ref = trajectory_tool.reference_value(trajectory["epochs"][last], curve.reference_key)
        assert mean[-1][curve.label] == pytest.approx(ref * (low_factor + high_factor) / 2)
    assert mean[-1]["losses"] == {"box": 1.0} and mean[0]["in_training"] == {"metrics/mAP50-95": 0.5}
    assert trajectory_tool.check_rows(recipe, trajectory, mean) == []
    summary = trajectory_tool.format_seed_summary(recipe, trajectory, runs).splitlines()
    assert [line.split(" | ")[0] for line in summary[1:]] == ["7", "11", "mean"]
    assert summary[1].endswith("FAIL") and summary[2].endswith("ok") and summary[3].endswith("ok")
    assert f"{low_factor:.3f}" in summary[1].split(" | ")[1]
    with pytest.raises(ValueError, match="different epochs"):
        trajectory_tool.mean_rows(recipe, {1: runs[7], 2: runs[11][:-1]})


@pytest.mark.shared
def test_main_seeds_and_step_paths(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """main(): --seed replaces the recipe's seed, --channels-last/--contiguous/--compile reach the module's arguments; one seed
    below the band fails the run alone, while with two seeds the exit status is the seed-mean curve's check."""
    recipe = RATIO_RECIPES[0]
    trajectory = trajectory_tool.load_trajectory(recipe, shared_dir)
    last = recipe.epochs - 1
    factor = {3: recipe.band.final - 0.02, 5: 2.0 - recipe.band.final + 0.04}
    calls: list[tuple[int, dict[str, Any]]] = []

    def fake_train(r: Any, threads: Any = None, model_options: Any = None) -> list[dict[str, Any]]:
        calls.append((r.seed, dict(model_options or {})))
        return _rows(recipe, trajectory, {last: factor.get(r.seed, 1.0)})

    monkeypatch.setattr(trajectory_tool, "train_and_score", fake_train)
    only = ["--only", recipe.name]
    assert trajectory_tool.main(only) == 0 and calls == [(recipe.seed, {})]
    calls.clear()
    assert trajectory_tool.main([*only, "--seed", "3", "--channels-last"]) == 1
    assert calls == [(3, {"channels_last": True})]
    assert "one training seed is one draw" in capsys.readouterr().err
    calls.clear()
    assert trajectory_tool.main([*only, "--seed", "3", "--contiguous"]) == 1
    assert calls == [(3, {"channels_last": False})]
    calls.clear()
    # a repeated seed is one run, judged alone
    assert trajectory_tool.main([*only, "--seed", "3", "--seed", "3"]) == 1 and calls == [(3, {})]
    calls.clear()
    assert trajectory_tool.main([*only, "--seed", "3", "--seed", "5", "--compile"]) == 0
    assert calls == [(3, {"compile": True}), (5, {"compile": True})]
    out = capsys.readouterr().out
    assert "2 seeds" in out and "  seed 3: " in out
    # a seed-mean that fails is already the many-seed verdict: no hint to run more seeds
    factor[6] = factor[3]
    assert trajectory_tool.main([*only, "--seed", "3", "--seed", "6"]) == 1
    assert "one training seed is one draw" not in capsys.readouterr().err


def test_epoch_checkpoints_names_the_first_missing_epoch(tmp_path: Path) -> None:
    """--checkpoints DIR: every epoch needs exactly one of epoch<e>.pt / epoch<e>.safetensors, checked before any
    scoring; the message names the directory, the epoch and both expected names."""
    recipe = trajectory_tool.RECIPES[0]
    with pytest.raises(trajectory_tool.CheckpointsError, match="not a directory"):
        trajectory_tool.epoch_checkpoints(recipe, tmp_path / "absent")
    for epoch in range(recipe.epochs):
        if epoch != 2:
            (tmp_path / f"epoch{epoch}{'.pt' if epoch % 2 else '.safetensors'}").write_bytes(b"")
    with pytest.raises(
        trajectory_tool.CheckpointsError, match=r"neither of epoch2\.pt \(reference\) and epoch2\.safetensors"
    ):
        trajectory_tool.epoch_checkpoints(recipe, tmp_path)
    (tmp_path / "epoch2.pt").write_bytes(b"")
    (tmp_path / "epoch2.safetensors").write_bytes(b"")
    with pytest.raises(trajectory_tool.CheckpointsError, match=r"both of epoch2\.pt"):
        trajectory_tool.epoch_checkpoints(recipe, tmp_path)
    (tmp_path / "epoch2.safetensors").unlink()
    paths = trajectory_tool.epoch_checkpoints(recipe, tmp_path)
    assert [p.name for p in paths] == [
        f"epoch{e}{'.pt' if e % 2 or e == 2 else '.safetensors'}" for e in range(recipe.epochs)
    ]


def test_checkpoints_refuses_training_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = trajectory_tool.RECIPES[0]
    for extra in (["--seed", "3"], ["--compile"], ["--contiguous"]):
        with pytest.raises(SystemExit) as exc:
            trajectory_tool.main(["--only", recipe.name, "--checkpoints", str(tmp_path), *extra])
        assert exc.value.code == 2 and "only applies to training" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        trajectory_tool.main(["--checkpoints", str(tmp_path)])
    assert exc.value.code == 2 and "exactly one --only recipe" in capsys.readouterr().err
    # an incomplete directory is refused before anything is scored: one line naming it, exit status 2
    assert trajectory_tool.main(["--only", recipe.name, "--checkpoints", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"trajectory: --checkpoints {tmp_path}: neither of epoch0.pt")
        and "Traceback" not in err
    )


@pytest.mark.shared
def test_main_scores_checkpoint_runs(
    shared_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--checkpoints DIR (repeatable) scores each run instead of training; one run is judged alone, several by the
    run-mean curve, with a per-run summary; nothing is trained."""
    recipe = RATIO_RECIPES[0]
    trajectory = trajectory_tool.load_trajectory(recipe, shared_dir)
    last = recipe.epochs - 1
    factor = {"low": recipe.band.final - 0.02, "high": 2.0 - recipe.band.final + 0.04}
    scored: list[str] = []

    def fake_score(r: Any, directory: Path, shared: Any = None, threads: Any = None) -> list[dict[str, Any]]:
        assert r == recipe
        scored.append(directory.name)
        return _rows(recipe, trajectory, {last: factor[directory.name]})

    def no_training(*_: Any, **__: Any) -> None:
        raise AssertionError("--checkpoints must not train")

    monkeypatch.setattr(trajectory_tool, "score_checkpoints", fake_score)
    monkeypatch.setattr(trajectory_tool, "train_and_score", no_training)
    only = ["--only", recipe.name]
    for name in factor:  # complete run directories (main checks them before scoring); the scores are faked
        (tmp_path / name).mkdir()
        for epoch in range(recipe.epochs):
            (tmp_path / name / f"epoch{epoch}.pt").write_bytes(b"")
    low, high = str(tmp_path / "low"), str(tmp_path / "high")
    assert trajectory_tool.main([*only, "--checkpoints", low]) == 1 and scored == ["low"]
    assert trajectory_tool.main([*only, "--checkpoints", high, "--checkpoints", high]) == 0
    assert trajectory_tool.main([*only, "--checkpoints", low, "--checkpoints", high]) == 0
    assert scored == ["low", "high", "low", "high"]
    out = capsys.readouterr().out
    assert "2 runs, ratio run / reference" in out and f"  run {low}: " in out
    assert f"ref {recipe.curves[0].label} | run {recipe.curves[0].label}" in out
    summary = out.split("2 runs, ratio run / reference\n")[1].splitlines()
    assert summary[0].startswith("run | ") and [line.split(" | ")[0] for line in summary[1:4]] == [
        low,
        high,
        "mean",
    ]


@pytest.mark.shared
def test_score_checkpoints_reads_lucid_checkpoints(shared_dir: Path, tmp_path: Path) -> None:
    """A run's lucid-core checkpoint (epoch<e>.safetensors) scores exactly as the same model in memory does, one
    row per epoch of the recipe (one epoch here: each score is a COCO evaluation), without training figures."""
    import dataclasses

    from lucid_core.checkpoint import save_model
    from lucid_core.models import build_model
    from lucid_train.datamodule import DetectionDataModule

    recipe = dataclasses.replace(RATIO_RECIPES[0], epochs=1)
    data = DetectionDataModule(
        root=str(shared_dir / recipe.data), imgsz=recipe.imgsz, batch_size=16, workers=0
    )
    model = build_model(recipe.family, recipe.task, recipe.scale, num_classes=data.num_classes).eval()
    save_model(model, tmp_path / "epoch0", names=data.names, imgsz=recipe.imgsz)
    rows = trajectory_tool.score_checkpoints(recipe, tmp_path, shared_dir)
    assert [row["epoch"] for row in rows] == [0]
    assert rows[0]["in_training"] == {} and rows[0]["losses"] == {}
    expected = trajectory_tool.score_model(recipe, model, data.val_source())
    assert {c.label: rows[0][c.label] for c in recipe.curves} == expected


@pytest.mark.shared
def test_an_unreadable_checkpoint_is_one_line_and_exit_2(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = RATIO_RECIPES[0]
    for epoch in range(recipe.epochs):
        (tmp_path / f"epoch{epoch}.pt").write_bytes(b"")
    assert trajectory_tool.main(["--only", recipe.name, "--checkpoints", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--checkpoints {tmp_path / 'epoch0.pt'}: not readable as a reference checkpoint" in err
    assert "Traceback" not in err


def test_a_missing_trajectory_is_a_skip(tmp_path: Path) -> None:
    with pytest.raises(trajectory_tool.TrajectorySkipped):
        trajectory_tool.load_trajectory(trajectory_tool.RECIPES[0], tmp_path)


# ------------------------------------------------------------------------------------------ distributional gate
GATE = trajectory_tool.GATES[0]
BASE = [0.01, 0.1, 0.2, 0.35, 0.5, 0.6, 0.68, 0.72, 0.76, 0.79]  # a reference-like seed-mean curve


def _seed_rows(gate: Any, values: list[float]) -> list[dict[str, Any]]:
    return [
        {"epoch": e, "in_training": {}, "losses": {"box": 1.0}, **{c.label: v for c in gate.recipe.curves}}
        for e, v in enumerate(values)
    ]


def _seeds(gate: Any, n: int, step: float = 0.01, shift: dict[int, float] | None = None) -> list[Any]:
    """n seeds spread evenly around BASE (+ shift[epoch]): sample sd step·sqrt(n(n+1)/12)."""
    return [
        _seed_rows(
            gate, [v + (k - (n - 1) / 2) * step + (shift or {}).get(e, 0.0) for e, v in enumerate(BASE)]
        )
        for k in range(n)
    ]


def test_gate_judges_from_the_first_epoch_with_a_tight_reference() -> None:
    """Epochs before the first where the reference's relative seed spread is inside SPREAD_BOUND are shown, not
    judged; from it on (a wider epoch later included), ours' mean must reach ref mean - 2 SE of the difference."""
    curve = GATE.recipe.curves[0]
    reference, ours = _seeds(GATE, 5), _seeds(GATE, 3)
    verdicts, failures = trajectory_tool.compare_distributions(curve, reference, ours)
    assert failures == []
    # sd of 5 evenly spaced seeds 0.01 apart is 0.0158: over 10 % of 0.01 and 0.1, under 10 % of 0.2
    assert [v.verdict for v in verdicts] == ["-", "-"] + ["ok"] * 8
    ref_sd, ours_sd = verdicts[5].ref_sd, verdicts[5].ours_sd
    assert ref_sd == pytest.approx(0.01 * math.sqrt(2.5)) and ours_sd == pytest.approx(0.01)
    se = math.sqrt(ours_sd**2 / 3 + ref_sd**2 / 5)
    assert verdicts[5].limit == pytest.approx(BASE[5] - trajectory_tool.SE_FACTOR * se)
    # just below the limit at epoch 5: one failure naming it; just above it: none
    for delta, expected in ((-2.01 * se, 1), (-1.99 * se, 0)):
        _, failures = trajectory_tool.compare_distributions(
            curve, reference, _seeds(GATE, 3, shift={5: delta})
        )
        assert len(failures) == expected and all(f.check == "epoch 5" for f in failures)
    # an early, unjudged epoch may be anything
    assert trajectory_tool.compare_distributions(curve, reference, _seeds(GATE, 3, shift={1: -0.1}))[1] == []
    # a later epoch whose reference spread is wide again is judged, with its wider SE
    wide = [
        _seed_rows(GATE, [v + (0.2 * (k - 2) if e == 7 else 0.0) for e, v in enumerate(rows)])
        for k, rows in enumerate([[r[curve.label] for r in seed] for seed in reference])
    ]
    wide_verdicts, _ = trajectory_tool.compare_distributions(curve, wide, ours)
    assert wide_verdicts[7].verdict == "ok" and wide_verdicts[7].limit < verdicts[7].limit - 0.1
    _, failures = trajectory_tool.compare_distributions(curve, wide, _seeds(GATE, 3, shift={7: -0.5}))
    assert len(failures) == 1 and failures[0].check == "epoch 7" and "epoch 7 seed mean" in str(failures[0])
    table = trajectory_tool.format_gate_table(curve, verdicts, 5, 3).splitlines()
    assert len(table) == len(BASE) + 2 and "ref sd" in table[1] and table[-1].endswith("| ok")


def test_gate_final_epoch_needs_097_of_the_reference() -> None:
    """A wide reference spread lets the SE test pass; the final epoch still needs FINAL_RATIO × the ref mean."""
    curve = GATE.recipe.curves[0]
    up = {e: 0.1 for e in range(len(BASE))}
    reference = _seeds(GATE, 5, step=0.05, shift=up)
    last = len(BASE) - 1
    ref_final = BASE[last] + 0.1
    low = {**up, last: ref_final * (trajectory_tool.FINAL_RATIO - 0.005) - BASE[last]}
    verdicts, failures = trajectory_tool.compare_distributions(curve, reference, _seeds(GATE, 3, 0.0, low))
    assert len(failures) == 1 and failures[0].check == "final epoch" and verdicts[-1].verdict == "LOW"
    high = {**up, last: ref_final * (trajectory_tool.FINAL_RATIO + 0.005) - BASE[last]}
    assert trajectory_tool.compare_distributions(curve, reference, _seeds(GATE, 3, 0.0, high))[1] == []


def test_gate_one_seed_of_ours_borrows_the_reference_spread() -> None:
    curve = GATE.recipe.curves[0]
    reference = _seeds(GATE, 5)
    verdicts, _ = trajectory_tool.compare_distributions(curve, reference, [_seed_rows(GATE, BASE)])
    ref_sd = verdicts[5].ref_sd
    assert verdicts[5].limit == pytest.approx(BASE[5] - 2 * math.sqrt(ref_sd**2 / 1 + ref_sd**2 / 5))
    ungated = dataclasses.replace(curve, gated=False)
    info, failures = trajectory_tool.compare_distributions(
        ungated, reference, _seeds(GATE, 3, shift={5: -0.5})
    )
    assert failures == [] and {v.verdict for v in info} == {"info"}


def test_select_gates() -> None:
    names = [g.name for g in trajectory_tool.GATES]
    assert [g.name for g in trajectory_tool.select_gates(["all"])] == names
    assert {g.recipe.task for g in trajectory_tool.GATES} == {"detect", "segment", "obb", "pose", "classify"}
    assert [g.name for g in trajectory_tool.select_gates(["classify"])] == ["shapes_yolo26n_classify"]
    assert [g.name for g in trajectory_tool.select_gates(["detect"])] == [
        "shapes_yolo26n_detect",
        "shapes_yolo11n_detect",
    ]
    assert [g.name for g in trajectory_tool.select_gates(["shapes_yolo26n_obb"])] == ["shapes_yolo26n_obb"]
    with pytest.raises(SystemExit, match="unknown --task nope"):
        trajectory_tool.select_gates(["nope"])


def _write_distribution(directory: Path, gate: Any, runs: list[Any]) -> None:
    payload = {
        "gate": gate.name,
        "seeds": list(range(len(runs))),
        "runs": {str(k): r for k, r in enumerate(runs)},
    }
    (directory / f"{gate.name}.json").write_text(json.dumps(payload))


def test_self_check_counts_the_splits_the_rule_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--self-check`` judges the reference against itself: with 6 seeds, 3 of them in the role of ours, a seed far
    below the others (its final epoch under 0.97 × theirs) fails exactly the 10 of 20 splits that put it on our side; identical seeds fail none; nothing
    is trained."""
    monkeypatch.setattr(trajectory_tool, "FIDELITY_DIR", tmp_path)
    low = _seed_rows(GATE, [v - 0.1 for v in BASE])
    runs = [*_seeds(GATE, 5, step=0.001), low]
    data = {"runs": {str(k): r for k, r in enumerate(runs)}}
    check = trajectory_tool.reference_self_check(GATE, data, n_ours=3)
    assert (check.splits, check.failed, check.n_reference) == (20, 10, 3)
    assert check.rate == 0.5 and max(check.cells.values()) == 10
    same = {"runs": {str(k): _seed_rows(GATE, BASE) for k in range(6)}}
    assert trajectory_tool.reference_self_check(GATE, same, n_ours=3).failed == 0
    assert trajectory_tool.reference_self_check(GATE, data, n_ours=3, max_splits=7).splits == 7
    with pytest.raises(ValueError, match="cannot be split"):
        trajectory_tool.reference_self_check(GATE, data, n_ours=5)
    # --shift lowers the side in the role of ours: 20 % lower is caught in every split; lower fails more often
    spread = {"runs": {str(k): r for k, r in enumerate(_seeds(GATE, 6))}}
    lowered = trajectory_tool.reference_self_check(GATE, spread, n_ours=3, shift=0.2)
    assert lowered.failed == lowered.splits == 20 and lowered.shift == 0.2
    unshifted = trajectory_tool.reference_self_check(GATE, spread, n_ours=3).failed
    slightly = trajectory_tool.reference_self_check(GATE, spread, n_ours=3, shift=0.02).failed
    assert unshifted <= slightly < 20

    def no_training(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("--self-check trains nothing")

    monkeypatch.setattr(trajectory_tool, "train_and_score", no_training)
    _write_distribution(tmp_path, GATE, runs)
    assert trajectory_tool.main(["--task", GATE.name, "--self-check"]) == 0
    out = capsys.readouterr().out
    assert "the gate fails 10 (50.0%)" in out and "in 50.0% of independent draws" in out
    assert trajectory_tool.main(["--task", GATE.name, "--self-check", "--seeds", "5"]) == 2
    capsys.readouterr()
    assert trajectory_tool.main(["--task", GATE.name, "--self-check", "--shift", "0.2"]) == 0
    assert "lowered 20% against 3: the gate fails 20 (100.0%)" in capsys.readouterr().out
    for flags in (["--shift", "0.05"], ["--self-check", "--only", RATIO_RECIPES[0].name]):
        with pytest.raises(SystemExit):
            trajectory_tool.main(["--task", GATE.name, *flags] if "--only" not in flags else flags)


def test_the_judged_epochs_can_be_fixed() -> None:
    """``judge_from`` replaces the spread rule's first judged epoch (the self-check judges every split from the
    full distribution's): a low epoch before it is shown, not judged."""
    curve = GATE.recipe.curves[0]
    reference, ours = _seeds(GATE, 5), _seeds(GATE, 3, shift={8: -0.2})
    assert trajectory_tool.compare_distributions(curve, reference, ours)[1]
    verdicts, failures = trajectory_tool.compare_distributions(curve, reference, ours, judge_from=9)
    assert failures == [] and verdicts[8].verdict == "-" and verdicts[9].verdict == "ok"
    stats = [(m, 0.2 * m if e < 4 else 0.05 * m) for e, m in enumerate(BASE)]
    assert (
        trajectory_tool.first_judged_epoch(stats) == 4 and trajectory_tool.first_judged_epoch(stats[:3]) == 3
    )


def test_gate_main_fails_a_broken_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gate end to end with a stub trainer: the recipe as is passes, a halved box gain (``--loss box=3.75``)
    trains a curve 15 % lower and fails; ``--runs-dir`` keeps each seed's rows and reuses them for the same recipe
    only; a gate without a recorded distribution is skipped."""
    monkeypatch.setattr(trajectory_tool, "FIDELITY_DIR", tmp_path)
    _write_distribution(tmp_path, GATE, _seeds(GATE, 5))
    trained: list[tuple[int, Any]] = []

    def fake_train(r: Any, threads: Any = None, model_options: Any = None) -> list[dict[str, Any]]:
        trained.append((r.seed, (model_options or {}).get("loss")))
        factor = 0.85 if (model_options or {}).get("loss", {}).get("box") == 3.75 else 1.0
        return _seed_rows(GATE, [factor * (v + (r.seed - 1) * 0.01) for v in BASE])

    monkeypatch.setattr(trajectory_tool, "train_and_score", fake_train)
    runs = ["--runs-dir", str(tmp_path / "runs")]
    assert trajectory_tool.main(["--task", GATE.name, *runs]) == 0
    out = capsys.readouterr().out
    assert f"ok   {GATE.name}" in out and all(c.label in out for c in GATE.recipe.curves)
    assert trained == [(0, None), (1, None), (2, None)]
    trained.clear()
    assert trajectory_tool.main(["--task", GATE.name, *runs]) == 0 and trained == []  # cached rows
    assert trajectory_tool.main(["--task", GATE.name, "--loss", "box=3.75", *runs]) == 1
    assert trained == [(0, {"box": 3.75}), (1, {"box": 3.75}), (2, {"box": 3.75})]
    captured = capsys.readouterr()
    assert f"FAIL {GATE.name}" in captured.out and "| LOW" in captured.out
    assert "the rule fails the reference against itself in 10.0% of 3-seed draws" in captured.out
    assert "final epoch seed mean" in captured.err
    trained.clear()
    assert trajectory_tool.main(["--task", "shapes_yolo26n_obb", "--seeds", "1"]) == 0 and trained == []
    assert "SKIP shapes_yolo26n_obb" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        trajectory_tool.main(["--task", GATE.name, "--only", RATIO_RECIPES[0].name])


def test_cached_rows_of_other_sources_are_trained_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``--runs-dir`` seed is reused only while the training sources hash the same: rows trained by other code
    are trained again (and the cache then holds the new rows)."""
    monkeypatch.setattr(trajectory_tool, "FIDELITY_DIR", tmp_path)
    _write_distribution(tmp_path, GATE, _seeds(GATE, 5))
    trained: list[int] = []

    def fake_train(r: Any, threads: Any = None, model_options: Any = None) -> list[dict[str, Any]]:
        trained.append(r.seed)
        return _seed_rows(GATE, [v + (r.seed - 1) * 0.01 for v in BASE])

    monkeypatch.setattr(trajectory_tool, "train_and_score", fake_train)
    runs = ["--task", GATE.name, "--seeds", "2", "--runs-dir", str(tmp_path / "runs")]
    assert trajectory_tool.main(runs) == 0 and trained == [0, 1]
    assert trajectory_tool.main(runs) == 0 and trained == [0, 1]  # same sources: cached rows
    monkeypatch.setattr(trajectory_tool, "sources_digest", lambda entries, root=None: "edited-code")
    assert trajectory_tool.main(runs) == 0 and trained == [0, 1, 0, 1]
    assert "was trained by other sources; training again" in capsys.readouterr().out
    assert trajectory_tool.main(runs) == 0 and trained == [0, 1, 0, 1]


def test_sources_digest_follows_the_bytes(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "notes.txt").write_text("ignored")
    first = trajectory_tool.sources_digest(["pkg"], tmp_path)
    (tmp_path / "pkg" / "notes.txt").write_text("changed, still ignored")
    assert trajectory_tool.sources_digest(["pkg"], tmp_path) == first
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert trajectory_tool.sources_digest(["pkg"], tmp_path) != first


# ------------------------------------------------------------------------------------ the classification gate
CLASSIFY = trajectory_tool.select_gates(["shapes_yolo26n_classify"])[0]


def test_classify_gate_is_the_embedded_default_run() -> None:
    """The gate trains what ``lucid-train fit --model.task classify`` trains (classify_default.yaml): same epochs,
    batch, image size, synthetic set, optimizer and the lr0 auto's rule gives 3 classes; top-1 gated, top-5 not."""
    from lucid_core.optim.recipe import OptimizerConfig, resolve_optimizer

    default = yaml.safe_load(
        (REPO / "packages/lucid-train/src/lucid_train/configs/classify_default.yaml").read_text(
            encoding="utf-8"
        )
    )
    recipe = CLASSIFY.recipe
    assert (recipe.task, recipe.data, CLASSIFY.reference_model) == (
        "classify",
        "synth:classify",
        "yolo26n-cls.yaml",
    )
    assert recipe.epochs == default["trainer"]["max_epochs"]
    assert recipe.batch_size == default["data"]["batch_size"] and recipe.workers == default["data"]["workers"]
    synth = default["data"]["synth"]
    assert recipe.imgsz == synth["imgsz"]
    settings = {**trajectory_tool.SYNTH_SETTINGS, "imgsz": recipe.imgsz}
    assert {k: settings[k] for k in synth} == synth
    opt = default["optimizer"]
    assert (
        recipe.optimizer["name"] == opt["name"] and recipe.optimizer["nominal_batch"] == opt["nominal_batch"]
    )
    assert recipe.optimizer["warmup_epochs"] == opt["warmup_epochs"] and "lr0" not in opt
    resolved = resolve_optimizer(
        OptimizerConfig(name=opt["name"]), num_classes=synth["num_classes"], batch_size=16, iterations=630
    )
    assert (recipe.optimizer["lr0"], recipe.optimizer["momentum"]) == (resolved.lr0, resolved.momentum)
    assert recipe.augment == {}  # no mosaic to close: classification has its own crop/flip/colour pipeline
    assert [(c.metric, c.gated) for c in recipe.curves] == [("top1", True), ("top5", False)]


def test_classify_synth_dataset_is_a_class_folder_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``synth:classify`` is the folder-per-class root (what the reference's ``data=`` and our reader take),
    synthesized once at the recipe's image size and then reused."""
    monkeypatch.setattr(
        trajectory_tool, "SYNTH_SETTINGS", {**trajectory_tool.SYNTH_SETTINGS, "n_train": 6, "n_val": 6}
    )
    root = trajectory_tool.synth_dataset("classify", tmp_path, imgsz=CLASSIFY.recipe.imgsz)
    assert root == tmp_path / "shapes-classify" and root.is_dir()
    classes = sorted(p.name for p in (root / "train").iterdir())
    assert len(classes) == 3 and sorted(p.name for p in (root / "val").iterdir()) == classes
    image = next((root / "val" / classes[0]).iterdir())
    pixels = cv2.imread(str(image))
    assert pixels is not None and pixels.shape[:2] == (CLASSIFY.recipe.imgsz, CLASSIFY.recipe.imgsz)
    stamp = image.stat().st_mtime_ns
    assert trajectory_tool.synth_dataset("classify", tmp_path, imgsz=CLASSIFY.recipe.imgsz) == root
    assert image.stat().st_mtime_ns == stamp  # reused, not synthesized again


def test_score_model_scores_a_classifier_by_accuracy(tmp_path: Path) -> None:
    """An image-level recipe is scored by ``evaluate_accuracy`` at the recipe's image size: top-1 is the share of
    val images whose most probable class is their label, top-5 is 1 with 3 classes."""
    from lucid_core.models import build_model
    from lucid_data.readers import load_dataset
    from lucid_data.synth import synthesize
    from lucid_train.eval import evaluate_accuracy

    root = synthesize("classify", tmp_path / "cls", n_train=3, n_val=9, imgsz=48, num_classes=3, seed=0)
    model = build_model("yolo26", "classify", "n", num_classes=3).eval()
    source = load_dataset(root, "val", "classify")
    recipe = dataclasses.replace(CLASSIFY.recipe, imgsz=48)
    scores = trajectory_tool.score_model(recipe, model, source)
    direct = evaluate_accuracy(model, source, imgsz=48)
    assert scores == {"top1 acc": direct.top1, "top5 acc": 1.0}
    assert direct.num_images == 9 and scores["top1 acc"] in {k / 9 for k in range(10)}


def test_classify_gate_end_to_end_with_a_stub_trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A saturated top-5 curve (1.0 on both sides, sd 0) is printed as ``info``; top-1 alone decides."""
    monkeypatch.setattr(trajectory_tool, "FIDELITY_DIR", tmp_path)

    def rows(top1: list[float]) -> list[dict[str, Any]]:
        return [
            {"epoch": e, "in_training": {}, "losses": {"loss": 0.5}, "top1 acc": v, "top5 acc": 1.0}
            for e, v in enumerate(top1)
        ]

    top1 = [0.45, 0.6, 0.75, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99]
    reference = [rows([min(1.0, v + (k - 1) * 0.01) for v in top1]) for k in range(3)]
    _write_distribution(tmp_path, CLASSIFY, reference)
    factor = {"value": 1.0}

    def fake_train(r: Any, threads: Any = None, model_options: Any = None) -> list[dict[str, Any]]:
        return rows([factor["value"] * min(1.0, v + (r.seed - 1) * 0.01) for v in top1])

    monkeypatch.setattr(trajectory_tool, "train_and_score", fake_train)
    assert trajectory_tool.main(["--task", "classify"]) == 0
    out = capsys.readouterr().out
    assert "ok   shapes_yolo26n_classify" in out and "top5 acc (reference 3 seeds" in out and "| info" in out
    factor["value"] = 0.9
    assert trajectory_tool.main(["--task", "classify"]) == 1
    captured = capsys.readouterr()
    assert "top1 acc: final epoch seed mean" in captured.err and "top5" not in captured.err


COMMITTED = [g for g in trajectory_tool.GATES if g.distribution.is_file()]


@pytest.mark.parametrize("gate", COMMITTED, ids=lambda g: g.name)
def test_committed_distributions_carry_their_provenance(gate: Any) -> None:
    """Every recorded distribution names its recipe, seeds, machine class, reference version and the evaluator
    version it was scored with, and holds every epoch of every curve of the gate for each seed."""
    data = trajectory_tool.load_distribution(gate)
    assert data["gate"] == gate.name and data["recipe"]["reference_model"] == gate.reference_model
    assert data["machine_class"]["cpu"] and data["reference_version"].startswith("ultralytics ")
    assert {"lucid_core", "evaluator_sha256"} <= set(data["scored_with"])
    assert sorted(int(k) for k in data["runs"]) == data["seeds"]
    if "provenance" in data:  # per seed: the machine and reference build it was recorded with
        assert list(data["provenance"]) == list(data["runs"])
        assert all(p["machine_class"]["cpu"] and p["reference_version"] for p in data["provenance"].values())
    assert len(data["seeds"]) >= (5 if gate.name == "shapes_yolo26n_detect" else 3)
    for rows in data["runs"].values():
        assert [r["epoch"] for r in rows] == list(range(gate.recipe.epochs))
        assert all(0.0 <= r[c.label] <= 1.0 for r in rows for c in gate.recipe.curves)


def test_the_yolo26n_detection_distribution_is_committed() -> None:
    assert GATE in COMMITTED


@pytest.mark.slow
@pytest.mark.shared
def test_trajectory_gate_passes(shared_dir: Path) -> None:
    """The yolo26n detection gate, 3 seeds (``make goldens`` runs every gate)."""
    assert trajectory_tool.main(["--task", GATE.name]) == 0
