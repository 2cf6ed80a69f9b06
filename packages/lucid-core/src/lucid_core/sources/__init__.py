"""Sources: frames of images, folders, globs, lists, videos, streams, cameras and in-memory images.

Every source yields :class:`Frame` objects whose ``image`` is H×W×3 uint8 **BGR** (OpenCV's order), with the
path or URL it came from, its frame index and timestamp. :func:`expand_source` says what a source names (the
table in :mod:`lucid_core.sources.expand`); :class:`FrameReader` decodes it ahead of the consumer in a bounded
background thread. Video files, streams and cameras need OpenCV, the ``video`` extra (``pip install
"lucid-core[video]"``); still images need nothing beyond lucid-core.
"""

from __future__ import annotations

from lucid_core.sources.errors import NOTICE_KINDS, ImageLoadError, SourceError
from lucid_core.sources.expand import (
    MEDIA_SUFFIXES,
    PREDICT_SUFFIXES,
    SourceItem,
    expand_source,
    is_url,
)
from lucid_core.sources.frame import Frame, FrameKind
from lucid_core.sources.images import (
    IMAGE_SUFFIXES,
    TRAINING_SUFFIXES,
    load_image_rgb,
    read_image_bgr,
    read_image_file,
)
from lucid_core.sources.reader import FrameReader, iter_items, memory_to_bgr
from lucid_core.sources.video import (
    RECONNECT_DELAYS_S,
    VIDEO_SUFFIXES,
    LiveStream,
    MissingVideoExtraError,
    optional_cv2,
    require_cv2,
    video_info,
)

__all__ = [
    "IMAGE_SUFFIXES",
    "MEDIA_SUFFIXES",
    "NOTICE_KINDS",
    "PREDICT_SUFFIXES",
    "RECONNECT_DELAYS_S",
    "TRAINING_SUFFIXES",
    "VIDEO_SUFFIXES",
    "Frame",
    "FrameKind",
    "FrameReader",
    "ImageLoadError",
    "LiveStream",
    "MissingVideoExtraError",
    "SourceError",
    "SourceItem",
    "expand_source",
    "is_url",
    "iter_items",
    "load_image_rgb",
    "memory_to_bgr",
    "optional_cv2",
    "read_image_bgr",
    "read_image_file",
    "require_cv2",
    "video_info",
]
