"""Lightning callbacks of lucid-train: EMA and RNG bookkeeping, per-epoch dataset state, the run directory."""

from lucid_core.atomic import atomic_write_text
from lucid_train.callbacks.artifacts import RunArtifacts
from lucid_train.callbacks.ema import EMACallback
from lucid_train.callbacks.epoch_state import EpochStateCallback
from lucid_train.callbacks.rng import RNGStateCallback

__all__ = [
    "EMACallback",
    "EpochStateCallback",
    "RNGStateCallback",
    "RunArtifacts",
    "atomic_write_text",
    "default_callbacks",
]


def default_callbacks() -> list[object]:
    """The callbacks every lucid-train run uses (the CLI adds them; tests building a Trainer use them too).

    :class:`EMACallback` and :class:`RNGStateCallback` carry state a resumed run needs; without them a checkpoint
    resumes with a fresh EMA decay ramp and fresh random streams.
    """
    return [EMACallback(), RNGStateCallback(), EpochStateCallback(), RunArtifacts()]
