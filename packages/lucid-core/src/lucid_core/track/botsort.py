"""BoT-SORT (Aharon et al., "BoT-SORT: Robust Associations Multi-Pedestrian Tracking", 2022), without appearance.

ByteTrack's association (:mod:`lucid_core.track.bytetrack`) with BoT-SORT's two motion changes: the Kalman state
holds the box width and height directly (:class:`~lucid_core.track.kalman.KalmanXYWH`, noise scaled by each), and
when ``update`` gets the frame, the predicted tracks are moved by the camera's motion between the previous frame
and this one (sparse optical flow, :class:`~lucid_core.track.gmc.SparseFlowMotion`; ``gmc_method: none`` or
``frame=None`` skips it). IoU and the detection score are fused as in ByteTrack (``fuse_score``).
"""

from __future__ import annotations

from typing import Any

from lucid_core.track.bytetrack import Array, ByteTracker
from lucid_core.track.config import BotSortConfig
from lucid_core.track.gmc import SparseFlowMotion
from lucid_core.track.kalman import KalmanFilter, KalmanXYWH
from lucid_core.track.tracked import FrameDetections

__all__ = ["BotSortTracker"]


class BotSortTracker(ByteTracker):
    """BoT-SORT over one video; ``config`` defaults to ``BotSortConfig()``."""

    config: BotSortConfig

    def __init__(self, config: BotSortConfig | None = None) -> None:
        cfg = config if config is not None else BotSortConfig()
        self.motion = SparseFlowMotion(cfg.gmc_downscale) if cfg.gmc_method == "sparseOptFlow" else None
        super().__init__(cfg)

    def _make_filter(self) -> KalmanFilter:
        return KalmanXYWH()

    def reset(self) -> None:
        """Forget every track, the ID counter and the previous frame of the motion model."""
        super().reset()
        if self.motion is not None:
            self.motion.reset()

    def _camera_motion(self, frame: Any, dets: FrameDetections) -> Array | None:
        if self.motion is None or frame is None:
            return None
        return self.motion.apply(frame)
