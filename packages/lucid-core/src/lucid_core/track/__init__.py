"""Multi-object tracking: ByteTrack and BoT-SORT over per-frame detections of any task.

``tracker = build_tracker("bytetrack")`` (or ``"botsort"``, a YAML path, a config), then per frame
``tracked = tracker.update(detections, frame=None)`` → :class:`TrackedDetections` (the rows that belong to a
confirmed track, their IDs and filtered boxes); ``tracker.reset()`` between videos. ``track(model, source)``
(:mod:`lucid_core.track.stream`) runs ``predict`` with a tracker step per frame and returns ``Results`` with
``boxes.id``. MOTChallenge text files are read and written by :mod:`lucid_core.track.mot_io`. Needs the
``tracking`` extra (scipy, pyyaml, OpenCV for BoT-SORT's camera-motion compensation):
``pip install "lucid-core[tracking]"``.
"""

from __future__ import annotations

from lucid_core.track.botsort import BotSortTracker
from lucid_core.track.bytetrack import ByteTracker
from lucid_core.track.config import (
    BotSortConfig,
    ByteTrackConfig,
    MissingExtraError,
    TrackerConfig,
    TrackerConfigError,
    load_tracker_config,
)
from lucid_core.track.registry import TRACKERS, build_tracker
from lucid_core.track.stream import StreamTracker, TrackerSpec, track
from lucid_core.track.tracked import TrackedDetections

__all__ = [
    "TRACKERS",
    "BotSortConfig",
    "BotSortTracker",
    "ByteTrackConfig",
    "ByteTracker",
    "MissingExtraError",
    "StreamTracker",
    "TrackedDetections",
    "TrackerConfig",
    "TrackerConfigError",
    "TrackerSpec",
    "build_tracker",
    "load_tracker_config",
    "track",
]
