"""The embedded default run: the packaged config is applied only without data/config, and reaches every part."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from lucid_train.cli import EMBEDDED_DEFAULT_CONFIG, build_cli, embedded_default, with_embedded_default
from lucid_train.datamodule import SynthConfig


def test_the_packaged_default_is_applied_only_without_data_or_config() -> None:
    default = ["--config", str(EMBEDDED_DEFAULT_CONFIG)]
    assert with_embedded_default(["fit"]) == ["fit", *default]
    assert with_embedded_default(["fit", "--trainer.max_epochs", "3"]) == [
        "fit",
        *default,
        "--trainer.max_epochs",
        "3",
    ]
    assert with_embedded_default(["validate", "--model.weights", "w"]) == [
        "validate",
        *default,
        "--model.weights",
        "w",
    ]
    for user_data in (
        ["--data.root", "d.yaml"],
        ["--data.root=d.yaml"],
        ["--config", "c.yaml"],
        ["-c", "c.yaml"],
    ):
        assert with_embedded_default(["fit", *user_data]) == ["fit", *user_data]
    assert with_embedded_default(["--help"]) == ["--help"]


def test_synth_dataclass_defaults_equal_the_embedded_default() -> None:
    assert embedded_default()["data"]["synth"] == {
        k: v for k, v in asdict(SynthConfig()).items() if k in embedded_default()["data"]["synth"]
    }


def test_the_embedded_default_reaches_data_model_trainer_and_optimizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUCID_CACHE_DIR", str(tmp_path / "cache"))
    expected = yaml.safe_load(EMBEDDED_DEFAULT_CONFIG.read_text())
    cli = build_cli(
        [
            "--config",
            str(EMBEDDED_DEFAULT_CONFIG),
            "--data.synth.n_train",  # a later flag overrides the packaged value (and keeps the test fast)
            "4",
            "--data.synth.n_val",
            "2",
            "--trainer.default_root_dir",
            str(tmp_path / "run"),
        ],
        run=False,
    )
    data, module, trainer = cli.datamodule, cli.model, cli.trainer
    assert data.synth.n_train == 4 and data.synth.imgsz == expected["data"]["synth"]["imgsz"]
    assert data.imgsz == module.imgsz == expected["data"]["synth"]["imgsz"]
    assert data.batch_size == expected["data"]["batch_size"] and data.workers == expected["data"]["workers"]
    assert data.augment.close_mosaic == expected["data"]["augment"]["close_mosaic"]
    assert data.augment.mosaic_recent == 8 * data.batch_size  # the reference's window: its last 8 batches
    assert data.num_classes == module.num_classes == expected["data"]["synth"]["num_classes"]
    assert trainer.max_epochs == expected["trainer"]["max_epochs"]
    for key, value in expected["optimizer"].items():
        assert getattr(module.optimizer_config, key) == value, key
    assert str(data.root).startswith(str(tmp_path / "cache"))
