"""One decoded image or video frame, as every source yields it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["Frame", "FrameKind"]

FrameKind = Literal["image", "video", "stream"]


@dataclass(frozen=True, eq=False)
class Frame:
    """A decoded frame: ``image`` is H×W×3 uint8 in **BGR** order (OpenCV's; what ``Results.orig_img`` holds).

    ``source``: the file path, URL or ``camera N`` it came from (None for an in-memory image); ``index``: the
    frame's index in its video or stream (0 for a still image); ``timestamp``: seconds from the start of the
    video or stream (None for a still image); ``item``: the position of its source in the list of sources;
    ``fps`` and ``frames``: the video's frame rate and frame count where known.
    """

    image: np.ndarray
    source: str | None
    index: int = 0
    timestamp: float | None = None
    kind: FrameKind = "image"
    item: int = 0
    fps: float | None = None
    frames: int | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """``(height, width)`` of the image."""
        return int(self.image.shape[0]), int(self.image.shape[1])
