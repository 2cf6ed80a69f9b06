"""Resume with only ``--ckpt_path`` continues the run it belongs to; lucid-predict reads what training reads (issue 13)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from lucid_train_testing import TINY_IMGSZ, make_shapes


def test_a_checkpoint_alone_brings_its_runs_config_or_is_refused_naming_the_config(tmp_path: Path) -> None:
    from lucid_train.cli import with_embedded_default
    from lucid_train.errors import TrainingSetupError

    run = tmp_path / "runs" / "train"
    run.mkdir(parents=True)
    (run / "last.ckpt").write_bytes(b"")
    with pytest.raises(TrainingSetupError, match="--config") as info:
        with_embedded_default(["fit", "--ckpt_path", str(run / "last.ckpt")])
    assert str(run / "config.yaml") in str(info.value)
    (run / "config.yaml").write_text("trainer: {}\n")
    completed = with_embedded_default(
        ["fit", "--ckpt_path", str(run / "last.ckpt"), "--trainer.max_epochs", "3"]
    )
    assert completed[:3] == ["fit", "--config", str(run / "config.yaml")]
    assert completed[3:] == ["--ckpt_path", str(run / "last.ckpt"), "--trainer.max_epochs", "3"]


@pytest.mark.slow
def test_resume_with_only_the_checkpoint_continues_in_its_own_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lucid_train.cli import main

    data = make_shapes(tmp_path / "shapes", n_train=4, n_val=2)
    monkeypatch.chdir(tmp_path)
    quiet = ["--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false"]
    args = [
        "--data.root",
        str(data),
        "--data.imgsz",
        str(TINY_IMGSZ),
        "--data.workers",
        "0",
        "--data.batch_size",
        "2",
    ]
    run = tmp_path / "mine"
    assert (
        main(["fit", *args, "--trainer.max_epochs", "1", "--trainer.default_root_dir", str(run), *quiet]) == 0
    )
    assert main(["fit", "--ckpt_path", str(run / "last.ckpt"), "--trainer.max_epochs", "2", *quiet]) == 0
    with (run / "metrics.csv").open() as handle:
        assert [row["epoch"] for row in csv.DictReader(handle)] == ["0", "1"]
    assert not Path("runs").exists()  # neither the embedded shapes run nor a new directory


def test_predict_reads_the_training_extensions_with_a_progress_bar(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import cv2

    from lucid_core.checkpoint import save_model
    from lucid_core.models import build_model
    from lucid_core.predict_cli import PREDICT_SUFFIXES, TRAINING_SUFFIXES, main
    from lucid_data.imageio import IMAGE_SUFFIXES as TRAINING

    assert frozenset(TRAINING) == TRAINING_SUFFIXES and TRAINING_SUFFIXES <= PREDICT_SUFFIXES
    save_model(
        build_model(family="yolov8", task="detect", scale="n", num_classes=2), tmp_path / "w", imgsz=64
    )
    images = tmp_path / "images"
    images.mkdir()
    pixels = np.random.default_rng(0).integers(0, 255, (48, 40, 3), dtype=np.uint8)
    names = ["a.bmp", "b.tif", "c.png"]
    for name in names:
        assert cv2.imwrite(str(images / name), pixels)
    out = tmp_path / "out"
    assert main(["--weights", str(tmp_path / "w"), "--source", str(images), "--output", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{n}.json" for n in names)
    err = capfd.readouterr().err
    assert f"{len(names)}/{len(names)}" in err and "[" in err and "#" in err
