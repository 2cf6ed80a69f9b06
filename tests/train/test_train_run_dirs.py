"""Run directories: a training run's ``config.yaml`` is never replaced by another subcommand, and resumes.

``validate``/``test``/``predict`` write their ``config.yaml`` into their own directory (``runs/validate``,
``runs/validate2``, ...), so ``lucid-train fit --config runs/train/config.yaml --ckpt_path runs/train/last.ckpt``
keeps working after them (docs/TRAINING.md "Run directory").
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml
from lucid_train_testing import TINY_IMGSZ, make_shapes

from lucid_train.cli import main

QUIET = ["--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false"]


def test_fit_then_validate_then_resume_from_the_runs_own_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_shapes(tmp_path / "shapes", n_train=4, n_val=2)
    monkeypatch.chdir(tmp_path)
    data_args = ["--data.root", str(data), "--data.imgsz", str(TINY_IMGSZ), "--data.workers", "0"]
    data_args += ["--data.batch_size", "2"]
    assert main(["fit", *data_args, "--trainer.max_epochs", "1", *QUIET]) == 0
    run = Path("runs/train")
    fit_config = (run / "config.yaml").read_bytes()
    assert yaml.safe_load(fit_config)["trainer"]["default_root_dir"] == str(run)

    for subcommand, own_dir in [("validate", "runs/validate"), ("validate", "runs/validate2")]:
        assert main([subcommand, *data_args, "--ckpt_path", str(run / "last.ckpt"), *QUIET]) == 0
        assert (Path(own_dir) / "config.yaml").is_file()
        assert (run / "config.yaml").read_bytes() == fit_config
    # the training run's own config as --config: its default_root_dir holds a config, so validate moves aside
    assert (
        main(["validate", "--config", str(run / "config.yaml"), "--ckpt_path", str(run / "last.ckpt")]) == 0
    )
    assert Path("runs/validate3/config.yaml").is_file() and (run / "config.yaml").read_bytes() == fit_config

    resume = ["fit", "--config", str(run / "config.yaml"), "--ckpt_path", str(run / "last.ckpt")]
    assert main([*resume, "--trainer.max_epochs", "2"]) == 0
    with (run / "metrics.csv").open() as handle:
        assert [row["epoch"] for row in csv.DictReader(handle)] == ["0", "1"]
    assert not Path("runs/train2").exists()


def test_explicit_new_directory_is_used_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lucid_train.cli import _evaluation_run_base
    from lucid_train.run_dir import CLAIM_ENV, claim_run_dir

    monkeypatch.delenv(CLAIM_ENV, raising=False)  # claim_run_dir records its claim in the environment

    def evaluation_run_dir(configured: Path) -> Path:
        return claim_run_dir(_evaluation_run_base(configured, "test"), "config.yaml")

    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "config.yaml").write_text("trainer: {}\n")
    assert evaluation_run_dir(tmp_path / "mine") == tmp_path / "mine"
    assert evaluation_run_dir(tmp_path / "train") == tmp_path / "test"
    (tmp_path / "test" / "config.yaml").write_text("trainer: {}\n")
    assert evaluation_run_dir(tmp_path / "train") == tmp_path / "test2"
