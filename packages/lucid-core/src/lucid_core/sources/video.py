"""Video files and live streams (RTSP/RTMP/HTTP/TCP URLs, cameras) decoded by OpenCV, as BGR frames.

OpenCV comes with the ``video`` extra of lucid-core (``pip install "lucid-core[video]"``,
opencv-python-headless); without it, opening a video or a stream raises :class:`MissingVideoExtraError`.

A **video file** is read frame by frame (every ``vid_stride``-th frame is decoded and yielded). A frame that
cannot be decoded in the middle of the file is reported (a :class:`~lucid_core.sources.errors.SourceError`
naming the file and the frame) and reading goes on with the next one.

A **live stream** is read by its own daemon thread as fast as it delivers; the consumer gets the newest frames
from a small buffer (:class:`LiveStream`, ``capacity``), older ones are dropped rather than queued without bound
when the consumer is slower. A stream that cannot be opened, or that drops, is retried with growing delays
(:data:`RECONNECT_DELAYS_S`); when every try fails the error names the URL.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from lucid_core.sources.errors import SourceError
from lucid_core.sources.frame import Frame

__all__ = [
    "RECONNECT_DELAYS_S",
    "VIDEO_SUFFIXES",
    "LiveStream",
    "MissingVideoExtraError",
    "open_capture",
    "optional_cv2",
    "read_video",
    "require_cv2",
    "video_info",
]

#: extensions read as video files.
VIDEO_SUFFIXES = frozenset(
    {".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv", ".flv", ".ts", ".asf", ".3gp"}
)
#: seconds to wait before each new try to open a stream that failed to open or dropped; then it is given up.
RECONNECT_DELAYS_S: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)
#: a video file whose reads fail this many times in a row is taken to have ended before its stated frame count.
MAX_CONSECUTIVE_BAD_FRAMES = 25


class MissingVideoExtraError(ImportError):
    """OpenCV (the ``video`` extra) is not installed."""


def optional_cv2() -> Any | None:
    """The ``cv2`` module when OpenCV (the ``video`` extra) is installed, else None (for the paths that have a
    fallback without it)."""
    try:
        import cv2  # the `video` extra of lucid-core (opencv-python-headless)
    except ImportError:
        return None
    return cv2


def require_cv2() -> Any:
    """The ``cv2`` module, or :class:`MissingVideoExtraError` with one line naming the extra."""
    cv2 = optional_cv2()
    if cv2 is None:
        raise MissingVideoExtraError(
            'video files, streams and cameras need OpenCV: pip install "lucid-core[video]"'
        )
    return cv2


def open_capture(target: str | int) -> Any:
    """An opened ``cv2.VideoCapture`` of a file, URL or camera index, or None when it does not open."""
    cv2 = require_cv2()
    capture = cv2.VideoCapture(target)
    if not capture.isOpened():
        capture.release()
        return None
    return capture


def _frame_count(capture: Any) -> int | None:
    cv2 = require_cv2()
    count = capture.get(cv2.CAP_PROP_FRAME_COUNT)
    return int(count) if np.isfinite(count) and 0 < count < 2**31 else None


def _fps(capture: Any) -> float | None:
    cv2 = require_cv2()
    fps = float(capture.get(cv2.CAP_PROP_FPS))
    return fps if np.isfinite(fps) and 0 < fps < 1000 else None


def video_info(path: str) -> tuple[int | None, float | None, tuple[int, int] | None]:
    """``(frame count, fps, (height, width))`` of a video file as its container states them (None: unknown)."""
    cv2 = require_cv2()
    capture = open_capture(path)
    if capture is None:
        return None, None, None
    try:
        size = (int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)), int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)))
        return _frame_count(capture), _fps(capture), size if min(size) > 0 else None
    finally:
        capture.release()


def read_video(path: str, *, item: int, vid_stride: int = 1) -> Iterator[Frame | SourceError]:
    """Every ``vid_stride``-th frame of the video file ``path``; an undecodable frame yields a
    :class:`SourceError` instead and reading goes on. A file that does not open yields one error."""
    cv2 = require_cv2()
    capture = open_capture(path)
    if capture is None:
        yield SourceError(path, "cannot open video", kind="unreadable")
        return
    try:
        count, fps = _frame_count(capture), _fps(capture)
        index = 0
        failed: list[int] = []  # frames that did not decode since the last one that did
        while (count is None or index < count) and len(failed) < MAX_CONSECUTIVE_BAD_FRAMES:
            if not capture.grab():
                if count is None:
                    break
                failed.append(index)
                index += 1
                continue
            for bad in failed:  # a frame decoded after them: they were corrupt, not the end of the file
                if bad % vid_stride == 0:
                    yield SourceError(path, "cannot decode frame", frame=bad, kind="corrupt frame")
            failed.clear()
            if index % vid_stride == 0:
                ok, image = capture.retrieve()
                if ok and image is not None:
                    timestamp = index / fps if fps else float(capture.get(cv2.CAP_PROP_POS_MSEC)) / 1e3
                    yield Frame(
                        _as_bgr(image),
                        source=path,
                        index=index,
                        timestamp=timestamp,
                        kind="video",
                        item=item,
                        fps=fps,
                        frames=count,
                    )
                else:
                    yield SourceError(path, "cannot decode frame", frame=index, kind="corrupt frame")
            index += 1
        if failed:
            yield SourceError(
                path,
                f"the video ends at frame {failed[0]} of the {count} it declares",
                frame=failed[0],
                kind="truncated",
            )
    finally:
        capture.release()


def _as_bgr(image: np.ndarray) -> np.ndarray:
    if image.ndim == 2:
        return np.ascontiguousarray(np.repeat(image[:, :, None], 3, axis=2))
    if image.shape[2] == 4:
        return np.ascontiguousarray(image[:, :, :3])
    return image


class LiveStream:
    """Frames of a live source (a stream URL or a camera index) read by a daemon thread.

    Iterating yields :class:`Frame` objects (``index`` counts every frame the source delivered, so a gap shows
    dropped frames) and :class:`SourceError` notices (a drop before reconnecting, the final failure). At most
    ``capacity`` frames wait; when the consumer is slower the oldest are dropped (counted in ``dropped``).
    :meth:`close` stops the thread and releases the capture; iteration ends when the source ends for good.
    """

    def __init__(
        self,
        target: str | int,
        *,
        item: int,
        vid_stride: int = 1,
        capacity: int = 2,
        delays: Sequence[float] | None = None,
        opener: Callable[[str | int], Any] | None = None,
    ) -> None:
        require_cv2()
        self.target = target
        self.name = f"camera {target}" if isinstance(target, int) else str(target)
        self.item = item
        self.vid_stride = max(1, int(vid_stride))
        self.delays = tuple(RECONNECT_DELAYS_S if delays is None else delays)
        self.dropped = 0
        self.fps: float | None = None
        self._opener = opener if opener is not None else open_capture
        self._frames: deque[Frame] = deque(maxlen=max(1, int(capacity)))
        self._notices: deque[SourceError] = deque()
        self._done = False
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"lucid-stream {self.name}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ reader thread
    def _open(self, after_drop: bool) -> Any:
        """Open the source, retrying after each of :attr:`delays`; None when every try failed or on close."""
        tries = [0.0, *self.delays] if not after_drop else list(self.delays)
        for delay in tries:
            if delay and self._stop.wait(delay):
                return None
            capture = self._opener(self.target)
            if capture is not None:
                return capture
        return None

    def _notify(self, notice: SourceError) -> None:
        with self._cond:
            self._notices.append(notice)
            self._cond.notify_all()

    def _run(self) -> None:
        capture = self._open(after_drop=False)
        if capture is None:
            if not self._stop.is_set():
                waited = sum(self.delays)
                self._notify(
                    SourceError(
                        self.name,
                        f"cannot open the stream ({len(self.delays) + 1} tries over {waited:.0f} s)",
                        kind="unreadable",
                    )
                )
            self._finish(None)
            return
        self.fps = _fps(capture)
        start = time.monotonic()
        index = 0
        try:
            while not self._stop.is_set():
                if not capture.grab():
                    capture.release()
                    capture = None
                    if self._stop.is_set():
                        break
                    self._notify(
                        SourceError(self.name, "stream dropped; reconnecting", frame=index, kind="dropped")
                    )
                    capture = self._open(after_drop=True)
                    if capture is None:
                        if not self._stop.is_set():
                            self._notify(
                                SourceError(
                                    self.name,
                                    f"stream did not come back after {len(self.delays)} tries",
                                    frame=index,
                                    kind="stream lost",
                                )
                            )
                        break
                    continue
                if index % self.vid_stride == 0:
                    ok, image = capture.retrieve()
                    if ok and image is not None:
                        frame = Frame(
                            _as_bgr(image),
                            source=self.name,
                            index=index,
                            timestamp=time.monotonic() - start,
                            kind="stream",
                            item=self.item,
                            fps=self.fps,
                        )
                        with self._cond:
                            if len(self._frames) == self._frames.maxlen:
                                self.dropped += 1
                            self._frames.append(frame)
                            self._cond.notify_all()
                index += 1
        finally:
            self._finish(capture)

    def _finish(self, capture: Any) -> None:
        if capture is not None:
            capture.release()
        with self._cond:
            self._done = True
            self._cond.notify_all()

    # ------------------------------------------------------------------ consumer side
    def __iter__(self) -> Iterator[Frame | SourceError]:
        try:
            while True:
                with self._cond:
                    while not (self._notices or self._frames or self._done):
                        self._cond.wait(0.1)
                    if self._notices:
                        item: Frame | SourceError = self._notices.popleft()
                    elif self._frames:
                        item = self._frames.popleft()
                    else:
                        return
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Stop the reader thread and release the source (idempotent)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
