"""``lucid-track --dets DETS.txt --out RESULTS.txt --tracker bytetrack|botsort [--config YAML]``.

Tracks a MOTChallenge detection file (``frame,-1,x,y,w,h,score[,...]``, one row per detection) and writes the
MOTChallenge results (``frame,id,x,y,w,h,score,-1,-1,-1``) atomically: the tracker-only evaluation of the MOT
benchmarks' public-detection track. Every frame from 1 to the last one in the file is a tracker step, so frames
without detections age the tracks. The typed entry point is :func:`track_detection_file`.

Exit status: 0 on success, 2 for a bad flag, a malformed detection file (the file and line are named) or a tracker
YAML that cannot be used (one-paragraph message, :mod:`lucid_core.cli_errors`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lucid_core.cli_errors import refuse_overwrite, register_known_errors, run_cli
from lucid_core.track.config import TRACKER_NAMES, ByteTrackConfig, MissingExtraError, TrackerConfigError
from lucid_core.track.mot_io import DETECTION_COLUMNS, MotFormatError, read_mot_file, write_mot_results
from lucid_core.track.registry import build_tracker

__all__ = ["TrackFileSummary", "build_parser", "main", "track_detection_file"]


@dataclass(frozen=True)
class TrackFileSummary:
    """What :func:`track_detection_file` did."""

    out: Path
    frames: int
    detections: int  # rows read
    boxes: int  # result rows written
    tracks: int  # distinct IDs written
    dropped: int  # detections skipped for a non-finite value or an empty box
    seconds: float  # time spent in the tracker (reading and writing excluded)

    @property
    def ms_per_frame(self) -> float:
        return 1e3 * self.seconds / max(1, self.frames)


def track_detection_file(
    dets: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    tracker: str | os.PathLike[str] | ByteTrackConfig = "bytetrack",
    config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> TrackFileSummary:
    """Track the detection file ``dets`` with ``tracker`` (and ``config`` overrides); write results to ``out``.

    Each result row is a confirmed track's filtered box in that frame with the detection score that updated it.
    """
    rows = read_mot_file(dets, DETECTION_COLUMNS)
    model = build_tracker(tracker, config=config)
    frames = int(rows[:, 0].max()) if len(rows) else 0
    order = np.argsort(rows[:, 0], kind="stable")
    rows = rows[order]
    starts = np.searchsorted(rows[:, 0], np.arange(1, frames + 2))
    xywh = rows[:, 2:6]
    array = np.concatenate(
        [xywh[:, :2], xywh[:, :2] + xywh[:, 2:4], rows[:, 6:7], np.zeros((len(rows), 1))], axis=1
    )
    results: list[tuple[int, int, float, float, float, float, float]] = []
    ids: set[int] = set()
    dropped = 0
    seconds = 0.0
    for frame in range(1, frames + 1):
        chunk = array[starts[frame - 1] : starts[frame]]
        start = time.perf_counter()
        tracked = model.update(chunk)
        seconds += time.perf_counter() - start
        dropped += tracked.dropped
        boxes = tracked.track_boxes.double().numpy()
        scores = tracked.detections.scores.double().numpy()
        for track_id, box, score in zip(tracked.ids.tolist(), boxes, scores):
            x1, y1, x2, y2 = (float(v) for v in box)
            results.append((frame, track_id, x1, y1, x2 - x1, y2 - y1, float(score)))
            ids.add(track_id)
    write_mot_results(out, results)
    return TrackFileSummary(Path(out), frames, len(rows), len(results), len(ids), dropped, seconds)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lucid-track",
        description="Track a MOTChallenge detection file (frame,-1,x,y,w,h,score) and write MOTChallenge results.",
    )
    parser.add_argument("--dets", required=True, help="detection file: frame,-1,x,y,w,h,score[,...] per row")
    parser.add_argument("--out", required=True, help="results file to write: frame,id,x,y,w,h,score,-1,-1,-1")
    parser.add_argument("--tracker", default="bytetrack", choices=TRACKER_NAMES, help="default: bytetrack")
    parser.add_argument(
        "--config", default=None, help="YAML of tracker settings replacing the defaults (docs/TRACKING.md)"
    )
    return parser


def _run(args: argparse.Namespace) -> int:
    refuse_overwrite("--out", args.out, [args.dets] + ([args.config] if args.config else []))
    summary = track_detection_file(args.dets, args.out, tracker=args.tracker, config=args.config)
    skipped = f", {summary.dropped} detection(s) skipped (non-finite or empty box)" if summary.dropped else ""
    print(
        f"lucid-track: {summary.frames} frames, {summary.detections} detections -> {summary.boxes} boxes in "
        f"{summary.tracks} tracks ({args.tracker}, {summary.ms_per_frame:.3f} ms/frame){skipped} -> {summary.out}",
        file=sys.stderr,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    register_known_errors(MotFormatError, TrackerConfigError, MissingExtraError)
    return run_cli("lucid-track", lambda: _run(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
