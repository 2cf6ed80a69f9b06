"""Lightning loggers of a lucid-train run: the defaults (:func:`default_loggers`), ``--trainer.logger CLASS``
without a ``save_dir`` (:func:`with_logger_save_dir`), ``config.yaml`` in the run directory whatever the loggers
(:class:`RunDirConfig`), Lightning's hosted-logger tip dropped (:func:`drop_lightning_tips`), and the run's figures
logged to every logger that takes images (:func:`log_figures`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger

from lucid_data.imageio import load_image

#: placeholder ``save_dir`` replaced by the run directory once it is known (before instantiation).
RUN_DIR_TOKEN = "<lucid-run-dir>"
#: sub-folders of the default loggers inside the run directory.
CSV_LOGS = "csv"
TENSORBOARD_LOGS = "tensorboard"


#: the tag prefix of a figure logged as an image (``plots/confusion_matrix``)
FIGURE_TAG_PREFIX = "plots/"


#: the logger Lightning's ``rank_zero_info`` writes to (lightning.pytorch.utilities.rank_zero).
LIGHTNING_RANK_ZERO_LOGGER = "lightning.pytorch.utilities.rank_zero"
#: the start of Lightning's promotional notices (the hosted-logger tip), the only records dropped.
LIGHTNING_TIP_PREFIX = "💡 Tip:"


class _DropLightningTips(logging.Filter):
    """Drops Lightning's "💡 Tip: ..." promotional records, passes every other record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(LIGHTNING_TIP_PREFIX)


def drop_lightning_tips() -> None:
    """Install :class:`_DropLightningTips` on Lightning's rank-zero logger (idempotent).

    Lightning prints a "💡 Tip" advertising its hosted experiment logger on every run without one; lucid-train is
    offline-first, so the CLI and the Python facade drop that one notice and keep every other message.
    """
    log = logging.getLogger(LIGHTNING_RANK_ZERO_LOGGER)
    if not any(isinstance(f, _DropLightningTips) for f in log.filters):
        log.addFilter(_DropLightningTips())


def tensorboard_available() -> bool:
    """Whether Lightning's ``TensorBoardLogger`` can run (``tensorboard`` or ``tensorboardX`` installed)."""
    return any(importlib.util.find_spec(name) is not None for name in ("tensorboard", "tensorboardX"))


def default_loggers(run_dir: str | Path) -> list[Logger]:
    """What a run logs to when no ``--trainer.logger`` is given (``--trainer.logger false`` logs nothing).

    Lightning's ``CSVLogger`` (``RUN/csv/version_N/metrics.csv``) plus its ``TensorBoardLogger``
    (``RUN/tensorboard/version_N/events.*``) when :func:`tensorboard_available` (the ``lucid-train[tensorboard]``
    extra). Their sub-folders never hold ``RUN/metrics.csv`` / ``RUN/metrics.jsonl``, which
    :class:`~lucid_train.callbacks.RunArtifacts` writes either way.
    """
    loggers: list[Logger] = [CSVLogger(str(run_dir), name=CSV_LOGS)]
    if tensorboard_available():
        loggers.append(TensorBoardLogger(str(run_dir), name=TENSORBOARD_LOGS))
    return loggers


def log_figures(loggers: Sequence[Logger], paths: Sequence[Path], step: int) -> int:
    """Log every figure file of ``paths`` (PNG) to each logger of ``loggers`` that takes images, tag
    ``plots/<file stem>`` at ``step``; returns the number of (logger, figure) pairs logged.

    Recognised by what they offer, so no logger package is imported here: TensorBoard's ``experiment.add_image``
    (Lightning's ``TensorBoardLogger``: the image as (H, W, 3) uint8), a logger's own ``log_image(key, images, step)``
    (Lightning's ``WandbLogger``: the file) and MLflow's ``experiment.log_artifact(run_id, path, "plots")``
    (Lightning's ``MLFlowLogger``: the file as an artifact). Other loggers (CSV) take none.
    """
    logged = 0
    for logger in loggers:
        experiment = getattr(logger, "experiment", None)
        add_image = getattr(experiment, "add_image", None)
        log_image = getattr(logger, "log_image", None)
        log_artifact = getattr(experiment, "log_artifact", None)
        run_id = getattr(logger, "run_id", None)
        for path in paths:
            tag = f"{FIGURE_TAG_PREFIX}{Path(path).stem}"
            if callable(add_image):
                add_image(tag, load_image(path), step, dataformats="HWC")
            elif callable(log_image):
                log_image(key=tag, images=[str(path)], step=step)
            elif callable(log_artifact) and run_id is not None:
                log_artifact(run_id, str(path), FIGURE_TAG_PREFIX.rstrip("/"))
            else:
                break
            logged += 1
    return logged


def _logger_class(value: str) -> type[Any] | None:
    """The class a ``--trainer.logger`` value names (class path, or a name in ``lightning.pytorch.loggers``)."""
    module_name, _, name = value.rpartition(".")
    try:
        module = importlib.import_module(module_name or "lightning.pytorch.loggers")
    except ImportError:
        return None
    cls = getattr(module, name, None)
    return cls if isinstance(cls, type) else None


def _takes_save_dir(value: str) -> bool:
    cls = _logger_class(value)
    if cls is None:
        return False
    try:
        return "save_dir" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtin signatures
        return False


def with_logger_save_dir(args: list[str]) -> list[str]:
    """``args`` with ``--trainer.logger.save_dir RUN_DIR_TOKEN`` after a ``--trainer.logger CLASS`` that has none.

    Lightning requires ``save_dir`` for its CSV/TensorBoard loggers; the token is added for every logger (class path
    or a name in ``lightning.pytorch.loggers``) whose constructor takes one, and :func:`resolve_logger_dirs`
    replaces it by the run directory once that is known.
    """
    if any(a.startswith(("--trainer.logger.save_dir", "--trainer.logger.init_args.save_dir")) for a in args):
        return args
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        value: str | None = None
        if arg == "--trainer.logger" and i + 1 < len(args):
            out += [arg, args[i + 1]]
            value = args[i + 1]
            i += 2
        else:
            out.append(arg)
            if arg.startswith("--trainer.logger="):
                value = arg.split("=", 1)[1]
            i += 1
        if (
            value is not None
            and value.lower() not in ("true", "false", "null", "none")
            and _takes_save_dir(value)
        ):
            out += ["--trainer.logger.save_dir", RUN_DIR_TOKEN]
    return out


def resolve_logger_dirs(logger: Any, run_dir: Path) -> None:
    """Replace :data:`RUN_DIR_TOKEN` in the parsed ``trainer.logger`` (one logger or a list) by ``run_dir``."""
    for entry in logger if isinstance(logger, list) else [logger]:
        init_args = getattr(entry, "init_args", None)
        if init_args is not None and getattr(init_args, "save_dir", None) == RUN_DIR_TOKEN:
            init_args.save_dir = str(run_dir)


class RunDirConfig(SaveConfigCallback):
    """``config.yaml`` in ``trainer.default_root_dir`` (the run directory), not in the first logger's folder
    (LightningCLI's ``SaveConfigCallback`` writes into ``trainer.log_dir``), where ``lucid-train fit --config
    RUN/config.yaml`` expects it.

    Built with ``save_to_log_dir=False``; Lightning calls :meth:`save_config` on rank zero only.
    """

    def save_config(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        run_dir = Path(trainer.default_root_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        # None values are kept, as Lightning's own writer does (jsonargparse 4.49 renamed skip_none skip_unset)
        target = str(run_dir / self.config_filename)
        options = {"overwrite": self.overwrite, "multifile": self.multifile}
        try:
            self.parser.save(self.config, target, skip_unset=False, **options)
        except (TypeError, ValueError) as exc:  # jsonargparse < 4.49
            if "skip_unset" not in str(exc):
                raise
            self.parser.save(self.config, target, skip_none=False, **options)
