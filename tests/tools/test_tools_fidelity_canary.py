"""The fidelity canary: our evaluator's score of a committed reference checkpoint stays at the committed figure.

When it moves, every recorded distribution under tools/fidelity/ was scored by another evaluator: re-score with
``tools/record_reference.py --rescore`` (then ``score`` every gate). Both directions are tested: the committed
figure holds as is, and a patched NMS IoU threshold moves it past the tolerance."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("record_reference", REPO / "tools" / "record_reference.py")
assert _spec and _spec.loader
record_reference = importlib.util.module_from_spec(_spec)
sys.modules["record_reference"] = record_reference
_spec.loader.exec_module(record_reference)

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
