"""ByteTrack (Zhang et al., "ByteTrack: Multi-Object Tracking by Associating Every Detection Box", ECCV 2022).

Per frame (the paper's Algorithm 1): confirmed and lost tracks are predicted one frame ahead by their Kalman
filters (a track born in the previous frame is not: its velocity is still unknown); then

1. confirmed and lost tracks are matched to the *high*-score detections (score ≥ ``track_high_thresh``) by IoU
   (fused with the score: ``1 − IoU·score``), up to ``match_thresh``;
2. the tracks left over (lost ones included) are matched to the *low*-score detections
   (``track_low_thresh`` < score < high) by IoU alone, up to ``low_match_thresh``: occluded objects keep their
   track through weak detections, and unmatched low detections are discarded as background;
3. unconfirmed tracks (born in the previous frame) are matched to the high detections left; an unconfirmed track
   left over is removed, a confirmed one becomes lost;
4. high detections still unmatched with score ≥ ``new_track_thresh`` start tracks; lost tracks unseen for more
   than ``track_buffer`` frames (at 30 fps) are removed; a tracked and a lost track that overlap almost entirely
   are one object, and the one observed for fewer frames is dropped.

:class:`ByteTracker` is usable on its own: ``update(detections, frame=None)`` per frame, ``reset()`` between
videos. Rotated boxes (``Detections.rboxes``) are associated by exact rotated-box IoU; the filter runs on the
box's centre and size, the angle follows the last matched detection.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from lucid_core.results import Detections
from lucid_core.track.config import ByteTrackConfig
from lucid_core.track.kalman import KalmanFilter, KalmanXYAH
from lucid_core.track.matching import box_iou, fuse_score, match, require_solver, rotated_iou
from lucid_core.track.tracked import FrameDetections, TrackedDetections, as_frame, select
from lucid_core.track.tracks import Track, TrackState

__all__ = ["ByteTracker"]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _xywh_to_xyxy(xywh: Array) -> Array:
    half = xywh[:, 2:4] / 2
    return np.concatenate([xywh[:, :2] - half, xywh[:, :2] + half], axis=1)


def _angles(tracks: list[Track]) -> Array:
    """The tracks' angles (0 for a track started from an axis-aligned box)."""
    return np.array([0.0 if t.angle is None else t.angle for t in tracks], dtype=np.float64)


def _align_rboxes(xywh: Array, angles: Array, reference: Array) -> tuple[Array, Array]:
    """Rotated boxes re-expressed with the angle nearest ``reference`` (θ ± π/2 swaps w and h; same box)."""
    turn = np.round((reference - angles) / (math.pi / 2)).astype(np.int64)
    swap = (turn % 2) != 0
    out = xywh.copy()
    out[swap, 2], out[swap, 3] = xywh[swap, 3], xywh[swap, 2]
    return out, angles + turn * (math.pi / 2)


class ByteTracker:
    """ByteTrack over one video; see the module docstring. ``config`` defaults to ``ByteTrackConfig()``."""

    def __init__(self, config: ByteTrackConfig | None = None) -> None:
        require_solver()
        self.config = config if config is not None else ByteTrackConfig()
        self.kf: KalmanFilter = self._make_filter()
        self.reset()

    def _make_filter(self) -> KalmanFilter:
        return KalmanXYAH()

    def reset(self) -> None:
        """Forget every track and restart IDs at 1 and the frame count at 0 (call it between videos)."""
        self.tracked: list[Track] = []
        self.lost: list[Track] = []
        self.frame_id = 0
        self.next_id = 1
        self.dropped_total = 0

    # ------------------------------------------------------------------------------------------------ hooks
    def _camera_motion(self, frame: Any, dets: FrameDetections) -> Array | None:
        """A 2x3 affine taking the previous frame to this one, or None (ByteTrack: no camera motion)."""
        return None

    # -------------------------------------------------------------------------------------------- internals
    def _shapes(self, means: Array, angles: Array | None) -> Array:
        """Track boxes for IoU: xyxy ``(N, 4)``, or rotated ``(N, 5)`` with the tracks' angles."""
        xywh = self.kf.to_xywh(means[:, :4])
        if angles is None:
            return _xywh_to_xyxy(xywh)
        return np.concatenate([xywh, angles[:, None]], axis=1)

    def _associate(
        self,
        shapes: Array,
        tracks: IntArray,
        dets: FrameDetections,
        rows: IntArray,
        thresh: float,
        fuse: bool,
    ) -> tuple[IntArray, IntArray, IntArray]:
        """Match tracks ``tracks`` (rows of ``shapes``) to detection rows ``rows``.

        Returns ``(matched [track, row] pairs (K, 2), unmatched tracks, unmatched rows)``.
        """
        if len(tracks) == 0 or len(rows) == 0:
            return np.zeros((0, 2), dtype=np.int64), tracks, rows
        if dets.angles is None:
            iou = box_iou(shapes[tracks], dets.xyxy[rows])
        else:
            iou = rotated_iou(shapes[tracks], np.concatenate([dets.xywh[rows], dets.angles[rows, None]], 1))
        cost = fuse_score(1.0 - iou, dets.scores[rows]) if fuse else 1.0 - iou
        pairs, free_tracks, free_cols = match(cost, thresh)
        return (
            np.stack([tracks[pairs[:, 0]], rows[pairs[:, 1]]], axis=1),
            tracks[free_tracks],
            rows[free_cols],
        )

    def _start(self, dets: FrameDetections, rows: IntArray) -> list[Track]:
        if len(rows) == 0:
            return []
        means, covs = self.kf.initiate(self.kf.to_measurement(dets.xywh[rows]))
        return [
            Track(
                mean=means[i],
                cov=covs[i],
                score=float(dets.scores[r]),
                label=int(dets.labels[r]),
                start_frame=self.frame_id,
                frame_id=self.frame_id,
                angle=None if dets.angles is None else float(dets.angles[r]),
                confirmed=self.frame_id == 1,
                det_index=int(r),
            )
            for i, r in enumerate(rows)
        ]

    def _drop_duplicates(self) -> None:
        """A tracked and a lost track overlapping with ``1 − IoU < duplicate_thresh``: drop the one seen shorter."""
        if not self.tracked or not self.lost:
            return
        rotated = any(t.angle is not None for t in self.tracked + self.lost)

        def shapes(tracks: list[Track]) -> Array:
            angles = _angles(tracks) if rotated else None
            return self._shapes(np.stack([t.mean for t in tracks]), angles)

        a, b = shapes(self.tracked), shapes(self.lost)
        iou = rotated_iou(a, b) if rotated else box_iou(a, b)
        drop_tracked: set[int] = set()
        drop_lost: set[int] = set()
        for i, j in zip(*np.nonzero(1.0 - iou < self.config.duplicate_thresh)):
            if self.tracked[i].duration > self.lost[j].duration:
                drop_lost.add(int(j))
                self.lost[j].state = TrackState.REMOVED
            else:
                drop_tracked.add(int(i))
                self.tracked[i].state = TrackState.REMOVED
        self.tracked = [t for i, t in enumerate(self.tracked) if i not in drop_tracked]
        self.lost = [t for j, t in enumerate(self.lost) if j not in drop_lost]

    # ----------------------------------------------------------------------------------------------- update
    def update(self, detections: Detections | Any, frame: Any = None) -> TrackedDetections:
        """Track one frame: ``detections`` (``Detections`` or an ``(N, 6)`` array) → the tracked rows with IDs.

        ``frame`` (the image, H x W x 3 uint8 RGB) is read only by trackers that compensate camera motion. An
        empty frame ages the tracks; rows with non-finite values or an empty box are skipped and counted.
        """
        cfg = self.config
        dets = as_frame(detections)
        self.frame_id += 1
        self.dropped_total += dets.dropped

        scores = dets.scores
        high = np.flatnonzero(scores >= cfg.track_high_thresh)
        low = np.flatnonzero((scores > cfg.track_low_thresh) & (scores < cfg.track_high_thresh))

        # the frame's working set: confirmed tracked, then lost (together the pool), then unconfirmed tracks
        confirmed = [t for t in self.tracked if t.confirmed]
        unconfirmed = [t for t in self.tracked if not t.confirmed]
        live = confirmed + self.lost + unconfirmed
        n_pool = len(confirmed) + len(self.lost)
        means = np.stack([t.mean for t in live]) if live else np.zeros((0, 8))
        covs = np.stack([t.cov for t in live]) if live else np.zeros((0, 8, 8))
        angles = _angles(live) if dets.angles is not None else None

        # predict the pool (a track not seen last frame keeps its size); a newborn track has no velocity yet
        for slot in self.kf.SIZE_VELOCITY:
            means[len(confirmed) : n_pool, slot] = 0.0
        means[:n_pool], covs[:n_pool] = self.kf.predict(means[:n_pool], covs[:n_pool])
        affine = self._camera_motion(frame, dets)  # called every frame: it keeps its previous frame current
        if affine is not None:
            means, covs = self.kf.multi_affine(means, covs, affine)
        shapes = self._shapes(means, angles)
        tracked_now = np.array([t.state == TrackState.TRACKED for t in live], dtype=bool)

        pool = np.arange(n_pool)
        # 1. confirmed and lost tracks vs high-score detections
        first, left, high_left = self._associate(shapes, pool, dets, high, cfg.match_thresh, cfg.fuse_score)
        # 2. the tracks left (lost ones included) vs low-score detections
        second, unmatched, _ = self._associate(shapes, left, dets, low, cfg.low_match_thresh, False)
        # 3. unconfirmed tracks vs the high detections left
        third, dropped_new, high_left = self._associate(
            shapes,
            np.arange(n_pool, len(live)),
            dets,
            high_left,
            cfg.unconfirmed_match_thresh,
            cfg.fuse_score,
        )
        pairs = np.concatenate([first, second, third])

        # batched Kalman update of every matched track
        idx, rows = pairs[:, 0], pairs[:, 1]
        if len(idx):
            xywh = dets.xywh[rows]
            if angles is not None and dets.angles is not None:
                xywh, angles[idx] = _align_rboxes(xywh, dets.angles[rows], angles[idx])
            means[idx], covs[idx] = self.kf.update(means[idx], covs[idx], self.kf.to_measurement(xywh))
        for i, track in enumerate(live):
            track.mean, track.cov = means[i], covs[i]
            track.det_index = -1
        for i, r in zip(idx.tolist(), rows.tolist()):
            track = live[i]
            track.state = TrackState.TRACKED
            track.frame_id = self.frame_id
            track.score = float(scores[r])
            track.label = int(dets.labels[r])
            track.det_index = r
            track.hits += 1
            if angles is not None:
                track.angle = float(angles[i])
        for i in unmatched[tracked_now[unmatched]].tolist():
            live[i].state = TrackState.LOST
        for i in dropped_new.tolist():
            live[i].state = TrackState.REMOVED

        # 4. births, expiry, duplicates
        born = self._start(dets, high_left[scores[high_left] >= cfg.new_track_thresh])
        for track in live:
            if track.state == TrackState.LOST and self.frame_id - track.frame_id > cfg.max_time_lost:
                track.state = TrackState.REMOVED
        self.tracked = [t for t in live if t.state == TrackState.TRACKED] + born
        self.lost = [t for t in live if t.state == TrackState.LOST]
        self._drop_duplicates()
        return self._output(dets)

    def _output(self, dets: FrameDetections) -> TrackedDetections:
        shown = [t for t in self.tracked if t.det_index >= 0 and (t.confirmed or t.hits > 1)]
        shown.sort(key=lambda t: t.det_index)
        for track in shown:
            if not track.track_id:
                track.confirmed = True
                track.track_id = self.next_id
                self.next_id += 1
        source_rows = dets.index[np.array([t.det_index for t in shown], dtype=np.int64)]
        if shown:
            boxes = self._shapes(
                np.stack([t.mean for t in shown]),
                None if dets.angles is None else _angles(shown),
            )
        else:
            boxes = np.zeros((0, 4 if dets.angles is None else 5))
        return TrackedDetections(
            detections=select(dets.source, source_rows),
            ids=torch.tensor([t.track_id for t in shown], dtype=torch.int64),
            indices=torch.from_numpy(source_rows),
            track_boxes=torch.from_numpy(boxes.astype(np.float32)),
            dropped=dets.dropped,
        )
