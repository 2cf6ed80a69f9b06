"""One track's state: its filter mean and covariance, life-cycle state, ID and the detection it last matched.

Life cycle (ByteTrack, Zhang et al. 2022): a high-score detection nobody claims starts a ``NEW``-born track in state
``TRACKED`` but unconfirmed (no ID yet; in a video's first frame it is confirmed at once); matched in the next frame
it is confirmed and takes the next ID. A confirmed track that finds no detection becomes ``LOST`` and keeps its ID;
matched again within the buffer it is ``TRACKED`` once more, otherwise ``REMOVED``. An unconfirmed track that finds
no detection is removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
from numpy.typing import NDArray

__all__ = ["Track", "TrackState"]


class TrackState(IntEnum):
    """Where a track is in its life cycle."""

    TRACKED = 1
    LOST = 2
    REMOVED = 3


@dataclass(eq=False)
class Track:
    """A track; ``mean`` / ``cov`` are its Kalman state (8,) and (8, 8), in the tracker's filter's layout."""

    mean: NDArray[np.float64]
    cov: NDArray[np.float64]
    score: float
    label: int
    start_frame: int
    frame_id: int  # the last frame a detection updated it
    angle: float | None = None  # rotated boxes: the angle of the last detection matched (radians)
    state: TrackState = TrackState.TRACKED
    track_id: int = 0  # 0 until confirmed
    confirmed: bool = False
    hits: int = 1  # detections matched so far
    det_index: int = -1  # row of the current frame's detections that updated it (-1: none this frame)

    @property
    def duration(self) -> int:
        """Frames from the track's first to its last detection."""
        return self.frame_id - self.start_frame
