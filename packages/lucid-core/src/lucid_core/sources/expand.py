"""What a source names: one :class:`SourceItem` per image, video, stream or in-memory image, in order.

A source is any of these, or a list/tuple/iterator of them (nested freely):

================================  ======================================================================
``"img.jpg"``                     an image file (:data:`~lucid_core.sources.images.IMAGE_SUFFIXES` and the
                                  training extensions)
``"clip.mp4"``                    a video file (:data:`~lucid_core.sources.video.VIDEO_SUFFIXES`)
``"folder/"``                     its image and video files (directly inside, sorted by name)
``"images/**/*.png"``             a glob pattern (recursive, sorted; only image and video files)
``"list.txt"``                    one source per line (blank lines and ``#`` comments skipped; relative paths
                                  are relative to the list's folder)
``"https://host/a.jpg"``          an image fetched from that URL (only because the caller named it)
``"rtsp://…"``, ``"http://…"``    a live stream (RTSP/RTMP/HTTP/TCP/UDP/SRT; an http(s) URL ending in a
                                  video extension is read as a video file)
``0`` or ``"0"``                  camera 0
``np.ndarray``                    H×W×3 **BGR** (as OpenCV gives it), H×W×4 BGRA, H×W gray, or N×H×W×3
``PIL.Image``                     converted to RGB
``torch.Tensor``                  CHW or BCHW RGB: uint8 0–255, or floating point 0–1
================================  ======================================================================

A path that does not exist, has an unsupported extension, or a glob that matches nothing gives an ``error``
item (a :class:`~lucid_core.sources.errors.SourceError` naming it) in its place, so a reader can report it and
go on with the next item.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from torch import Tensor

from lucid_core.sources.errors import SourceError
from lucid_core.sources.images import IMAGE_SUFFIXES, TRAINING_SUFFIXES
from lucid_core.sources.video import VIDEO_SUFFIXES

__all__ = [
    "MEDIA_SUFFIXES",
    "PREDICT_SUFFIXES",
    "STREAM_SCHEMES",
    "ItemKind",
    "SourceItem",
    "expand_source",
    "is_url",
]

#: still-image extensions a source reads: every training extension and whatever torchvision decodes itself.
PREDICT_SUFFIXES = TRAINING_SUFFIXES | IMAGE_SUFFIXES
#: image and video extensions (what a folder or a glob contributes).
MEDIA_SUFFIXES = PREDICT_SUFFIXES | VIDEO_SUFFIXES
#: URL schemes read as live streams (``http``/``https`` too, unless the path ends in an image or video extension).
STREAM_SCHEMES = frozenset({"rtsp", "rtsps", "rtmp", "rtmps", "tcp", "udp", "srt", "http", "https"})
#: how deep ``.txt`` lists may name other lists.
MAX_LIST_DEPTH = 8

ItemKind = Literal["image", "video", "stream", "url", "memory", "error"]
_URL = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*)://")
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class SourceItem:
    """One thing to read: ``kind``, its ``name`` (path, URL, ``camera N``; None in memory) and ``value`` (the
    in-memory image, the camera index or the :class:`SourceError` of an ``error`` item)."""

    kind: ItemKind
    name: str | None
    value: Any = None


def is_url(text: str) -> bool:
    """Whether ``text`` starts with a URL scheme (``scheme://``)."""
    return _URL.match(text) is not None


def _url_item(url: str) -> SourceItem:
    scheme = url.split("://", 1)[0].lower()
    suffix = Path(url.split("?", 1)[0].split("#", 1)[0]).suffix.lower()
    if scheme in ("http", "https") and suffix in PREDICT_SUFFIXES:
        return SourceItem("url", url)
    if scheme in ("http", "https", "file") and suffix in VIDEO_SUFFIXES:
        return SourceItem("video", url)
    if scheme in STREAM_SCHEMES:
        return SourceItem("stream", url)
    return _error(url, f"unsupported URL scheme {scheme!r}", "unsupported")


def _error(name: str, reason: str, kind: str) -> SourceItem:
    return SourceItem("error", name, SourceError(name, reason, kind=kind))


def _unsupported(path: Path) -> SourceItem:
    suffix = path.suffix or "(none)"
    return _error(
        str(path),
        f"unsupported extension {suffix}; expected an image ({', '.join(sorted(PREDICT_SUFFIXES))}), a video "
        f"({', '.join(sorted(VIDEO_SUFFIXES))}) or a .txt list",
        "unsupported",
    )


def _file_item(path: Path, depth: int) -> Iterator[SourceItem]:
    suffix = path.suffix.lower()
    if suffix in PREDICT_SUFFIXES:
        yield SourceItem("image", str(path))
    elif suffix in VIDEO_SUFFIXES:
        yield SourceItem("video", str(path))
    elif suffix == ".txt":
        yield from _list_items(path, depth)
    else:
        yield _unsupported(path)


def _media_files(paths: Iterator[Path] | list[Path]) -> list[Path]:
    return sorted(p for p in paths if p.suffix.lower() in MEDIA_SUFFIXES and p.is_file())


def _list_items(path: Path, depth: int) -> Iterator[SourceItem]:
    if depth >= MAX_LIST_DEPTH:
        yield _error(str(path), f"lists nested deeper than {MAX_LIST_DEPTH} levels", "unsupported")
        return
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        yield _error(str(path), f"cannot read the list ({exc})", "unreadable")
        return
    for line in lines:
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        if not is_url(entry) and not Path(entry).is_absolute():
            entry = str(path.parent / entry)
        yield from _path_items(entry, depth + 1)


def _path_items(text: str, depth: int) -> Iterator[SourceItem]:
    if is_url(text):
        yield _url_item(text)
        return
    path = Path(text)
    if path.is_dir():
        yield from (SourceItem(_kind_of(p), str(p)) for p in _media_files(list(path.iterdir())))
    elif path.is_file():
        yield from _file_item(path, depth)
    elif text.isdigit():
        yield SourceItem("stream", f"camera {text}", int(text))
    elif _GLOB_CHARS.search(text):
        matches = _media_files([Path(p) for p in glob.glob(text, recursive=True)])
        if not matches:
            yield _error(text, "no image or video file matches this pattern", "missing")
        yield from (SourceItem(_kind_of(p), str(p)) for p in matches)
    else:
        yield _error(text, "no such file or folder", "missing")


def _kind_of(path: Path) -> ItemKind:
    return "video" if path.suffix.lower() in VIDEO_SUFFIXES else "image"


def expand_source(source: Any) -> Iterator[SourceItem]:
    """The items of ``source`` (module docstring), lazily and in order; :class:`SourceItem` objects pass as
    they are."""
    yield from _expand(source, 0)


def _expand(source: Any, depth: int) -> Iterator[SourceItem]:
    if isinstance(source, SourceItem):
        yield source
    elif isinstance(source, bool):
        raise TypeError(f"unsupported source {source!r}")
    elif isinstance(source, int):
        yield SourceItem("stream", f"camera {source}", source)
    elif isinstance(source, str | os.PathLike):
        yield from _path_items(os.fspath(source), depth)
    elif isinstance(source, np.ndarray):
        if source.ndim == 4:
            yield from (SourceItem("memory", None, image) for image in source)
        else:
            yield SourceItem("memory", None, source)
    elif isinstance(source, Tensor):
        if source.ndim == 4:
            yield from (SourceItem("memory", None, image) for image in source.unbind(0))
        else:
            yield SourceItem("memory", None, source)
    elif isinstance(source, list | tuple | Iterator):
        for item in source:
            yield from _expand(item, depth)
    elif hasattr(source, "mode") and hasattr(source, "convert"):  # a PIL image (duck-typed: no PIL import)
        yield SourceItem("memory", None, source)
    else:
        raise TypeError(
            f"unsupported source of type {type(source).__name__}: expected a path, URL, camera index, numpy "
            "array, PIL image, torch tensor, or a list of these"
        )
