"""``FrameReader``: the frames of any source, decoded ahead of the consumer by a background thread.

A daemon thread walks the source's items (:func:`~lucid_core.sources.expand.expand_source`), decodes them
(:func:`iter_items`) and puts the frames into a queue of at most ``depth`` frames, so decoding overlaps the model
and memory stays bounded whatever the source's length; a source of one still image (a file, a URL or an in-memory
image) has nothing to overlap and is decoded in the consumer's thread instead. A
:class:`~lucid_core.sources.errors.SourceError` (a missing file, a corrupt frame, a dropped stream) travels through
the queue at its place: iterating passes it to ``on_error`` and goes on, or without one raises it (notices aside).
:meth:`FrameReader.close` (also on ``with`` exit, on the iterator's ``close`` and when iteration ends) stops the
thread and releases every open video or stream.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

from lucid_core.sources.errors import NOTICE_KINDS, ImageLoadError, SourceError
from lucid_core.sources.expand import SourceItem, expand_source
from lucid_core.sources.frame import Frame
from lucid_core.sources.images import (
    array_to_bgr,
    fetch_url_image,
    pil_to_bgr,
    read_image_bgr,
    rgb_chw_to_bgr,
    tensor_to_bgr,
)
from lucid_core.sources.video import LiveStream, read_video

__all__ = ["FrameReader", "iter_items", "memory_to_bgr"]

_END = object()
#: item kinds that give one frame: a source of one of them alone is decoded without the reader thread
_STILL_KINDS = frozenset({"image", "url", "memory", "error"})


class _Failure:
    """An unexpected exception of the reader thread, re-raised in the consumer."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def memory_to_bgr(value: Any, what: str) -> Any:
    """An in-memory image (numpy BGR, PIL, CHW tensor) as H×W×3 BGR uint8 (``what`` names it in errors)."""
    if hasattr(value, "detach"):
        return tensor_to_bgr(value, what)
    if hasattr(value, "dtype") and hasattr(value, "ndim"):
        return array_to_bgr(value, what)
    return pil_to_bgr(value, what)


def iter_items(
    items: Iterable[SourceItem],
    *,
    vid_stride: int = 1,
    live_capacity: int = 2,
    on_live: Callable[[LiveStream | None], None] | None = None,
) -> Generator[Frame | SourceError, None, None]:
    """Decode ``items`` in order: one frame per image, every ``vid_stride``-th frame of a video or stream, one
    :class:`SourceError` per item or frame that cannot be read. ``on_live`` is told the live stream being read
    (None after it), so that another thread can close it."""
    memory = 0
    for position, item in enumerate(items):
        if item.kind == "error":
            yield item.value
        elif item.kind == "memory":
            name = f"image {memory}"
            memory += 1
            try:
                yield Frame(memory_to_bgr(item.value, name), source=None, item=position)
            except ImageLoadError as exc:
                yield SourceError(name, str(exc).removeprefix(f"{name}: "), kind="unreadable")
        elif item.kind in ("image", "url"):
            name = str(item.name)
            try:
                bgr = rgb_chw_to_bgr(fetch_url_image(name)) if item.kind == "url" else read_image_bgr(name)
            except ImageLoadError as exc:
                yield SourceError(name, str(exc).removeprefix(f"{name}: "), kind="unreadable")
                continue
            yield Frame(bgr, source=name, item=position)
        elif item.kind == "video":
            yield from read_video(str(item.name), item=position, vid_stride=vid_stride)
        else:  # a live stream or a camera
            target = item.value if isinstance(item.value, int) else str(item.name)
            live = LiveStream(target, item=position, vid_stride=vid_stride, capacity=live_capacity)
            if on_live is not None:
                on_live(live)
            try:
                yield from live
            finally:
                live.close()
                if on_live is not None:
                    on_live(None)


class FrameReader:
    """The frames of ``source`` (any source :func:`~lucid_core.sources.expand.expand_source` takes), decoded by
    a daemon thread at most ``depth`` frames ahead (module docstring).

    Iterating yields :class:`Frame` objects in source order; a :class:`SourceError` is handed to ``on_error``
    and skipped, or without it raised (a notice, :data:`~lucid_core.sources.errors.NOTICE_KINDS`, is dropped). ``vid_stride``: keep every n-th frame of videos and streams;
    ``live_capacity``: frames a live stream keeps for a slow consumer before dropping the oldest.
    """

    def __init__(
        self,
        source: Any,
        *,
        vid_stride: int = 1,
        depth: int = 4,
        live_capacity: int = 2,
        on_error: Callable[[SourceError], None] | None = None,
    ) -> None:
        if int(vid_stride) < 1:
            raise ValueError(f"vid_stride must be a positive integer, got {vid_stride}")
        self.on_error = on_error
        self._items = expand_source(source)
        self._vid_stride = int(vid_stride)
        self._live_capacity = max(1, int(live_capacity))
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, int(depth)))
        self._stop = threading.Event()
        self._live: LiveStream | None = None
        self._live_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    # ------------------------------------------------------------------ reader thread
    def _set_live(self, live: LiveStream | None) -> None:
        with self._live_lock:
            self._live = live
        if live is not None and self._stop.is_set():
            live.close()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        frames = iter_items(
            self._items,
            vid_stride=self._vid_stride,
            live_capacity=self._live_capacity,
            on_live=self._set_live,
        )
        try:
            for frame in frames:
                if not self._put(frame):
                    return
        except BaseException as exc:  # handed to the consumer, which re-raises it
            self._put(_Failure(exc))
        finally:
            frames.close()
            self._put(_END)

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._produce, name="lucid-frame-reader", daemon=True)
            self._thread.start()

    def _queued(self) -> Iterator[Any]:
        """The reader thread's frames and errors, in order, until its end marker."""
        self._start()
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item

    def _decoded(self) -> Iterator[Any]:
        """A single still item decoded here; otherwise the queue the reader thread fills."""
        items = iter(self._items)
        head = list(itertools.islice(items, 2))
        if len(head) == 1 and head[0].kind in _STILL_KINDS:
            return iter_items(head)
        self._items = itertools.chain(head, items)
        return self._queued()

    # ------------------------------------------------------------------ consumer side
    def __iter__(self) -> Iterator[Frame]:
        if self._closed:
            raise RuntimeError("FrameReader: already closed")
        try:
            for item in self._decoded():
                if isinstance(item, SourceError):
                    if self.on_error is not None:
                        self.on_error(item)
                    elif item.kind not in NOTICE_KINDS:
                        raise item
                    continue
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Stop the reader thread and release open videos and streams (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        with self._live_lock:
            live = self._live
        if live is not None:
            live.close()
        while True:  # unblock a producer waiting on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10.0)

    def __enter__(self) -> FrameReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
