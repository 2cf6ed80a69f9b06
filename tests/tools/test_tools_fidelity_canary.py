"""The fidelity canary: our evaluator's score of a committed reference checkpoint stays at the committed figure.

When it moves, every recorded distribution under tools/fidelity/ was scored by another evaluator: re-score with
``tools/record_reference.py --rescore`` (then ``score`` every gate). Both directions are tested: the committed
figure holds as is, and a patched NMS IoU threshold moves it past the tolerance."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from tool_testing import load_tool

record_reference = load_tool("record_reference")
compare_val_losses = load_tool("compare_val_losses")  # the instance record_reference imported

CANARIES = json.loads(record_reference.CANARY_FILE.read_text(encoding="utf-8"))["canaries"]


def test_every_canary_is_committed_and_small() -> None:
    assert set(CANARIES) == set(record_reference.CANARIES)
    for name in CANARIES:
        path = record_reference.CANARY_DIR / name
        assert path.is_file() and path.stat().st_size < 8 * 2**20, f"{path}: a canary is a few MB"


def test_canary_drift_logic() -> None:
    committed = {"a": 0.5, "b": 0.25}
    tol = record_reference.CANARY_TOLERANCE
    assert record_reference.canary_drift({"a": 0.5 + tol / 2, "b": 0.25}, committed) == []
    moved = record_reference.canary_drift({"a": 0.5 - 2 * tol}, committed)
    assert len(moved) == 2 and moved[0].startswith("a: ") and moved[1].startswith("b: None")


def _scores(name: str) -> dict[str, float]:
    entry = CANARIES[name]
    gate = record_reference.gate(entry["gate"])
    scores: dict[str, float] = record_reference.score_canary(record_reference.CANARY_DIR / name, gate)
    return scores


@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(CANARIES))
def test_canary_score_holds(name: str, shared_dir: Path) -> None:
    drift = record_reference.canary_drift(_scores(name), CANARIES[name]["scores"])
    assert drift == [], (
        f"{name}: our evaluator's score of the canary moved ({'; '.join(drift)}): re-score with "
        "`uv run --no-sync python tools/record_reference.py --rescore`, then `score` every gate"
    )


@pytest.mark.shared
def test_canary_catches_a_perturbed_evaluator(shared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A patched NMS IoU threshold (0.7 -> 0.5) moves the one-to-many + NMS score past the tolerance."""
    import lucid_train.eval

    monkeypatch.setattr(
        lucid_train.eval, "evaluate_model", functools.partial(lucid_train.eval.evaluate_model, iou=0.5)
    )
    name = sorted(CANARIES)[0]
    drift = record_reference.canary_drift(_scores(name), CANARIES[name]["scores"])
    assert any(line.startswith("nms ") for line in drift), drift


#: relative agreement of our validation losses with the reference's own (detection, segment and pose checkpoints
#: agree within 0.2 %: docs/TRAINING.md "Validation losses of the reference's checkpoints")
VAL_LOSS_RTOL = 2e-3


def _val_loss_gaps(name: str) -> list[str]:
    entry = CANARIES[name]
    ours = compare_val_losses.validation_losses(
        record_reference.CANARY_DIR / name, record_reference.gate(entry["gate"])
    )
    return [
        f"{item}: ours {ours.get(item)} vs the reference's {ref}"
        for item, ref in entry["reference_val_losses"].items()
        if ref and (ours.get(item) is None or abs(ours[item] / ref - 1) > VAL_LOSS_RTOL)
    ]


@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(n for n in CANARIES if "reference_val_losses" in CANARIES[n]))
def test_canary_validation_losses_equal_the_references(name: str, shared_dir: Path) -> None:
    """Same weights, images and labels: our objective on the validation split gives the reference's own logged
    ``val/<item>`` (its results.csv) — the head forward, assignment and loss, checked on a trained model."""
    assert _val_loss_gaps(name) == []


@pytest.mark.shared
def test_val_loss_canary_catches_a_perturbed_assigner(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two anchors per ground truth instead of one in the one-to-one assigner (the branch whose items are
    reported) moves the validation losses past the tolerance."""
    from lucid_core.assign.task_aligned import TaskAlignedAssigner

    original = TaskAlignedAssigner.__init__

    def perturbed(self: TaskAlignedAssigner, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("topk2") == 1:
            kwargs["topk2"] = 2
        original(self, *args, **kwargs)

    monkeypatch.setattr(TaskAlignedAssigner, "__init__", perturbed)
    name = sorted(n for n in CANARIES if "reference_val_losses" in CANARIES[n])[0]
    assert _val_loss_gaps(name)
