"""MOTChallenge text files: ground truth, detections and tracker results.

Every row is ``frame, id, x, y, w, h, score_or_conf, ...`` separated by commas (or by white space), with ``x, y`` the
top-left corner in pixels and frames counted from 1: detections carry ``id = -1``, ground truth a flag (``conf``,
0 = ignore) and optionally class and visibility, results ``frame,id,x,y,w,h,score,-1,-1,-1``. A row with too few
columns, a value that is not a number or a frame that is not a positive integer is a :class:`MotFormatError`
naming the file and the line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from lucid_core.atomic import atomic_write_text

__all__ = [
    "DETECTION_COLUMNS",
    "GT_COLUMNS",
    "RESULT_COLUMNS",
    "MotFormatError",
    "format_results",
    "read_mot_file",
    "write_mot_results",
]

DETECTION_COLUMNS = ("frame", "id", "x", "y", "w", "h", "score")
GT_COLUMNS = ("frame", "id", "x", "y", "w", "h", "conf")
RESULT_COLUMNS = ("frame", "id", "x", "y", "w", "h")


class MotFormatError(ValueError):
    """A MOTChallenge text file cannot be read; the message names the file and the line."""


def read_mot_file(
    path: str | os.PathLike[str], columns: tuple[str, ...] = DETECTION_COLUMNS
) -> NDArray[np.float64]:
    """Rows of a MOTChallenge file as an ``(N, C)`` float64 array, ``C`` the file's column count.

    Every row needs at least ``len(columns)`` values (named in the error) and all rows the same count; blank lines
    are skipped. ``nan`` / ``inf`` are read as such (the tracker skips and counts such detections).
    """
    path = Path(path)
    need = len(columns)
    rows: list[list[float]] = []
    width = 0
    first = 0
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.strip()
            if not text:
                continue
            parts = [p.strip() for p in text.split(",")] if "," in text else text.split()
            if len(parts) < need:
                raise MotFormatError(
                    f"{path} line {number}: expected at least {need} columns ({','.join(columns)}), "
                    f"got {len(parts)}: {text[:80]!r}"
                )
            if width and len(parts) != width:
                raise MotFormatError(
                    f"{path} line {number}: {len(parts)} columns, but line {first} has {width}"
                )
            try:
                values = [float(p) for p in parts]
            except ValueError:
                raise MotFormatError(f"{path} line {number}: not a number in {text[:80]!r}") from None
            if not (values[0] >= 1 and values[0] == int(values[0])):
                raise MotFormatError(
                    f"{path} line {number}: frame {parts[0]!r} is not a positive integer (frames count from 1)"
                )
            if not width:
                width, first = len(parts), number
            rows.append(values)
    if not rows:
        return np.zeros((0, need))
    return np.asarray(rows, dtype=np.float64)


def format_results(rows: Iterable[tuple[int, int, float, float, float, float, float]]) -> str:
    """MOTChallenge result lines ``frame,id,x,y,w,h,score,-1,-1,-1`` (pixels to 2 decimals, score to 4)."""
    return "".join(
        f"{frame},{track},{x:.2f},{y:.2f},{w:.2f},{h:.2f},{score:.4f},-1,-1,-1\n"
        for frame, track, x, y, w, h, score in rows
    )


def write_mot_results(
    path: str | os.PathLike[str], rows: Iterable[tuple[int, int, float, float, float, float, float]]
) -> Path:
    """Write result rows ``(frame, id, x, y, w, h, score)`` atomically (:func:`format_results`); returns the path."""
    return atomic_write_text(path, format_results(rows))
