"""``lucid-train fit|validate|test|predict``: a LightningCLI over `DetectionLitModule` + `DetectionDataModule`.

Every hyper-parameter is a typed constructor argument and therefore a flag and a ``--config`` YAML key:
``--model.scale s``, ``--data.root data.yaml``, ``--data.batch_size 32``, ``--trainer.max_epochs 100``.

``--optimizer.*`` and ``--ema.*`` / ``--loss.*`` are OUR recipe (``lucid_train.recipe``), not Lightning's generic
``--optimizer`` class selection: the CLI is built with ``auto_configure_optimizers=False`` (which stops
LightningCLI from reserving ``--optimizer``/``--lr_scheduler``), adds the recipe dataclasses as top-level groups and
links them into the module's ``optimizer``/``ema``/``loss`` arguments. The number of classes, the class names and
the image size are linked from the data module after it is instantiated (``apply_on="instantiate"``).

With no arguments, ``lucid-train fit`` synthesises the shapes dataset (cached) and trains yolo26 n for a short
schedule (``DEFAULT_SHAPES_EPOCHS``), then prints the summary line with mAP50-95 (docs/TRAINING.md).
Errors in the setup (missing dataset, class-count mismatch, unreadable config) are printed as one paragraph and exit
with status 2, before any training step.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from lucid_train.callbacks import EpochStateCallback, RunArtifacts
from lucid_train.datamodule import DetectionDataModule
from lucid_train.errors import TrainingSetupError
from lucid_train.module import DetectionLitModule
from lucid_train.recipe import EMAConfig, LossConfig, OptimizerConfig

#: epochs of the embedded default (synthetic shapes) when ``--trainer.max_epochs`` is not given.
DEFAULT_SHAPES_EPOCHS = 12
#: epochs for a real dataset when ``--trainer.max_epochs`` is not given (reference default).
DEFAULT_EPOCHS = 100
DEFAULT_RUN_DIR = "runs/train"

TRAINER_DEFAULTS: dict[str, Any] = {
    "logger": False,
    "enable_checkpointing": False,  # RunArtifacts writes last/best atomically
    "use_distributed_sampler": False,  # ShardedEpochSampler shards identically-shuffled epochs itself
    "num_sanity_val_steps": 0,
    "default_root_dir": DEFAULT_RUN_DIR,
}


def _to_config(cls: type[Any]) -> Any:
    def convert(value: Any) -> Any:
        if value is None or isinstance(value, cls):
            return value
        return cls(**(vars(value) if hasattr(value, "__dict__") else dict(value)))

    return convert


class LucidTrainCLI(LightningCLI):
    """LightningCLI with the recipe groups and data → model links (see the module docstring)."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_dataclass_arguments(OptimizerConfig, "optimizer")
        parser.add_dataclass_arguments(EMAConfig, "ema")
        parser.add_dataclass_arguments(LossConfig, "loss")
        parser.link_arguments("optimizer", "model.optimizer", compute_fn=_to_config(OptimizerConfig))
        parser.link_arguments("ema", "model.ema", compute_fn=_to_config(EMAConfig))
        parser.link_arguments("loss", "model.loss", compute_fn=_to_config(LossConfig))
        parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")
        parser.link_arguments("data.names", "model.names", apply_on="instantiate")
        parser.link_arguments("data.imgsz", "model.imgsz", apply_on="instantiate")

    def _parse_ckpt_path(self) -> None:
        """Resume takes its hyper-parameters from the command line/config, not from the checkpoint's copy."""

    def before_instantiate_classes(self) -> None:
        subcommand = self.config.get("subcommand")
        config = self.config[subcommand] if subcommand else self.config
        trainer = config.trainer
        if trainer.get("max_epochs") is None:
            trainer.max_epochs = DEFAULT_SHAPES_EPOCHS if config.data.get("root") is None else DEFAULT_EPOCHS
        if subcommand == "fit" and not config.get("ckpt_path"):
            trainer.default_root_dir = str(
                _fresh_run_dir(Path(trainer.get("default_root_dir") or DEFAULT_RUN_DIR))
            )


def _fresh_run_dir(path: Path) -> Path:
    """``path`` if it holds no checkpoint yet, else ``path2``, ``path3``, ... (a new run never overwrites one)."""
    if not (path / "last.ckpt").exists():
        return path
    n = 2
    while (path.parent / f"{path.name}{n}" / "last.ckpt").exists():
        n += 1
    return path.parent / f"{path.name}{n}"


def _check_config_files(args: list[str]) -> None:
    """Fail with one paragraph when a ``--config`` file is missing or is not a YAML mapping."""
    import yaml

    for i, arg in enumerate(args):
        value = None
        if arg == "--config" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--config="):
            value = arg.split("=", 1)[1]
        if value is None:
            continue
        path = Path(value)
        if not path.is_file():
            raise TrainingSetupError(
                f"--config {value}: no such file; expected a YAML file with top-level keys such as model, data, "
                "trainer, optimizer (write one with `lucid-train fit --print_config > config.yaml`)."
            )
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise TrainingSetupError(
                f"--config {value}: not readable as YAML ({str(exc).splitlines()[0]}); expected a YAML mapping with "
                "top-level keys such as model, data, trainer, optimizer."
            ) from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise TrainingSetupError(
                f"--config {value}: holds a {type(loaded).__name__}, expected a YAML mapping with top-level keys "
                "such as model, data, trainer, optimizer."
            )


def build_cli(args: list[str] | None = None, *, run: bool = True) -> LucidTrainCLI:
    """Construct (and by default run) the CLI on ``args`` (``sys.argv[1:]`` when ``None``)."""
    return LucidTrainCLI(
        DetectionLitModule,
        DetectionDataModule,
        trainer_defaults={**TRAINER_DEFAULTS, "callbacks": [EpochStateCallback(), RunArtifacts()]},
        seed_everything_default=0,
        auto_configure_optimizers=False,
        save_config_kwargs={"overwrite": True},
        args=args,
        run=run,
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``lucid-train``. ``fit`` is implied when no subcommand is given."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        args = ["fit"]
    # Expected by design: the EMA copy lives in eval mode; the batch's host-side meta needs our transfer hook.
    warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode.*")
    warnings.filterwarnings("ignore", message=r".*overridden `transfer_batch_to_device`.*")
    try:
        _check_config_files(args)
        build_cli(args)
    except TrainingSetupError as exc:
        print(f"lucid-train: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
