"""Errors raised by lucid-train, with one-paragraph messages naming what was expected (docs/TRAINING.md)."""

from __future__ import annotations


class TrainingSetupError(ValueError):
    """A dataset path, checkpoint or config does not fit the run (raised before any training step)."""


class NonFiniteLossError(RuntimeError):
    """The loss became NaN/inf; the run stops and the last good checkpoint (``last.ckpt``) is kept."""

    def __init__(self, *, step: int, epoch: int, batch_index: int, items: dict[str, float], paths: list[str]):
        self.step = step
        self.epoch = epoch
        self.batch_index = batch_index
        shown = ", ".join(paths[:4]) + (f" (+{len(paths) - 4} more)" if len(paths) > 4 else "")
        terms = ", ".join(f"{k}={v:.6g}" for k, v in items.items())
        super().__init__(
            f"non-finite training loss at optimizer step {step} (epoch {epoch}, batch {batch_index}); loss terms: "
            f"{terms}; images in the batch: {shown or 'unknown'}. Training stopped; the last good checkpoint "
            "(last.ckpt of the previous epoch) was kept. Lower --optimizer.lr0, check these labels, or resume with "
            "--ckpt_path pointing at last.ckpt."
        )


class ArtifactWriteError(RuntimeError):
    """A run-directory file (checkpoint, metrics) could not be written: a full disk or an unwritable folder."""

    def __init__(self, path: object, cause: BaseException) -> None:
        super().__init__(
            f"{path}: could not be written ({type(cause).__name__}: {cause}); the disk may be full or the folder "
            "read-only. Free space or choose another --trainer.default_root_dir; the previous file of this name, "
            "if any, is intact (writes are atomic), so the run can resume from it."
        )
