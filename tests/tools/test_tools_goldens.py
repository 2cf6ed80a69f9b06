"""tools/check_goldens.py: the stored cases parse, a value outside its band fails naming case/metric/band, and
(slow) the real gate passes on this checkout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tool_testing import load_tool

goldens = load_tool("check_goldens")


def test_stored_cases_parse_with_a_band_and_a_fixed_step_count() -> None:
    cases = goldens.load_cases()
    assert {c["name"] for c in cases} >= {"shapes_overfit", "coco8_overfit"}
    for case in cases:
        train = case["train"]
        assert train["steps"] > 0 and train["epochs"] > 0
        for metric, (low, high) in case["band"].items():
            assert metric.startswith("metrics/") and 0 <= low < high <= 1, (case["name"], metric)


def test_a_value_outside_its_band_is_a_failure_naming_case_metric_and_band() -> None:
    case = {"name": "demo", "band": {"metrics/mAP50": [0.4, 1.0], "metrics/mAP50-95": [0.2, 1.0]}}
    assert goldens.check_case(case, {"metrics/mAP50": 0.5, "metrics/mAP50-95": 0.3}) == []
    failures = goldens.check_case(case, {"metrics/mAP50": 0.1, "metrics/mAP50-95": 0.3})
    assert failures == ["demo: metrics/mAP50 = 0.1000 is outside the band [0.4, 1.0]"]
    missing = goldens.check_case(case, {"metrics/mAP50": 0.5})
    assert len(missing) == 1 and "metrics/mAP50-95 was not produced" in missing[0]


def test_a_case_without_a_band_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"data": {}, "model": {}, "train": {}}))
    with pytest.raises(SystemExit, match="band"):
        goldens.load_cases(tmp_path)


def test_a_shared_case_is_skipped_when_its_data_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(goldens, "SHARED_DIR", tmp_path / "no-shared")
    case = {"name": "c", "file": "c.json", "data": {"kind": "shared", "path": "data/coco8/coco8.yaml"}}
    with pytest.raises(goldens.GoldenSkipped, match="not present"):
        goldens.data_yaml(case, tmp_path)


@pytest.mark.slow
def test_the_goldens_gate_passes(capsys: pytest.CaptureFixture[str]) -> None:
    status = goldens.main([])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "ok   shapes_overfit" in out
