"""The run directory: checkpoints, metrics, the resolved optimiser, plots and the final summary line.

At the end of every training epoch (after validation) :class:`RunArtifacts`

1. closes the epoch on the module (mean loss items; the loss-schedule ``step_epoch``) so the checkpoint holds the
   state the next epoch starts from;
2. appends one row to ``metrics.csv`` and ``metrics.jsonl`` (``epoch``, ``train/<loss>``, ``val/<loss>``,
   ``lr/pg<i>``, ``metrics/mAP50``, ``metrics/mAP50-95``, ``epoch_seconds``), each file rewritten atomically; the
   validation losses come from the :class:`~lucid_train.callbacks.val_loss.ValidationLosses` this callback runs
   (``validation_losses``, on by default);
3. when mAP50-95 improved writes ``best.ckpt`` plus ``best.safetensors`` + ``best.json`` (the EMA model in the
   lucid-core format, replaced as one unit), then ``last.ckpt`` - every file through ``lucid_core.atomic`` (a
   temporary name and ``os.replace``; the ordinary ``0o666 & ~umask`` permissions, not ``mkstemp``'s ``0o600``).
   Best before last: a kill between them resumes from the previous ``last.ckpt``, which redoes the epoch.

At the set-up of ``fit`` an opt-in ``--loss.cls_weights auto|FILE`` becomes per-class weights
(:func:`lucid_train.recipe.resolve_class_weights`, from the training split's labels) before the module builds its
objective. At the start of ``fit`` :func:`repair_run_directory` removes what a killed run left (atomic-write
temporaries, an interrupted best export, a best export of another epoch than ``best.ckpt``), ``labels.png`` shows
the training split's label statistics (with ``validation_plots`` and lucid-viz), and ``excluded.txt`` lists every
image left out of the run (unreadable or corrupt), whose count is also in the summary line.

A run stopped by an exception (e.g. a non-finite loss) writes nothing more, so the last good ``last.ckpt`` stays.
At the end of ``fit`` it writes ``curves.png``/``val_predictions.png`` and, with ``validation_plots``, scores
``best`` once more on the val split for its validation artefacts (:mod:`lucid_train.eval.artifacts`:
``confusion_matrix.png``, ``PR_curve.png``, ``F1_curve.png``, ``P_curve.png``, ``R_curve.png``, ``per_class.csv``
/ ``.md``) when lucid-viz is installed, logs every figure to the loggers that take images
(:func:`lucid_train.loggers.log_figures`: TensorBoard, W&B, MLflow), and prints one summary line (``summary.txt``
also lists the figures, ``labels.png`` included).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn

from lucid_core.atomic import atomic_path, atomic_write_json, atomic_write_text
from lucid_core.checkpoint import load, remove_stale_temporaries, repair_checkpoint, save_model
from lucid_core.errors import CheckpointError
from lucid_data.stats import LabelStatistics, label_statistics
from lucid_train.callbacks.val_loss import VAL_PREFIX, ValidationLosses
from lucid_train.errors import ArtifactWriteError
from lucid_train.eval.accuracy import AccuracyScorer
from lucid_train.eval.artifacts import write_artifacts
from lucid_train.eval.coco_gt import CocoGroundTruth
from lucid_train.eval.runner import ModelScorer
from lucid_train.loggers import log_figures
from lucid_train.model_setup import keypoint_sigmas
from lucid_train.recipe import resolve_class_weights
from lucid_train.scoring import validation_paths

LABELS_FIGURE = "labels.png"


def run_dir_of(trainer: pl.Trainer) -> Path:
    """The run directory: ``trainer.default_root_dir``."""
    return Path(trainer.default_root_dir)


class RunArtifacts(pl.Callback):
    """Checkpoints (last + best by mAP50-95), metrics CSV/JSONL, resolved optimiser, plots and summary line."""

    def __init__(
        self, monitor: str = "metrics/fitness", validation_plots: bool = True, validation_losses: bool = True
    ) -> None:
        # metrics/fitness: the task table's fitness (detect/obb mAP50-95; segment box + mask, pose box + pose)
        self.monitor = monitor
        self.validation_plots = validation_plots
        # the val/<loss> columns; run from this callback's hooks (lucid_train.callbacks.val_loss)
        self.val_losses = ValidationLosses() if validation_losses else None
        self._train_labels: LabelStatistics | None = None
        self._start_figures: list[Path] = []
        self.rows: list[dict[str, Any]] = []
        self.best_score = -math.inf
        self.best_epoch = -1
        self._epoch_started = 0.0
        self._fit_started = 0.0

    # ------------------------------------------------------------------ state (resume keeps the history)
    def state_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "best_score": self.best_score, "best_epoch": self.best_epoch}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.rows = list(state_dict.get("rows", []))
        self.best_score = float(state_dict.get("best_score", -math.inf))
        self.best_epoch = int(state_dict.get("best_epoch", -1))

    def _adopt_best_checkpoint(self, run_dir: Path) -> None:
        """Take ``best.ckpt``'s best epoch and score when they are newer than the resumed state's.

        ``best.ckpt`` and the best export are written before ``last.ckpt``, so a kill between them leaves a best of
        an epoch the resumed state (from the previous ``last.ckpt``) has not seen. That epoch is trained again, but
        with other settings (e.g. a new ``--trainer.max_epochs``) it may score lower and would leave ``best`` and
        the state disagreeing; adopting the checkpoint's record keeps them equal.
        """
        path = run_dir / "best.ckpt"
        if not path.is_file():
            return
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # unreadable: repair_run_directory reports it
            return
        for key, state in checkpoint.get("callbacks", {}).items():
            if key.startswith(type(self).__name__) and isinstance(state, dict):
                epoch, score = int(state.get("best_epoch", -1)), float(state.get("best_score", -math.inf))
                if epoch != self.best_epoch and score > self.best_score:
                    self.best_epoch, self.best_score = epoch, score

    # ------------------------------------------------------------------ hooks
    def train_labels(self, trainer: pl.Trainer) -> LabelStatistics | None:
        """Label statistics of the training split (computed once per fit); ``None`` without a data module."""
        if self._train_labels is None:
            datamodule = getattr(trainer, "datamodule", None)
            source = getattr(datamodule, "source", None)
            if source is None or not hasattr(datamodule, "train_split"):
                return None
            self._train_labels = label_statistics(source(datamodule.train_split))  # type: ignore[union-attr]
        return self._train_labels

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """Before the module's own ``setup`` (which builds the fit's objective): ``--loss.cls_weights auto|FILE``
        becomes one weight per class (:func:`lucid_train.recipe.resolve_class_weights`)."""
        self._train_labels, self._start_figures = None, []
        config = getattr(pl_module, "loss_config", None)
        if stage != "fit" or config is None or not config.needs_labels():
            return
        stats = self.train_labels(trainer) if config.cls_weights == "auto" else None
        module: Any = pl_module
        counts = None if stats is None else stats.class_counts
        resolved = resolve_class_weights(config, num_classes=int(module.num_classes), class_counts=counts)
        module.loss_config = resolved
        shown = ", ".join(f"{w:.4g}" for w in resolved.cls_weights or [])
        rank_zero_info(f"lucid-train: loss.cls_weights {config.cls_weights}: {shown}")

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._fit_started = time.perf_counter()
        if trainer.is_global_zero:
            repair_run_directory(run_dir_of(trainer), pl_module)
        self._adopt_best_checkpoint(run_dir_of(trainer))
        resolved = getattr(pl_module, "resolved", None)
        if trainer.is_global_zero and resolved is not None:
            atomic_write_json(run_dir_of(trainer) / "optimizer.json", resolved.as_dict())
        if trainer.is_global_zero and self.validation_plots:
            self._start_figures = self._write_labels(trainer, run_dir_of(trainer))
            log_figures(trainer.loggers, self._start_figures, int(trainer.current_epoch))

    # validation losses (lucid_train.callbacks.val_loss), run from this callback
    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.val_losses is not None:
            self.val_losses.on_validation_epoch_start(trainer, pl_module)

    def on_validation_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self.val_losses is not None:
            self.val_losses.on_validation_batch_start(trainer, pl_module, batch, batch_idx, dataloader_idx)

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self.val_losses is not None:
            self.val_losses.on_validation_batch_end(
                trainer, pl_module, outputs, batch, batch_idx, dataloader_idx
            )

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.val_losses is not None:
            self.val_losses.on_validation_epoch_end(trainer, pl_module)

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        if self.val_losses is not None:
            self.val_losses.on_exception(trainer, pl_module, exception)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero:
            self._write_excluded(trainer)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_started = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        close = getattr(pl_module, "close_epoch", None)
        if close is not None:
            close()
        epoch = int(trainer.current_epoch)
        row: dict[str, Any] = {"epoch": epoch}
        for name, value in getattr(pl_module, "train_epoch_items", {}).items():
            row[f"train/{name}"] = value
        if self.val_losses is not None:
            row.update({f"{VAL_PREFIX}{name}": value for name, value in self.val_losses.means.items()})
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        if optimizer is not None:
            for i, group in enumerate(optimizer.param_groups):
                row[f"lr/pg{i}"] = float(group["lr"])
        val = dict(getattr(pl_module, "val_metrics", {}))
        row.update(val)
        row["epoch_seconds"] = round(time.perf_counter() - self._epoch_started, 3)
        self.rows.append(row)
        run_dir = run_dir_of(trainer)
        score = val.get(self.monitor)
        improved = score is not None and score > self.best_score
        if improved:
            self.best_score = float(score)  # type: ignore[arg-type]
            self.best_epoch = epoch
        if trainer.is_global_zero:
            self._write_metrics(run_dir)
        if (
            improved
        ):  # best before last: a crash between them resumes from the previous last.ckpt and redoes both
            self._save_checkpoint(trainer, run_dir / "best.ckpt")
            if trainer.is_global_zero and hasattr(pl_module, "export_ema"):
                pl_module.export_ema(run_dir / "best.safetensors")  # type: ignore[operator]
        self._save_checkpoint(trainer, run_dir / "last.ckpt")
        if trainer.is_global_zero:
            shown = ", ".join(f"{k}={v:.4g}" for k, v in row.items() if k != "epoch" and isinstance(v, float))
            rank_zero_info(f"epoch {epoch}: {shown}")

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        run_dir = run_dir_of(trainer)
        figures = [*self._start_figures, *self._write_plots(trainer, pl_module, run_dir)]
        excluded = self._write_excluded(trainer)
        seconds = time.perf_counter() - self._fit_started
        last = self.rows[-1] if self.rows else {}
        best = next((r for r in self.rows if r["epoch"] == self.best_epoch), {})
        # the task's own figures beside the box ones: metrics/mask/..., metrics/pose/..., yolo26's metrics/e2e/...
        task_keys = sorted(
            k
            for k in last
            if k.startswith("metrics/") and k.endswith("/mAP50-95") and k != "metrics/mAP50-95"
        )
        task_part = "".join(f" {k.removeprefix('metrics/')} {last[k]:.4f}" for k in task_keys)
        best_part = (
            f"best {self.monitor.removeprefix('metrics/')} {best.get(self.monitor, float('nan')):.4f}"
            if self.monitor != "metrics/mAP50-95"
            else f"best mAP50-95 {best.get('metrics/mAP50-95', float('nan')):.4f}"
        )
        trained = len(self.rows)
        epochs_part = f"{trained} epoch{'' if trained == 1 else 's'} in {seconds:.1f} s"
        max_epochs = trainer.max_epochs
        if (
            trainer.should_stop and last and max_epochs is not None and int(last["epoch"]) + 1 < max_epochs
        ):  # a callback (EarlyStopping, the reference's `patience`) or --trainer.max_time ended the run
            epochs_part += f" (stopped after epoch {int(last['epoch'])} of max_epochs {max_epochs})"
        if "metrics/mAP50-95" in last or not last:
            final = (
                f"final mAP50-95 {last.get('metrics/mAP50-95', float('nan')):.4f} "
                f"mAP50 {last.get('metrics/mAP50', float('nan')):.4f}{task_part}"
            )
        else:  # an image-level task's metrics (accuracy_top1, accuracy_top5)
            shown = sorted(k for k in last if k.startswith("metrics/") and k != "metrics/fitness")
            final = "final " + " ".join(f"{k.removeprefix('metrics/')} {last[k]:.4f}" for k in shown)
        summary = (
            f"lucid-train: {epochs_part}; "
            f"{final}; "
            f"{best_part} at epoch {self.best_epoch}; "
            f"{len(excluded)} image(s) excluded{' (excluded.txt)' if excluded else ''}; "
            f"run {run_dir} (best.safetensors, last.ckpt, metrics.csv)"
        )
        listed = f"figures: {', '.join(sorted(p.name for p in figures))}\n" if figures else ""
        atomic_write_text(run_dir / "summary.txt", summary + "\n" + listed)
        print(summary, flush=True)

    # ------------------------------------------------------------------ writers
    @staticmethod
    def _write_excluded(trainer: pl.Trainer) -> list[str]:
        """``excluded.txt``: every image left out of the run (``path: reason``), when there is one."""
        datamodule = getattr(trainer, "datamodule", None)
        listing = getattr(datamodule, "excluded_images", None)
        excluded: list[str] = list(listing()) if callable(listing) else []
        if excluded:
            atomic_write_text(run_dir_of(trainer) / "excluded.txt", "".join(f"{line}\n" for line in excluded))
            rank_zero_warn(f"{len(excluded)} image(s) excluded from the run; listed in excluded.txt")
        return excluded

    def _write_metrics(self, run_dir: Path) -> None:
        columns: list[str] = []
        for row in self.rows:
            columns += [k for k in row if k not in columns]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write_text(run_dir / "metrics.csv", buffer.getvalue())
        atomic_write_text(run_dir / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in self.rows))

    @staticmethod
    def _save_checkpoint(trainer: pl.Trainer, path: Path) -> None:
        """``trainer.save_checkpoint`` through ``lucid_core.atomic.atomic_path`` (temporary name, ``os.replace``).

        Every rank calls ``save_checkpoint`` (it is collective: a barrier); only rank 0 writes, so only rank 0
        takes a temporary file - another rank's empty temporary must never replace the checkpoint.
        """
        if not trainer.is_global_zero:
            trainer.save_checkpoint(path, weights_only=False)  # writes nothing off rank 0
            return
        try:
            with atomic_path(path) as tmp:
                trainer.save_checkpoint(
                    tmp, weights_only=False
                )  # full state: optimizer, loops, callbacks (resume)
        except (OSError, RuntimeError) as exc:  # torch reports a failed write as RuntimeError
            if isinstance(exc, RuntimeError) and "writ" not in str(exc).lower():
                raise
            raise ArtifactWriteError(path, exc) from exc

    def _write_labels(self, trainer: pl.Trainer, run_dir: Path) -> list[Path]:
        """``labels.png``: the training split's class histogram, box centres and sizes, instances per image (with
        lucid-viz; ``[]`` without it or without a data module)."""
        try:  # the optional lucid-viz (the lucid-train[viz] extra)
            from lucid_viz.eval_figures import plot_labels
            from lucid_viz.figures import save_figure
        except ImportError:
            return []
        try:
            stats = self.train_labels(trainer)
            if stats is None:
                return []
            title = f"training labels ({getattr(trainer.datamodule, 'train_split', 'train')})"  # type: ignore[attr-defined]
            return [save_figure(plot_labels(stats, title=title), run_dir / LABELS_FIGURE)]
        except Exception as exc:  # plotting must never fail a run
            rank_zero_warn(f"could not write {run_dir / LABELS_FIGURE}: {type(exc).__name__}: {exc}")
            return []

    def _write_plots(self, trainer: pl.Trainer, pl_module: pl.LightningModule, run_dir: Path) -> list[Path]:
        """The end-of-fit figures (PNG paths written; none without lucid-viz), logged to image-taking loggers."""
        try:  # the optional lucid-viz (the lucid-train[viz] extra)
            from lucid_viz.training import write_fit_plots
        except ImportError:
            return []
        written: list[Path] = []
        try:
            images, predictions, targets = _sample_predictions(trainer, pl_module)
            written += write_fit_plots(
                run_dir,
                images,
                predictions,
                targets,
                getattr(pl_module, "task", "detect"),
                getattr(pl_module, "names", {}),
            ).values()
        except Exception as exc:  # plotting must never fail a finished run
            rank_zero_warn(f"could not write plots to {run_dir}: {type(exc).__name__}: {exc}")
        if self.validation_plots:
            try:
                written += [
                    p for p in best_validation_artifacts(trainer, pl_module, run_dir) if p.suffix == ".png"
                ]
            except Exception as exc:  # plotting must never fail a finished run
                rank_zero_warn(f"could not write validation plots to {run_dir}: {type(exc).__name__}: {exc}")
        log_figures(trainer.loggers, written, int(trainer.current_epoch))
        return written


def best_validation_artifacts(
    trainer: pl.Trainer, pl_module: pl.LightningModule, run_dir: Path
) -> list[Path]:
    """Score ``best`` on the val split as validation does (primary decode path) and write its validation
    artefacts into ``run_dir`` (``labels.png`` is the training split's, written at the start of the fit); returns
    the files written."""
    datamodule = getattr(trainer, "datamodule", None)
    if datamodule is None or not (run_dir / "best.safetensors").is_file():
        return []
    module: Any = pl_module
    model = load(run_dir / "best", device=module.device).model
    if module.task_spec.image_level:  # a classifier: accuracy, per-class table and confusion matrix
        accuracy = AccuracyScorer(task=module.task, num_classes=module.num_classes, names=module.names)
        for batch in datamodule.val_dataloader():
            accuracy.update(model, batch)
        written = write_artifacts(accuracy.compute().validation_artifacts(None), run_dir)
        return list(written.values())
    scorer = ModelScorer(
        CocoGroundTruth.from_source(datamodule.val_source()),
        task=module.task,
        num_classes=module.num_classes,
        decode=validation_paths(model, module.val_decode)[:1],
        conf=module.val_conf,
        iou=module.val_iou,
        max_det=module.max_det,
        multi_label=True,
        kpt_sigmas=keypoint_sigmas(module.task_spec, module.model, module.task_options),
    )
    for batch in datamodule.val_dataloader():
        scorer.update(model, batch)
    result = scorer.compute()
    artifacts = replace(scorer.artifacts(result), labels=None)
    return list(write_artifacts(artifacts, run_dir).values())


def log_images(trainer: pl.Trainer, paths: list[Path]) -> None:
    """Log each figure to the trainer's loggers that take images (:func:`lucid_train.loggers.log_figures`)."""
    log_figures(trainer.loggers, paths, int(trainer.current_epoch))


def repair_run_directory(run_dir: Path, pl_module: pl.LightningModule | None = None) -> list[str]:
    """Undo what a killed run left behind in ``run_dir`` (its own files only); returns one note per repair.

    - atomic-write temporaries (``.<name>.XXXXXXXX.tmp``) are removed;
    - an interrupted ``best`` export is finished or rolled back (:func:`lucid_core.checkpoint.repair_checkpoint`);
    - a ``best.safetensors``/``best.json`` that is missing, unloadable or of another epoch than ``best.ckpt`` (a
      kill between the two writes) is exported again from ``best.ckpt``'s EMA weights (needs ``pl_module``).
    """
    notes = [f"removed stale temporary {p.name}" for p in remove_stale_temporaries(run_dir)]
    best = run_dir / "best"
    done = repair_checkpoint(best)
    if done != "ok":
        notes.append(f"best export: {done}")
    best_ckpt = run_dir / "best.ckpt"
    ema_model = getattr(pl_module, "ema_model", None)
    if best_ckpt.is_file() and ema_model is not None:
        try:
            exported_epoch = int(load(best).extra.get("epoch", -1))
        except CheckpointError:
            exported_epoch = None
        try:
            checkpoint = torch.load(best_ckpt, map_location="cpu", weights_only=True)
        except Exception as exc:  # a truncated best.ckpt cannot be the source of a repair
            notes.append(f"best.ckpt unreadable ({type(exc).__name__}); best export left as is")
            checkpoint = None
        if checkpoint is not None and exported_epoch != int(checkpoint.get("epoch", -1)):
            prefix = "ema_model."
            state = {k[len(prefix) :]: v for k, v in checkpoint["state_dict"].items() if k.startswith(prefix)}
            model = copy.deepcopy(ema_model).cpu()
            model.load_state_dict(state)
            save_model(
                model,
                best,
                names=getattr(pl_module, "names", None),
                imgsz=int(getattr(pl_module, "imgsz", 640)),
                extra={"epoch": int(checkpoint["epoch"])},
            )
            notes.append(f"best export re-written from best.ckpt (epoch {int(checkpoint['epoch'])})")
    for note in notes:
        rank_zero_info(f"lucid-train: {run_dir}: {note}")
    return notes


def _sample_predictions(
    trainer: pl.Trainer, pl_module: pl.LightningModule, count: int = 8
) -> tuple[Any, Any, Any]:
    """First ``count`` validation images (HWC uint8 numpy), their EMA-model detections and targets."""
    datamodule = trainer.datamodule  # type: ignore[attr-defined]
    batch = next(iter(datamodule.val_dataloader()))
    images = batch["images"][:count]
    detections = pl_module.predict_step({"images": images}, 0)
    numpy_images = [img.permute(1, 2, 0).cpu().numpy() for img in images]
    return (
        numpy_images,
        [d.to("cpu") if hasattr(d, "to") else d for d in detections],
        batch["targets"][:count],
    )
