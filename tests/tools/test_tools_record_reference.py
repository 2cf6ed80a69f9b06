"""``tools/record_reference.py``'s bookkeeping: a distribution keeps the seeds recorded elsewhere (scored by the
same evaluator), every seed names the machine and the reference build it was recorded with."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tool_testing import load_tool

record_reference = load_tool("record_reference")

INTEL = {"cpu": "Intel(R) Xeon(R) Processor", "cpus": "2", "machine": "x86_64"}
AMD = {"cpu": "AMD EPYC", "cpus": "2", "machine": "x86_64"}


def _rows(value: float) -> list[dict[str, Any]]:
    return [{"epoch": 0, "nms box mAP50-95": value}]


def _committed(sha: str) -> dict[str, Any]:
    """A distribution file from before per-seed provenance: seeds 0 and 1."""
    return {
        "gate": "g",
        "machine_class": INTEL,
        "reference_version": "ultralytics 8.4.190",
        "scored_with": {"evaluator_sha256": sha},
        "runs": {"0": _rows(0.5), "1": _rows(0.6)},
    }


def test_merge_keeps_committed_seeds_scored_by_the_same_evaluator() -> None:
    scored = {"1": _rows(0.61), "10": _rows(0.7)}
    here = {"reference_version": "ultralytics 8.4.190, torch 2.15.0", "machine_class": AMD}
    runs, provenance = record_reference.merge_runs(
        _committed("abc"), scored, {"1": here, "10": here}, evaluator_sha256="abc"
    )
    assert list(runs) == ["0", "1", "10"]  # numeric order
    # a seed scored here replaces the committed one
    assert runs["0"] == _rows(0.5) and runs["1"] == _rows(0.61)
    assert provenance["0"] == {"reference_version": "ultralytics 8.4.190", "machine_class": INTEL}
    assert provenance["10"] == here
    assert record_reference.summary_machine_class(provenance)["cpu"] == "AMD EPYC; Intel(R) Xeon(R) Processor"
    again, _ = record_reference.merge_runs(
        {**_committed("abc"), "runs": runs, "provenance": provenance}, {}, {}, evaluator_sha256="abc"
    )
    assert again == runs


def test_merge_refuses_committed_seeds_it_cannot_rescore() -> None:
    with pytest.raises(SystemExit, match=r"seeds 0 of the committed distribution .*\(record --seeds 0\)"):
        record_reference.merge_runs(_committed("old"), {"1": _rows(0.6)}, {"1": {}}, evaluator_sha256="new")
    # every committed seed re-scored here: the old evaluator does not matter
    runs, _ = record_reference.merge_runs(
        _committed("old"), {"0": _rows(0.5), "1": _rows(0.6)}, {"0": {}, "1": {}}, evaluator_sha256="new"
    )
    assert list(runs) == ["0", "1"]


def test_reference_version_names_the_torch_build(tmp_path: Path) -> None:
    log = tmp_path / "seed0.log"
    log.write_text(
        "x\nUltralytics 8.4.190 \U0001f680 Python-3.11.7 torch-2.15.0+cu132 CPU (AMD EPYC)\n", "utf-8"
    )
    assert record_reference.reference_version(log) == "ultralytics 8.4.190, torch 2.15.0+cu132"
    log.write_text("Ultralytics 8.4.190 CPU\n", "utf-8")
    assert record_reference.reference_version(log) == "ultralytics 8.4.190"
    log.write_text("nothing\n", "utf-8")
    assert record_reference.reference_version(log) == "unknown"


def test_refbench_packages_reads_the_venv_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = tmp_path / "venv"
    monkeypatch.setenv("LUCID_REFBENCH_VENV", str(venv))
    assert record_reference.refbench_packages() == {}  # no venv: nothing to say
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    found = record_reference.refbench_packages()
    assert found["numpy"] == importlib.metadata.version("numpy")
    assert set(found) <= set(record_reference.REFBENCH_PACKAGES)


def test_seed_provenance_reads_the_file_beside_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record_reference, "REF_DIR", tmp_path)
    g = record_reference.gate("shapes_yolo26n_detect")
    run = tmp_path / g.name / "seed3"
    run.mkdir(parents=True)
    (tmp_path / g.name / "seed3.log").write_text("Ultralytics 8.4.190 torch-2.15.0+cu132 CPU\n", "utf-8")
    before = record_reference.seed_provenance(
        g, 3
    )  # recorded before the file existed: this machine, no packages
    assert before == {
        "reference_version": "ultralytics 8.4.190, torch 2.15.0+cu132",
        "machine_class": record_reference.machine_class(),
    }
    packages = {"torch": "2.15.0+cu132", "numpy": "2.4.6"}
    recorded = {"machine_class": INTEL, "refbench_packages": packages}
    (run / record_reference.PROVENANCE_FILE).write_text(json.dumps(recorded), "utf-8")
    assert record_reference.seed_provenance(g, 3) == {
        "reference_version": "ultralytics 8.4.190, torch 2.15.0+cu132",
        "machine_class": INTEL,
        "refbench_packages": packages,
    }
