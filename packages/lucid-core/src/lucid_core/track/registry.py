"""Trackers by name: ``build_tracker("bytetrack" | "botsort" | path.yaml | config)``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from lucid_core.track.botsort import BotSortTracker
from lucid_core.track.bytetrack import ByteTracker
from lucid_core.track.config import BotSortConfig, ByteTrackConfig, load_tracker_config

__all__ = ["TRACKERS", "build_tracker"]

#: tracker_type → tracker class.
TRACKERS: dict[str, type[ByteTracker]] = {"bytetrack": ByteTracker, "botsort": BotSortTracker}


def build_tracker(
    tracker: str | os.PathLike[str] | Mapping[str, Any] | ByteTrackConfig = "bytetrack",
    *,
    config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    **overrides: Any,
) -> ByteTracker:
    """A fresh tracker: ``tracker`` and ``config`` / ``overrides`` as in :func:`load_tracker_config`."""
    settings = load_tracker_config(tracker, config=config, **overrides)
    if isinstance(settings, BotSortConfig):
        return BotSortTracker(settings)
    return ByteTracker(settings)
