"""Lightning callbacks of lucid-train: per-epoch dataset state and the run directory's artifacts."""

from lucid_core.atomic import atomic_write_text
from lucid_train.callbacks.artifacts import RunArtifacts
from lucid_train.callbacks.epoch_state import EpochStateCallback

__all__ = ["EpochStateCallback", "RunArtifacts", "atomic_write_text", "default_callbacks"]


def default_callbacks() -> list[object]:
    """The callbacks every lucid-train run uses (the CLI adds them; tests building a Trainer use them too)."""
    return [EpochStateCallback(), RunArtifacts()]
