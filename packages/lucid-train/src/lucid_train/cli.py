"""``lucid-train fit|validate|test``: a LightningCLI over `YOLOLitModule` + `YOLODataModule`.

``lucid-train predict --weights W --source SRC --output OUT.jsonl [--devices N --strategy ddp]`` is batch inference
on Lightning's ``Trainer.predict`` (:mod:`lucid_train.batch_predict`): one JSON line per image, in source order.

Logging (``lucid_train.loggers``): ``--trainer.logger`` takes any Lightning logger (``save_dir`` defaults to the run
directory); without it a run logs to ``CSVLogger`` + ``TensorBoardLogger`` (when tensorboard is installed) under
the run directory; ``--trainer.logger false`` logs nothing. ``config.yaml`` is written into the run directory.

Every hyper-parameter is a typed constructor argument and therefore a flag and a ``--config`` YAML key:
``--model.scale s``, ``--data.root data.yaml``, ``--data.batch_size 32``, ``--trainer.max_epochs 100``.

``--optimizer.*`` and ``--ema.*`` / ``--loss.*`` are OUR recipe (``lucid_train.recipe``), not Lightning's generic
``--optimizer`` class selection: the CLI is built with ``auto_configure_optimizers=False`` (which stops
LightningCLI from reserving ``--optimizer``/``--lr_scheduler``), adds the recipe dataclasses as top-level groups and
links them into the module's ``optimizer``/``ema``/``loss`` arguments. The number of classes, the class names and
the image size are linked from the data module after it is instantiated (``apply_on="instantiate"``).

The embedded default: when a subcommand is given neither ``--data.root`` nor ``--config``, the packaged
``lucid_train/configs/shapes_default.yaml`` (:data:`EMBEDDED_DEFAULT_CONFIG`, the one place the default run's
settings live) is passed as the first ``--config``, so ``lucid-train fit`` synthesises the shapes dataset (cached)
and trains yolo26 n for a short CPU schedule, then prints the summary line with mAP50-95 (docs/TRAINING.md); any
flag still overrides it.
Errors in the setup (missing dataset, class-count mismatch, unreadable config) are printed as one paragraph and exit
with status 2, before any training step.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from lucid_core.openmp import limit_openmp_spinning

limit_openmp_spinning()  # before torch is loaded (lucid_core.openmp)

import yaml  # noqa: E402
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI  # noqa: E402

from lucid_core.allocator import tune_glibc_malloc  # noqa: E402
from lucid_core.cli_errors import run_cli  # noqa: E402
from lucid_core.tasks import TASKS, get_task  # noqa: E402
from lucid_train.accel import AccelFlags  # noqa: E402
from lucid_train.batch_predict import predict_main  # noqa: E402
from lucid_train.callbacks import default_callbacks  # noqa: E402
from lucid_train.datamodule import YOLODataModule  # noqa: E402
from lucid_train.errors import TrainingSetupError  # noqa: E402
from lucid_train.loggers import (  # noqa: E402
    RunDirConfig,
    default_loggers,
    drop_lightning_tips,
    resolve_logger_dirs,
    with_logger_save_dir,
)
from lucid_train.module import YOLOLitModule  # noqa: E402
from lucid_train.precision import default_precision  # noqa: E402
from lucid_train.recipe import EMAConfig, LossConfig, OptimizerConfig  # noqa: E402
from lucid_train.run_dir import claim_run_dir  # noqa: E402
from lucid_train.validation import (  # noqa: E402
    KNOWN_ERRORS,
    check_training_checkpoint,
    is_url,
    refuse_unsafe_flags,
    validate_settings,
)

#: the settings of the embedded default run (synthetic shapes, yolo26 n, CPU); see the module docstring.
EMBEDDED_DEFAULT_CONFIG = Path(__file__).with_name("configs") / "shapes_default.yaml"
#: the embedded default run of an image-level task (``--model.task classify`` alone): docs/TRAINING.md
EMBEDDED_IMAGE_LEVEL_CONFIG = Path(__file__).with_name("configs") / "classify_default.yaml"
#: subcommands that take the embedded default when they are given no data and no config.
SUBCOMMANDS = ("fit", "validate", "test")
#: epochs for a real dataset when ``--trainer.max_epochs`` is not given (reference default).
DEFAULT_EPOCHS = 100
DEFAULT_RUN_DIR = "runs/train"
TRAINER_DEFAULTS: dict[str, Any] = {
    "logger": True,  # = lucid_train.loggers.default_loggers(run dir); --trainer.logger false: none
    "enable_checkpointing": False,  # RunArtifacts writes last/best atomically
    "use_distributed_sampler": False,  # ShardedEpochSampler shards identically-shuffled epochs itself
    "num_sanity_val_steps": 0,
    "default_root_dir": DEFAULT_RUN_DIR,
    "precision": default_precision(),  # 16-mixed on CUDA (reference AMP), 32-true on CPU
}


def embedded_default() -> dict[str, Any]:
    """The embedded default run's settings (the parsed :data:`EMBEDDED_DEFAULT_CONFIG`)."""
    loaded = yaml.safe_load(EMBEDDED_DEFAULT_CONFIG.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):  # pragma: no cover - a packaging error
        raise TrainingSetupError(f"{EMBEDDED_DEFAULT_CONFIG}: expected a YAML mapping")
    return loaded


class _ToPlain:
    """Link a recipe group into the module as a plain mapping (validated by ``cls``).

    The module accepts a mapping for these arguments; passing a dataclass *instance* through the link would make
    jsonargparse warn "Unable to serialize instance" when it saves ``config.yaml``. A module-level class, not a
    closure: ``--trainer.strategy ddp_spawn`` pickles the trainer, whose config callback holds the parser and so
    these link functions ("Can't pickle local object" otherwise).
    """

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls

    def __call__(self, value: Any) -> Any:
        if value is None:
            return None
        mapping = dict(vars(value) if hasattr(value, "__dict__") else value)
        return dict(vars(self.cls(**mapping)))


class LucidArgumentParser(LightningArgumentParser):
    """LightningCLI's parser without the usage dump on an error: a flag whose value does not parse
    (``--model.compile maybe``) ends in jsonargparse's tip (``lucid-train fit --help``) and the error naming the key
    and the value, instead of ~90 lines of usage that push them off the screen. ``--help`` is unchanged."""

    def print_usage(self, file: Any = None) -> None:
        return None  # jsonargparse's error() is its only caller here; the tip it prints next names --help


class LucidTrainCLI(LightningCLI):
    """LightningCLI with the recipe groups and data → model links (see the module docstring)."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_class_arguments(OptimizerConfig, "optimizer")
        parser.add_class_arguments(EMAConfig, "ema")
        parser.add_class_arguments(LossConfig, "loss")
        parser.link_arguments("optimizer", "model.optimizer", compute_fn=_ToPlain(OptimizerConfig))
        parser.link_arguments("ema", "model.ema", compute_fn=_ToPlain(EMAConfig))
        parser.link_arguments("loss", "model.loss", compute_fn=_ToPlain(LossConfig))
        parser.add_class_arguments(AccelFlags, "accel")  # lucid-accel fast paths (lucid_train.accel)
        parser.link_arguments("accel", "model.accel", compute_fn=_ToPlain(AccelFlags))
        parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")
        parser.link_arguments("data.names", "model.names", apply_on="instantiate")
        parser.link_arguments("data.imgsz", "model.imgsz", apply_on="instantiate")
        # The model's task decides what the data serves (masks, keypoints, rotated boxes); the dataset gives back
        # its task parameters (pose kpt_shape, flip_idx, sigmas).
        parser.link_arguments("model.task", "data.task")
        parser.link_arguments("data.task_options", "model.task_options", apply_on="instantiate")

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        """Lightning's subcommands without ``--weights_only``: checkpoints always load with ``weights_only=True``."""
        return {name: {*skipped, "weights_only"} for name, skipped in LightningCLI.subcommands().items()}

    def _prepare_subcommand_kwargs(self, subcommand: str) -> dict[str, Any]:
        """Lightning's keyword arguments plus ``weights_only=True`` (no public hook passes a fixed argument to the
        subcommand without making it a flag and a ``config.yaml`` key)."""
        kwargs = super()._prepare_subcommand_kwargs(subcommand)
        kwargs["weights_only"] = True  # tensors and plain data only: loading a checkpoint never runs its code
        return kwargs

    def _parse_ckpt_path(self) -> None:
        """Check ``--ckpt_path`` (local, safe, a checkpoint); hyper-parameters come from the command line/config.

        Overridden because no public hook stops Lightning's version from merging the checkpoint's copy of the
        hyper-parameters over the command line's.
        """
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt_path:
            check_training_checkpoint(str(ckpt_path))

    def instantiate_classes(self) -> None:
        """A ``--trainer.logger`` given without ``save_dir`` logs into the run directory, now final."""
        subcommand = self.config.get("subcommand")
        trainer = (self.config[subcommand] if subcommand else self.config).trainer
        resolve_logger_dirs(trainer.get("logger"), Path(trainer.get("default_root_dir") or DEFAULT_RUN_DIR))
        super().instantiate_classes()

    def instantiate_trainer(self, **kwargs: Any) -> Any:
        """The trainer; ``logger`` unset (``True``/``None``) = :func:`lucid_train.loggers.default_loggers`."""
        config = self.config_init.get(str(self.subcommand), self.config_init)
        trainer_config = config.get("trainer", {})
        if "logger" not in kwargs and trainer_config.get("logger") in (True, None):
            kwargs["logger"] = default_loggers(trainer_config.get("default_root_dir") or DEFAULT_RUN_DIR)
        return super().instantiate_trainer(**kwargs)

    def before_instantiate_classes(self) -> None:
        subcommand = self.config.get("subcommand")
        config = self.config[subcommand] if subcommand else self.config
        trainer = config.trainer
        _cpu_precision(trainer)
        if trainer.get("max_epochs") is None:
            shapes_epochs = int(embedded_default()["trainer"]["max_epochs"])
            trainer.max_epochs = shapes_epochs if config.data.get("root") is None else DEFAULT_EPOCHS
        validate_settings(config)
        configured = Path(trainer.get("default_root_dir") or DEFAULT_RUN_DIR)
        if subcommand == "fit":
            if not config.get("ckpt_path"):  # a resumed run continues in its own directory
                trainer.default_root_dir = str(claim_run_dir(configured, "last.ckpt"))
        elif subcommand is not None:
            base = _evaluation_run_base(configured, subcommand)
            trainer.default_root_dir = str(claim_run_dir(base, "config.yaml"))


def _cpu_precision(trainer: Any) -> None:
    """``--trainer.accelerator cpu`` on a CUDA host: the CUDA default ``16-mixed`` becomes ``32-true``, with a note.

    The default precision is chosen from the host (``16-mixed`` where CUDA is present, the reference's AMP), but
    Lightning runs ``16-mixed`` on a CPU as bf16 autocast, which is neither the reference's fp16 AMP nor the CPU
    default. So a CPU run gets the CPU default; ``--trainer.precision bf16-mixed`` asks for bf16 explicitly.
    """
    if (
        str(trainer.get("accelerator")) == "cpu"
        and str(trainer.get("precision")) == "16-mixed" == default_precision()
    ):
        trainer.precision = "32-true"
        print(
            "lucid-train: --trainer.accelerator cpu: precision 32-true (16-mixed is the CUDA default; Lightning "
            "would run it on the CPU as bf16 autocast; pass --trainer.precision bf16-mixed for that)"
        )


def _evaluation_run_base(configured: Path, subcommand: str) -> Path:
    """The run directory base of ``validate``/``test``: their own, never a training run's.

    The subcommand's ``config.yaml`` written into a training run's directory would replace the ``fit`` config that
    resumes the run. So the default directory and any directory that already holds a ``config.yaml`` become
    ``<parent>/<subcommand>`` (``runs/validate``); an explicit new directory is used as given.
    :func:`~lucid_train.run_dir.claim_run_dir` then takes the first free one of it, ``…2``, ``…3``.
    """
    if configured == Path(DEFAULT_RUN_DIR) or (configured / "config.yaml").exists():
        return configured.parent / subcommand
    return configured


def _check_config_files(args: list[str]) -> None:
    """Fail with one paragraph when a ``--config`` file is missing or is not a YAML mapping."""
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


def _option_value(args: list[str], option: str) -> str | None:
    """The value of ``option`` (``--x v`` or ``--x=v``) in ``args``; the last one wins, as in the parser."""
    value = None
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(f"{option}="):
            value = arg.split("=", 1)[1]
    return value


def with_embedded_default(args: list[str]) -> list[str]:
    """``args`` with a ``--config`` after the subcommand when neither data nor a config is given.

    With ``--ckpt_path`` alone that is the run's own ``config.yaml`` next to the checkpoint (a resume continues the
    run it belongs to); without a checkpoint it is :data:`EMBEDDED_DEFAULT_CONFIG`, or
    :data:`EMBEDDED_IMAGE_LEVEL_CONFIG` when ``--model.task`` names an image-level task (classification).
    """
    if not args or args[0] not in SUBCOMMANDS:
        return args
    user_options = ("--data.root", "--data", "--config", "-c")
    if any(arg in user_options or arg.startswith(tuple(f"{o}=" for o in user_options)) for arg in args[1:]):
        return args
    ckpt_path = _option_value(args, "--ckpt_path")
    if ckpt_path and not is_url(ckpt_path):
        run_config = Path(ckpt_path).parent / "config.yaml"
        if not run_config.is_file():
            raise TrainingSetupError(
                f"--ckpt_path {ckpt_path}: no --config given and the checkpoint's run directory has no "
                f"config.yaml ({run_config}); pass the run's settings, e.g. --config <run dir>/config.yaml "
                "(written by lucid-train fit), or --data.root and the model flags it was trained with."
            )
        print(
            f"lucid-train: --ckpt_path {ckpt_path}: using the run's own --config {run_config}",
            file=sys.stderr,
        )
        return [args[0], "--config", str(run_config), *args[1:]]
    task = _option_value(args, "--model.task")
    image_level = task is not None and task in TASKS and get_task(task).image_level
    config = EMBEDDED_IMAGE_LEVEL_CONFIG if image_level else EMBEDDED_DEFAULT_CONFIG
    return [args[0], "--config", str(config), *args[1:]]


def build_cli(args: list[str] | None = None, *, run: bool = True) -> LucidTrainCLI:
    """Construct (and by default run) the CLI on ``args`` (``sys.argv[1:]`` when ``None``).

    The trainer gets :func:`lucid_train.callbacks.default_callbacks`. Warning filters are changed only while it runs.
    """
    drop_lightning_tips()  # offline-first: no hosted-logger advert on every run (lucid_train.loggers)
    with warnings.catch_warnings():
        # the caller passes the (possibly completed) command line explicitly: Lightning's "args and sys.argv"
        # notice does not apply
        warnings.filterwarnings("ignore", message=r".*args parameter is intended to run from within Python.*")
        return LucidTrainCLI(
            YOLOLitModule,
            YOLODataModule,
            trainer_defaults={**TRAINER_DEFAULTS, "callbacks": default_callbacks()},
            seed_everything_default=0,
            auto_configure_optimizers=False,
            parser_class=LucidArgumentParser,
            save_config_callback=RunDirConfig,  # config.yaml in the run directory, not in a logger's folder
            save_config_kwargs={"overwrite": True, "save_to_log_dir": False},
            args=with_logger_save_dir(args) if args is not None else None,
            run=run,
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``lucid-train``. ``fit`` is implied when no subcommand is given.

    The command's process settings: glibc's malloc policy for training loops (:func:`tune_glibc_malloc`) and the
    filter of a Lightning deprecation notice nothing a user can act on.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        args = ["fit"]
    if args[0] == "predict":
        return predict_main(args[1:])
    tune_glibc_malloc()
    # Lightning 2.6's own use of a torch pytree API that torch deprecated
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")

    def body() -> int:
        refuse_unsafe_flags(args)
        completed = with_embedded_default(args)
        _check_config_files(completed)
        build_cli(completed)
        return 0

    return run_cli("lucid-train", body, extra_known=KNOWN_ERRORS)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
