"""`lucid-train`: recipe flags reach the module, data → model links, one-paragraph setup errors, a tiny CLI fit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lucid_train_testing import make_shapes, tiny_cli_args

from lucid_train.cli import build_cli, main


@pytest.fixture(scope="module")
def shapes_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shapes(tmp_path_factory.mktemp("cli-shapes"), n_train=8, n_val=4)


def test_recipe_flags_and_links_reach_the_module(shapes_yaml: Path, tmp_path: Path) -> None:
    cli = build_cli(
        [
            "--data.root",
            str(shapes_yaml),
            "--data.imgsz",
            "64",
            "--data.workers",
            "0",
            "--optimizer.lr0",
            "0.02",
            "--optimizer.name",
            "SGD",
            "--ema.decay",
            "0.999",
            "--loss.box",
            "5.0",
            "--model.family",
            "yolov8",
            "--trainer.default_root_dir",
            str(tmp_path),
        ],
        run=False,
    )
    module, data = cli.model, cli.datamodule
    assert module.optimizer_config.lr0 == 0.02 and module.optimizer_config.name == "SGD"
    assert module.optimizer_config.momentum is None  # unset: resolved later, never overridden when given
    assert module.ema_config.decay == 0.999 and module.loss_config.box == 5.0
    assert module.family == "yolov8" and int(module.model.num_classes) == data.num_classes
    assert module.names == data.names and module.imgsz == 64


def test_missing_dataset_is_one_paragraph_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(["fit", "--data.root", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(missing) in err and "expected" in err and "\n" not in err


@pytest.mark.parametrize("content", [None, "model: [unclosed", "- just\n- a list\n"])
def test_unreadable_config_is_one_paragraph_error(
    content: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    if content is not None:
        config.write_text(content)
    assert main(["fit", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(config) in err and "expected" in err and "\n" not in err


@pytest.mark.parametrize(("flag", "value"), [("--model.compile", "maybe"), ("--trainer.max_epochs", "x")])
def test_unparsable_flag_value_is_the_error_without_the_usage(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error names the key and the value and points at --help; the ~90-line usage is not printed first."""
    with pytest.raises(SystemExit) as exited:  # the parser's exit, as the console script ends
        main(["fit", flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" not in err and len(err.splitlines()) <= 12, err
    assert f'"{flag[2:]}"' in err and value in err and "fit --help" in err


def test_class_count_mismatch_between_weights_and_data_reinitialises_the_head(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    """Fine-tuning onto another class count (issue 13): only the head's class-dependent layers start fresh."""
    from lucid_core.checkpoint import save_model
    from lucid_core.models import build_model
    from lucid_train.datamodule import DetectionDataModule
    from lucid_train.module import DetectionLitModule

    data = DetectionDataModule(root=str(shapes_yaml), imgsz=64, workers=0)
    weights = tmp_path / "w.safetensors"
    source = build_model(family="yolov8", task="detect", scale="n", num_classes=data.num_classes + 2)
    save_model(source, weights)
    module = DetectionLitModule(family="yolov8", num_classes=data.num_classes, weights=str(weights))
    assert int(module.model.num_classes) == data.num_classes and module.model.training
    loaded = module.model.state_dict()
    kept = [k for k, v in source.state_dict().items() if k in loaded and torch.equal(v, loaded[k])]
    assert len(kept) > len(loaded) * 0.9


@pytest.mark.slow
def test_cli_fit_prints_the_summary_and_exports_best(
    shapes_yaml: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    code = main(["fit", *tiny_cli_args(shapes_yaml, run)])
    assert code == 0
    assert "lucid-train:" in capsys.readouterr().out and "mAP50-95" in (run / "summary.txt").read_text()
    assert (run / "best.safetensors").is_file() and (run / "last.ckpt").is_file()
    assert (run / "config.yaml").is_file()


def test_early_stopping_on_fitness_ends_the_run_with_its_files(shapes_yaml: Path, tmp_path: Path) -> None:
    """The reference's ``patience`` is Lightning's ``EarlyStopping`` on ``metrics/fitness`` (docs/TRAINING.md):
    the callback finds the metric (it is strict: a missing one raises), and a run it stops before
    ``max_epochs`` still writes best, last.ckpt, metrics and the summary of the epochs it trained.
    ``stopping_threshold 0`` stops after the first validation whatever the score."""
    run = tmp_path / "run"
    early_stopping = [
        "--trainer.callbacks+=EarlyStopping",
        "--trainer.callbacks.monitor=metrics/fitness",
        "--trainer.callbacks.mode=max",
        "--trainer.callbacks.patience=100",
        "--trainer.callbacks.stopping_threshold=0.0",
    ]
    code = main(["fit", *tiny_cli_args(shapes_yaml, run, "--trainer.max_epochs", "3", *early_stopping)])
    assert code == 0
    epochs = [line.split(",")[0] for line in (run / "metrics.csv").read_text().splitlines()[1:]]
    assert epochs == ["0"]
    summary = (run / "summary.txt").read_text()
    assert (
        summary.startswith("lucid-train: 1 epoch in ")
        and "(stopped after epoch 0 of max_epochs 3)" in summary
    )
    assert torch.load(run / "last.ckpt", map_location="cpu", weights_only=True)["epoch"] == 0
    assert (run / "best.safetensors").is_file()
