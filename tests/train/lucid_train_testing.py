"""Helpers shared by the lucid-train training tests (imported by `test_train_*.py`; not a test module).

Everything is tiny on purpose: a synthetic shapes set of a few 64-px images, yolo26 n (or yolov8 n), 1 thread.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

TINY_IMGSZ = 64


def make_shapes(
    root: Path, *, n_train: int = 16, n_val: int = 4, imgsz: int = TINY_IMGSZ, seed: int = 0
) -> Path:
    """A tiny synthetic shapes detection dataset under ``root``; returns its data YAML."""
    from lucid_data.synth import synthesize

    return Path(synthesize("detect", root, n_train=n_train, n_val=n_val, imgsz=imgsz, seed=seed))


def tiny_module(data: Any, *, family: str = "yolo26", **kwargs: Any) -> Any:
    from lucid_train.module import DetectionLitModule

    return DetectionLitModule(
        family=family, num_classes=data.num_classes, names=data.names, imgsz=data.imgsz, **kwargs
    )


def tiny_data(yaml_path: Path, *, batch_size: int = 4, **kwargs: Any) -> Any:
    from lucid_train.datamodule import DetectionDataModule

    return DetectionDataModule(
        root=str(yaml_path), imgsz=TINY_IMGSZ, batch_size=batch_size, workers=0, **kwargs
    )


class LossRecorder(pl.Callback):
    """The loss of every training batch (what ``training_step`` returned), in order; ``tiny_trainer`` adds one.

    Replaces the module's former ``loss_history`` (one list per batch for the whole run: unbounded memory on a
    long run, and read only by tests).
    """

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.losses.append(float(loss))


def recorded_losses(trainer: pl.Trainer) -> list[float]:
    """The losses the trainer's :class:`LossRecorder` saw (``tiny_trainer`` adds one)."""
    return next(c for c in trainer.callbacks if isinstance(c, LossRecorder)).losses  # type: ignore[attr-defined]


def _with_validation_plots(callbacks: list[Any], enabled: bool) -> list[Any]:
    """The default callbacks with the end-of-fit validation figures on or off (they cost an extra validation pass
    and ~15 figures per fit, so tiny test fits leave them off unless a test checks them)."""
    from lucid_train.callbacks.artifacts import RunArtifacts

    return [RunArtifacts(validation_plots=enabled) if isinstance(c, RunArtifacts) else c for c in callbacks]


def tiny_trainer(
    run_dir: Path,
    *,
    max_epochs: int = 1,
    callbacks: list[Any] | None = None,
    validation_plots: bool = False,
    **kwargs: Any,
) -> pl.Trainer:
    from lucid_train.callbacks import default_callbacks

    options: dict[str, Any] = {
        "max_epochs": max_epochs,
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "use_distributed_sampler": False,
        "num_sanity_val_steps": 0,
        "default_root_dir": str(run_dir),
        "callbacks": [
            *_with_validation_plots(default_callbacks(), validation_plots),
            *(callbacks or []),
            LossRecorder(),
        ],
    }
    options.update(kwargs)
    return pl.Trainer(**options)


def state_hash(module: torch.nn.Module) -> str:
    """sha256 over every tensor of a state dict, in key order (byte-exact comparison)."""
    digest = hashlib.sha256()
    for key, value in module.state_dict().items():
        digest.update(key.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def tiny_cli_args(shapes_yaml: Path, run: Path, *extra: str) -> list[str]:
    """``lucid-train fit`` arguments (after the subcommand) of a 1-epoch CPU run of ``shapes_yaml`` at 64 px into
    ``run``, quiet; ``extra`` comes last, so a repeated flag overrides (e.g. ``--trainer.max_epochs 3``)."""
    return [
        "--data.root",
        str(shapes_yaml),
        "--data.imgsz",
        str(TINY_IMGSZ),
        "--data.workers",
        "0",
        "--data.batch_size",
        "4",
        "--trainer.max_epochs",
        "1",
        "--trainer.accelerator",
        "cpu",
        "--trainer.enable_progress_bar",
        "false",
        "--trainer.enable_model_summary",
        "false",
        "--trainer.default_root_dir",
        str(run),
        *extra,
    ]
