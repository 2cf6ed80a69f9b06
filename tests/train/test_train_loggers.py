"""Lightning loggers in lucid-train (issue 14): ``--trainer.logger`` takes any Lightning logger (``save_dir`` = the run
directory unless given); no flag = CSVLogger + TensorBoardLogger (when tensorboard is installed) under the run
directory; ``false`` = none; our metrics.csv/jsonl and config.yaml stay in the run directory."""

from __future__ import annotations

import csv
import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lucid_train_testing import make_shapes, tiny_cli_args

from lucid_train.cli import build_cli, main
from lucid_train.loggers import (
    CSV_LOGS,
    LIGHTNING_RANK_ZERO_LOGGER,
    RUN_DIR_TOKEN,
    TENSORBOARD_LOGS,
    drop_lightning_tips,
    tensorboard_available,
    with_logger_save_dir,
)

needs_tensorboard = pytest.mark.skipif(not tensorboard_available(), reason="tensorboard is not installed")


@pytest.fixture(scope="module")
def shapes_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shapes(tmp_path_factory.mktemp("logger-shapes"), n_train=4, n_val=2)


def _write_one_metric(loggers: list[Any]) -> None:
    """What a fit does to every logger, minus the fit: hyper-parameters, one metric row, save, finalize."""
    for logger in loggers:
        logger.log_hyperparams({"lr0": 0.01})
        logger.log_metrics({"train/box_loss": 1.5}, step=0)
        logger.save()
        logger.finalize("success")


def _event_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("events.out.tfevents.*"))


def test_no_logger_flag_gives_csv_and_tensorboard_under_the_run_directory(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    cli = build_cli(tiny_cli_args(shapes_yaml, run), run=False)
    loggers = cli.trainer.loggers
    assert isinstance(loggers[0], CSVLogger) and Path(loggers[0].log_dir).parent == run / CSV_LOGS
    assert len(loggers) == (2 if tensorboard_available() else 1)
    _write_one_metric(loggers)
    assert (run / CSV_LOGS / "version_0" / "metrics.csv").is_file()
    if tensorboard_available():
        assert isinstance(loggers[1], TensorBoardLogger)
        assert _event_files(run / TENSORBOARD_LOGS)
    assert not (run / "metrics.csv").exists()  # ours is written by RunArtifacts only, never by a logger


def test_csv_logger_flag_logs_into_the_run_directory(shapes_yaml: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    cli = build_cli(
        tiny_cli_args(shapes_yaml, run, "--trainer.logger", "lightning.pytorch.loggers.CSVLogger"), run=False
    )
    (logger,) = cli.trainer.loggers
    assert isinstance(logger, CSVLogger) and Path(logger.save_dir) == run
    _write_one_metric([logger])
    assert (run / "lightning_logs" / "version_0" / "metrics.csv").is_file()


@needs_tensorboard
def test_tensorboard_logger_flag_by_name_with_its_own_options(shapes_yaml: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = tiny_cli_args(
        shapes_yaml, run, "--trainer.logger=TensorBoardLogger", "--trainer.logger.name", "tb"
    )
    (logger,) = build_cli(args, run=False).trainer.loggers
    assert isinstance(logger, TensorBoardLogger) and Path(logger.save_dir) == run
    _write_one_metric([logger])
    assert _event_files(run / "tb")


def test_logger_false_logs_nothing(shapes_yaml: Path, tmp_path: Path) -> None:
    cli = build_cli(tiny_cli_args(shapes_yaml, tmp_path / "run", "--trainer.logger", "false"), run=False)
    assert cli.trainer.loggers == []


def test_save_dir_is_added_only_when_missing_and_only_for_loggers_that_take_one() -> None:
    flag = ["--trainer.logger", "CSVLogger"]
    assert with_logger_save_dir(flag) == [*flag, "--trainer.logger.save_dir", RUN_DIR_TOKEN]
    given = [*flag, "--trainer.logger.save_dir", "logs"]
    assert with_logger_save_dir(given) == given
    for value in ("false", "true", "null"):
        assert with_logger_save_dir(["--trainer.logger", value]) == ["--trainer.logger", value]
    unknown = ["--trainer.logger", "no.such.module.Logger"]
    assert with_logger_save_dir(unknown) == unknown  # left for jsonargparse to report


def _fit(shapes_yaml: Path, run: Path, *extra: str) -> list[str]:
    """A tiny ``lucid-train fit``; returns the warnings it emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["fit", *tiny_cli_args(shapes_yaml, run, *extra)]) == 0
    return [str(w.message) for w in caught]


def _our_metrics(run: Path) -> list[dict[str, str]]:
    with (run / "metrics.csv").open() as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_fit_with_default_and_flagged_loggers_writes_their_files_and_ours(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    default = tmp_path / "default"
    messages = _fit(shapes_yaml, default)
    assert not [m for m in messages if "transfer_batch_to_device" in m]
    assert (default / CSV_LOGS / "version_0" / "metrics.csv").is_file()
    if tensorboard_available():
        assert _event_files(default / TENSORBOARD_LOGS)
    for run in (default,):
        rows = _our_metrics(run)
        assert [int(r["epoch"]) for r in rows] == [0] and "metrics/mAP50-95" in rows[0]
        assert len((run / "metrics.jsonl").read_text().splitlines()) == 1
        assert (run / "config.yaml").is_file() and (run / "last.ckpt").is_file()
    flagged = tmp_path / "flagged"
    _fit(shapes_yaml, flagged, "--trainer.logger", "lightning.pytorch.loggers.CSVLogger")
    assert (flagged / "lightning_logs" / "version_0" / "metrics.csv").is_file()
    assert (flagged / "config.yaml").is_file() and len(_our_metrics(flagged)) == 1


def test_the_cli_drops_lightnings_hosted_logger_tip_and_keeps_its_other_notices(
    shapes_yaml: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Offline-first: building the CLI's trainer logs none of Lightning's "💡 Tip" adverts (Lightning logs one for
    every run without its hosted logger), while its other notices (the accelerator lines) still reach the log;
    installing the filter twice adds it once."""
    caplog.set_level(logging.INFO, logger=LIGHTNING_RANK_ZERO_LOGGER)
    build_cli(tiny_cli_args(shapes_yaml, tmp_path / "run"), run=False)
    messages = [r.getMessage() for r in caplog.records if r.name == LIGHTNING_RANK_ZERO_LOGGER]
    assert any("GPU available" in m for m in messages), messages
    assert not any("Tip:" in m or "litlogger" in m for m in messages), messages
    log = logging.getLogger(LIGHTNING_RANK_ZERO_LOGGER)
    before = len(log.filters)
    drop_lightning_tips()
    assert len(log.filters) == before
