"""``YOLODataModule`` changes no process-wide state (malloc policy, warning filters, torch and OpenCV threads), also
when its loader forks a worker; the synthetic-cache folder names stay those of the datasets already on disk."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from lucid_train import datamodule
from lucid_train.datamodule import SynthConfig, shapes_cache_name
from process_state_testing import run_child

_BUILD = """
import sys
import cv2
from process_state_testing import record_mallopt, report, snapshot
from lucid_train.datamodule import SynthConfig, YOLODataModule
record_mallopt()
cv2.setNumThreads(2)  # a pool for the fork hooks to stop before a worker is forked and to restore after
before = snapshot()
data = YOLODataModule(
    synth=SynthConfig(n_train=8, n_val=4, imgsz=64), batch_size=4, workers=int(sys.argv[1]), task=sys.argv[2]
)
data.setup("fit")
train = next(iter(data.train_dataloader()))
val = next(iter(data.val_dataloader()))
report(before=before, after=snapshot(), batches=[len(train["meta"]), len(val["meta"])])
"""


@pytest.mark.parametrize(("workers", "task"), [(0, "detect"), (1, "segment")])
def test_building_and_serving_a_data_module_changes_no_process_state(
    tmp_path: Path, workers: int, task: str
) -> None:
    result = run_child(_BUILD, str(workers), task, env={"LUCID_CACHE_DIR": str(tmp_path)})
    before, after = result["before"], result["after"]
    assert {key: (before[key], after[key]) for key in before if before[key] != after[key]} == {}
    assert after["mallopt calls"] == [] and after["malloc tuning decided"] is None
    assert result["batches"] == [4, 4]


def test_the_cache_names_of_the_four_tasks_are_unchanged() -> None:
    """The folder names of synthetic datasets already cached on disk (default config)."""
    names = {task: shapes_cache_name(SynthConfig(), task) for task in ("detect", "segment", "pose", "obb")}
    assert names == {
        "detect": "shapes-detect-v1-d2da99e9",
        "segment": "shapes-segment-v2-45618b3d",
        "pose": "shapes-pose-v2-8948ab6d",
        "obb": "shapes-obb-v2-a643c7ca",
    }


def test_a_new_task_gets_its_own_cache_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datamodule, "get_task", lambda name: SimpleNamespace(name=name, target_fields=()))
    toy = shapes_cache_name(SynthConfig(), "toy")
    assert toy.startswith("shapes-toy-v2-") and toy != shapes_cache_name(SynthConfig(), "detect")
