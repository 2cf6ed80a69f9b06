"""Tracking inside inference: ``track(model, source)`` = ``predict`` over the frames, a tracker step per frame.

:class:`StreamTracker` turns the :class:`~lucid_core.results.Results` of consecutive frames into tracked
``Results``: the rows that belong to a confirmed track, each with its ID in ``boxes.id`` (``Detections.ids``);
masks, keypoints and rotated boxes stay with their row (a rotated box is associated by rotated-box IoU,
docs/TRACKING.md). The boxes, scores and classes are those of the detections (the tracked rows of ``predict``'s
output, unchanged); the tracker's filtered boxes are in ``TrackedDetections.track_boxes`` for a caller of
``tracker.update``.

A sequence is one video or stream (its path), or the still images fed in a row (a folder of frames, in-memory
frames). The tracker starts over (no tracks, IDs from 1) when the sequence changes — another video, or the same
video read again from an earlier frame — and only then; IDs otherwise persist across any number of calls that
share the :class:`StreamTracker` (``persist``). Bad input never resets it: a frame without detections is a normal
step (tracks age), rows with a non-finite value or an empty box are skipped and counted (:attr:`dropped`), and
results without boxes (a classifier's) are an error.

The detection threshold defaults to the tracker's ``track_low_thresh``: ByteTrack's second association needs the
low-score detections (Zhang et al., "ByteTrack: Multi-Object Tracking by Associating Every Detection Box", ECCV
2022, section 3).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, overload

import torch

from lucid_core.decode import DEFAULT_IOU, DEFAULT_MAX_DET
from lucid_core.inference import DecodeChoice, predict
from lucid_core.models import YOLOModel
from lucid_core.results import Results
from lucid_core.sources import SourceError
from lucid_core.track.bytetrack import ByteTracker
from lucid_core.track.config import ByteTrackConfig
from lucid_core.track.registry import build_tracker

__all__ = ["StreamTracker", "TrackerSpec", "track"]

#: what names a tracker: ``"bytetrack"``, ``"botsort"``, a YAML path, a mapping of settings or a config object.
TrackerSpec = str | os.PathLike[str] | Mapping[str, Any] | ByteTrackConfig


def _sequence_of(result: Results) -> str | None:
    """The sequence a result belongs to: its video or stream (path), or None for still images."""
    return result.path if result.frame is not None else None


class StreamTracker:
    """A tracker over a stream of per-frame :class:`Results` (module docstring).

    ``tracker`` / ``config`` as :func:`lucid_core.track.build_tracker`. Counters: :attr:`frames` tracked,
    :attr:`dropped` detections skipped (non-finite values or an empty box), :attr:`resets` (new sequences after
    the first).
    """

    def __init__(self, tracker: TrackerSpec = "bytetrack", *, config: Any = None) -> None:
        self.tracker: ByteTracker = build_tracker(tracker, config=config)
        self.frames = 0
        self.dropped = 0
        self.resets = 0
        self._sequence: str | None = None
        self._last_frame: int | None = None
        self._started = False

    @property
    def config(self) -> ByteTrackConfig:
        """The tracker's settings."""
        return self.tracker.config

    @property
    def default_conf(self) -> float:
        """The detection threshold tracking uses when none is given: ``track_low_thresh`` (module docstring)."""
        return float(self.config.track_low_thresh)

    def reset(self) -> None:
        """Forget every track; the next frame starts a new sequence with IDs from 1."""
        self.tracker.reset()
        self._started = False
        self._sequence = None
        self._last_frame = None

    def _follow(self, result: Results) -> None:
        """Reset the tracker when ``result`` starts another sequence than the previous frame's."""
        sequence = _sequence_of(result)
        if self._started:
            rewound = (
                sequence is not None
                and result.frame is not None
                and self._last_frame is not None
                and result.frame <= self._last_frame
            )
            if sequence != self._sequence or rewound:
                self.tracker.reset()
                self.resets += 1
        self._started = True
        self._sequence = sequence
        self._last_frame = result.frame

    def update(self, result: Results) -> Results:
        """Track one frame: a new ``Results`` with the tracked rows of ``result`` and their IDs (``boxes.id``).

        Raises ValueError for results without boxes (image-level class probabilities).
        """
        det = result.detections
        if det.probs is not None:
            raise ValueError(
                f"track: {result.path or 'image'} carries image-level class probabilities (a classification "
                "model); tracking needs per-object boxes"
            )
        self._follow(result)
        start = time.perf_counter()
        image = None if result.orig_img is None else result.orig_img[..., ::-1]  # BGR -> RGB view
        tracked = self.tracker.update(det, frame=image)
        out = tracked.detections
        out.ids = tracked.ids
        self.frames += 1
        self.dropped += tracked.dropped
        speed = {**result.speed, "track": (time.perf_counter() - start) * 1e3}
        return Results(
            out,
            names=result.names,
            orig_img=result.orig_img,
            orig_shape=result.orig_shape,
            path=result.path,
            frame=result.frame,
            speed=speed,
            task=result.task,
        )

    def __call__(self, results: Iterable[Results]) -> Iterator[Results]:
        """:meth:`update` of every result of ``results``, lazily and in order (closing the generator closes
        ``results`` too, e.g. ``predict``'s frame reader)."""
        try:
            for result in results:
                yield self.update(result)
        finally:
            close = getattr(results, "close", None)
            if callable(close):
                close()


@overload
def track(
    model_or_path: YOLOModel | str | os.PathLike[str],
    source: Any,
    *,
    tracker: TrackerSpec | StreamTracker = ...,
    config: Any = ...,
    stream: Literal[False] = ...,
    imgsz: int | tuple[int, int] = ...,
    conf: float | None = ...,
    iou: float = ...,
    max_det: int = ...,
    device: str | torch.device | None = ...,
    decode: DecodeChoice = ...,
    retina_masks: bool = ...,
    classes: Sequence[int] | None = ...,
    agnostic_nms: bool = ...,
    batch: int = ...,
    vid_stride: int = ...,
    names: Sequence[str] | None = ...,
    on_error: Callable[[SourceError], None] | None = ...,
) -> list[Results]: ...


@overload
def track(
    model_or_path: YOLOModel | str | os.PathLike[str],
    source: Any,
    *,
    tracker: TrackerSpec | StreamTracker = ...,
    config: Any = ...,
    stream: Literal[True],
    imgsz: int | tuple[int, int] = ...,
    conf: float | None = ...,
    iou: float = ...,
    max_det: int = ...,
    device: str | torch.device | None = ...,
    decode: DecodeChoice = ...,
    retina_masks: bool = ...,
    classes: Sequence[int] | None = ...,
    agnostic_nms: bool = ...,
    batch: int = ...,
    vid_stride: int = ...,
    names: Sequence[str] | None = ...,
    on_error: Callable[[SourceError], None] | None = ...,
) -> Iterator[Results]: ...


def track(
    model_or_path: YOLOModel | str | os.PathLike[str],
    source: Any,
    *,
    tracker: TrackerSpec | StreamTracker = "bytetrack",
    config: Any = None,
    stream: bool = False,
    imgsz: int | tuple[int, int] = 640,
    conf: float | None = None,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device | None = None,
    decode: DecodeChoice = None,
    retina_masks: bool = False,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    batch: int = 1,
    vid_stride: int = 1,
    names: Sequence[str] | None = None,
    on_error: Callable[[SourceError], None] | None = None,
) -> list[Results] | Iterator[Results]:
    """:func:`lucid_core.predict` over ``source`` with every frame's detections tracked (module docstring).

    ``tracker``: a name, YAML path, mapping or config (a fresh :class:`StreamTracker`, with ``config`` overrides),
    or a :class:`StreamTracker` to continue (its tracks and IDs persist; a new video still resets it).
    ``conf`` defaults to the tracker's ``track_low_thresh``; the other arguments are ``predict``'s. Returns one
    tracked ``Results`` per frame (a generator with ``stream=True``). Tracker settings are checked before any
    frame is read.
    """
    if isinstance(tracker, StreamTracker):
        if config is not None:
            raise ValueError("track: config applies to a new tracker, not to a StreamTracker passed in")
        session = tracker
    else:
        session = StreamTracker(tracker, config=config)
    results = predict(
        model_or_path,
        source,
        imgsz=imgsz,
        conf=session.default_conf if conf is None else conf,
        iou=iou,
        max_det=max_det,
        device=device,
        decode=decode,
        retina_masks=retina_masks,
        classes=classes,
        agnostic_nms=agnostic_nms,
        stream=True,
        batch=batch,
        vid_stride=vid_stride,
        names=names,
        on_error=on_error,
    )
    tracked = session(results)
    return tracked if stream else list(tracked)
