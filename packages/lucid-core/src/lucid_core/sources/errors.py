"""Errors of image and frame sources; each names the source (and the frame) it is about."""

from __future__ import annotations

__all__ = ["NOTICE_KINDS", "ImageLoadError", "SourceError"]

#: kinds that report something without losing a frame's result: a stream that dropped (and is being reconnected)
#: and a video shorter than its container states. Readers raise the other kinds when nobody handles errors.
NOTICE_KINDS = frozenset({"dropped", "truncated"})


class ImageLoadError(ValueError):
    """An image could not be read or has an unsupported layout; the message names the source."""


class SourceError(ImageLoadError):
    """One item of a source that could not be used: ``source`` (path, URL or camera), ``frame`` (its index in a
    video or stream, else None), ``reason`` and ``kind`` (``missing``, ``unreadable``, ``unsupported``,
    ``corrupt frame``, ``truncated``, ``dropped``, ``stream lost``; :data:`NOTICE_KINDS` are notices)."""

    def __init__(
        self, source: str, reason: str, *, frame: int | None = None, kind: str = "unreadable"
    ) -> None:
        self.source = source
        self.reason = reason
        self.frame = frame
        self.kind = kind
        where = source if frame is None else f"{source} frame {frame}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.source, self.reason, self.frame, self.kind))


def _rebuild(source: str, reason: str, frame: int | None, kind: str) -> SourceError:
    return SourceError(source, reason, frame=frame, kind=kind)
