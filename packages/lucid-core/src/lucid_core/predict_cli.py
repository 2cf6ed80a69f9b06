"""``lucid-predict --weights W --source SOURCE --output DIR``: detections of images, videos and streams, written.

``SOURCE`` is anything :func:`lucid_core.sources.expand_source` reads: an image, a folder (its image and video
files), a glob, a ``.txt`` list, an image URL, a video file, a stream URL or a camera index (``0``). Videos and
streams need the ``video`` extra (OpenCV). Without an output flag, as before, each still image ``<name>`` gives
``DIR/<name>.json`` (atomically)::

    {"image": "<path>", "orig_size": [H, W], "imgsz": 640, "task": "detect", "num_detections": N,
     "detections": [{"box": [x1, y1, x2, y2], "score": s, "label": k, "name": "person",
                     "keypoints": [[x, y, v], ...],            # pose
                     "rbox": [cx, cy, w, h, theta], "polygon": [[x, y] x 4],   # obb
                     "mask": {"size": [H, W], "counts": [...]}}]}  # segment, uncompressed column-major RLE

and each video or stream ``<name>`` gives ``DIR/<name>.jsonl``, one such record per frame with its ``"frame"``
index. The output flags choose instead: ``--save`` annotated images (``DIR/<name>``) and videos
(``DIR/<stem>.mp4``, OpenCV's ``mp4v``, the source's size and frame rate), ``--save-txt`` YOLO label files
(``DIR/labels/<stem>[_<frame>].txt``), ``--save-crop`` box crops (``DIR/crops/<class>/``), ``--save-json``
``DIR/predictions.jsonl`` (one record per image or frame, ``"frame"`` null for an image). All coordinates are
original-image pixels.

``--track [--tracker bytetrack|botsort|YAML]`` follows the objects across the frames of each video or stream
(and of a run of still images, e.g. a MOTChallenge ``img1`` folder) with :mod:`lucid_core.track`: the same files
hold only the tracked detections, each record with its ``"id"``, the annotated video shows ``#id``, and each
sequence also gives ``DIR/<stem>.txt``, MOTChallenge results ``frame,id,x,y,w,h,score,-1,-1,-1`` (frames from 1:
a video's own frame numbers, a run of images counted in order; a run of images is named after its folder, or
after the folder above a MOTChallenge ``img1``). The tracker restarts (IDs from 1) at every new video.
``--conf`` then defaults to the tracker's ``track_low_thresh`` (its second association needs the weak
detections); non-finite detections are skipped and counted in the summary.

``--slice N [--overlap F]`` predicts each image or frame on ``N``-pixel tiles overlapping by the fraction ``F``
(``--batch`` tiles per forward pass) and merges them (:func:`lucid_core.inference.sliced_frame_detections`): small
objects on large images. A classifier's record also holds ``"probs"`` (``data``, ``top1``, ``top1_name``,
``top1conf``, ``top5``, ``top5conf``).

A missing or unreadable file, an unsupported extension, a corrupt video frame or a dropped stream is reported on
stderr in one line naming the source (and frame) and skipped; the summary counts what was skipped. A progress
line with frames/s is drawn on stderr. Ctrl-C stops after closing the outputs cleanly (a playable video,
complete JSONL lines).

The typed entry point is :func:`predict_to_dir` (``main`` parses the flags, calls it and prints the progress and
a summary); :func:`iter_predictions_to_dir` does the same for a prepared model, yielding each result.

Exit status: 0 when at least one image or frame was processed, 1 when none was, 130 when interrupted,
2 for bad arguments, an unreadable checkpoint or an output that would overwrite an input (one-paragraph message,
:mod:`lucid_core.cli_errors`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from lucid_core.openmp import limit_openmp_spinning

limit_openmp_spinning()  # before torch is loaded (lucid_core.openmp)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from lucid_core.allocator import tune_glibc_malloc  # noqa: E402
from lucid_core.atomic import atomic_write_json  # noqa: E402
from lucid_core.checkpoint import load  # noqa: E402
from lucid_core.cli_errors import UsageError, refuse_overwrite, run_cli  # noqa: E402
from lucid_core.decode import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF  # noqa: E402
from lucid_core.decode.selection import class_filter  # noqa: E402
from lucid_core.geometry.rotated import rboxes_to_polygons  # noqa: E402
from lucid_core.inference import (  # noqa: E402
    ImageLoadError,
    check_slicing,
    predict_frame_pairs,
    prepare_inference_model,
)
from lucid_core.models import YOLOModel  # noqa: E402
from lucid_core.results import Detections, Results, mask_to_rle  # noqa: E402
from lucid_core.sources import (  # noqa: E402
    IMAGE_SUFFIXES,
    PREDICT_SUFFIXES,
    TRAINING_SUFFIXES,
    Frame,
    FrameReader,
    SourceError,
    SourceItem,
    expand_source,
    is_url,
    require_cv2,
    video_info,
)
from lucid_core.track.config import MissingExtraError, TrackerConfigError  # noqa: E402
from lucid_core.track.mot_io import format_results  # noqa: E402
from lucid_core.track.stream import StreamTracker  # noqa: E402

__all__ = [
    "IMAGE_SUFFIXES",
    "PREDICT_SUFFIXES",
    "TRAINING_SUFFIXES",
    "PredictedImage",
    "PredictionRun",
    "Progress",
    "build_parser",
    "detections_to_json",
    "iter_predictions_to_dir",
    "main",
    "mask_to_rle",
    "predict_to_dir",
    "prediction_record",
]

#: exit status of a run stopped by Ctrl-C (128 + SIGINT, the shell's convention).
EXIT_INTERRUPTED = 130
#: the ``--save-json`` file inside the output folder.
JSONL_NAME = "predictions.jsonl"
#: suffixes an annotated image keeps (others are written as PNG).
WRITABLE_IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"})


class Progress:
    """A one-line progress bar with frames/s on stderr (redrawn in place on a terminal, a line per tenth
    otherwise); called as ``progress(done, total)`` (``total`` None: unknown, e.g. a stream, then a count is
    shown every 100 frames off a terminal); nothing is drawn for a single image. :meth:`finish` ends a line left
    open on a terminal, before another message."""

    def __init__(self, width: int = 30) -> None:
        self.width = width
        self.tty = sys.stderr.isatty()
        self._shown = -1
        self._start: float | None = None
        self._open = False

    def _draw(self, text: str, end: str) -> None:
        print(f"\r{text}", end=end, file=sys.stderr, flush=True)
        self._open = end == ""

    def finish(self) -> None:
        if self._open:
            print(file=sys.stderr, flush=True)
            self._open = False

    def _rate(self, done: int) -> str:
        now = time.perf_counter()
        if self._start is None:
            self._start = now
        elapsed = now - self._start
        return f" {done / elapsed:.1f} frames/s" if elapsed > 0 and done > 1 else ""

    def __call__(self, done: int, total: int | None) -> None:
        rate = self._rate(done)
        if total is None:
            if self.tty or done % 100 == 0:
                self._draw(f"lucid-predict: {done} frames{rate}", "" if self.tty else "\n")
            return
        if total <= 1:
            return
        tenth = done * 10 // total
        if not self.tty and tenth == self._shown:
            return
        self._shown = tenth
        filled = self.width * min(done, total) // total
        bar = "#" * filled + "." * (self.width - filled)
        self._draw(f"lucid-predict: [{bar}] {done}/{total}{rate}", "" if self.tty and done < total else "\n")


def detections_to_json(det: Detections, names: Sequence[str]) -> list[dict[str, Any]]:
    """JSON-ready records of one image's detections."""
    records: list[dict[str, Any]] = []
    polygons = rboxes_to_polygons(det.rboxes) if det.rboxes is not None else None
    for i in range(len(det)):
        label = int(det.labels[i])
        rec: dict[str, Any] = {
            "box": [float(v) for v in det.boxes[i]],
            "score": float(det.scores[i]),
            "label": label,
            "name": names[label] if 0 <= label < len(names) else str(label),
        }
        if det.ids is not None:
            rec["id"] = int(det.ids[i])
        if det.keypoints is not None:
            rec["keypoints"] = det.keypoints[i].tolist()
        if det.rboxes is not None and polygons is not None:
            rec["rbox"] = det.rboxes[i].tolist()
            rec["polygon"] = polygons[i].tolist()
        if det.masks is not None:
            rec["mask"] = mask_to_rle(det.masks[i])
        records.append(rec)
    return records


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    atomic_write_json(path, payload, indent=None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lucid-predict",
        description="Run a lucid-core checkpoint on images, folders, videos or streams; write the detections "
        "(one JSON per image by default) and, on request, annotated images or videos, labels, crops, JSONL.",
        epilog="Exit status: 0 if at least one image or frame was processed, 1 if none was, 130 when interrupted, "
        "2 on bad arguments/weights.",
    )
    parser.add_argument(
        "--weights", required=True, help="checkpoint (stem, .safetensors or .json) or a reference .pt"
    )
    parser.add_argument(
        "--source",
        required=True,
        help="an image, a folder, a glob, a .txt list, an image URL, a video, a stream URL or a camera index",
    )
    parser.add_argument("--output", required=True, help="folder for the outputs (created)")
    parser.add_argument(
        "--imgsz", type=int, default=None, help="inference size (default: the checkpoint's imgsz)"
    )
    parser.add_argument(
        "--conf",
        type=float,
        default=None,
        help=f"confidence threshold (strict >; default {PREDICT_CONF}, with --track the tracker's track_low_thresh)",
    )
    parser.add_argument("--iou", type=float, default=DEFAULT_IOU, help="NMS IoU threshold")
    parser.add_argument("--max-det", type=int, default=DEFAULT_MAX_DET, help="detections kept per image")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    parser.add_argument(
        "--decode", choices=("nms", "topk"), default=None, help="override the family's decoder"
    )
    parser.add_argument(
        "--classes",
        type=int,
        nargs="+",
        default=None,
        metavar="ID",
        help="keep only these class ids (filtered before NMS and --max-det, as the reference's classes=)",
    )
    parser.add_argument(
        "--agnostic-nms",
        action="store_true",
        help="class-agnostic NMS: boxes of different classes suppress each other (top-k: one class per anchor)",
    )
    parser.add_argument(
        "--save",
        action="store_true",
        help="write annotated images (DIR/<name>) and videos (DIR/<stem>.mp4, mp4v, the source's size and fps)",
    )
    parser.add_argument("--save-txt", action="store_true", help="write YOLO label files (DIR/labels/)")
    parser.add_argument("--save-crop", action="store_true", help="write each detection's crop (DIR/crops/)")
    parser.add_argument(
        "--save-json", action="store_true", help=f"write DIR/{JSONL_NAME}: one line per image or frame"
    )
    parser.add_argument("--batch", type=int, default=1, help="images or frames per forward pass")
    parser.add_argument(
        "--vid-stride", type=int, default=1, help="predict every n-th frame of videos/streams"
    )
    parser.add_argument(
        "--max-frames", type=int, default=None, help="stop after this many images or frames in total"
    )
    parser.add_argument(
        "--track",
        action="store_true",
        help="track objects across the frames of each video (IDs in every output, DIR/<stem>.txt MOT results)",
    )
    parser.add_argument(
        "--tracker", default="bytetrack", help="with --track: bytetrack, botsort or a tracker YAML file"
    )
    parser.add_argument(
        "--slice",
        type=int,
        default=None,
        help="sliced inference: predict each image on tiles of this many pixels (--batch tiles per pass), merged",
    )
    parser.add_argument(
        "--overlap",
        type=float,
        default=0.2,
        help="with --slice: the fraction by which neighbouring tiles overlap",
    )
    return parser


@dataclass(frozen=True)
class PredictedImage:
    """One still image lucid-predict wrote: the image file, its detections (original pixels) and its JSON file
    (None when only other outputs were asked for)."""

    image: Path
    detections: Detections
    json_path: Path | None


@dataclass(frozen=True)
class PredictionRun:
    """What :func:`predict_to_dir` did: every image file of the source, the still images written, the video or
    stream frames processed, what was skipped, the files written besides the per-image JSON, the time spent,
    whether Ctrl-C stopped it and, when tracking, the track IDs written and the detections the tracker skipped."""

    images: list[Path]
    written: list[PredictedImage]
    frames: int = 0
    skipped: list[SourceError] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False
    tracks: int = 0  # --track: distinct track IDs written (per sequence)
    dropped: int = 0  # --track: detections the tracker skipped (a non-finite value or an empty box)

    @property
    def processed(self) -> int:
        """Images and frames predicted."""
        return len(self.written) + self.frames

    @property
    def frames_per_second(self) -> float:
        return self.processed / self.seconds if self.seconds > 0 else 0.0


def prediction_record(
    image: Path | str, orig_hw: tuple[int, int], imgsz: int, task: str, det: Detections, names: Sequence[str]
) -> dict[str, Any]:
    """The JSON payload of one image (module docstring): where it came from, its size and its detections."""
    return {
        "image": str(image),
        "orig_size": [int(orig_hw[0]), int(orig_hw[1])],
        "imgsz": imgsz,
        "task": task,
        "num_detections": len(det),
        "detections": detections_to_json(det, names),
        **({"probs": probs_to_json(det.probs, names)} if det.probs is not None else {}),
    }


def probs_to_json(probs: torch.Tensor, names: Sequence[str]) -> dict[str, Any]:
    """A classifier's image record: every class probability and the five most likely classes with names."""
    values = probs.detach().float().cpu()
    top = torch.argsort(values, descending=True, stable=True)[:5].tolist()
    return {
        "data": [float(v) for v in values],
        "top1": int(top[0]),
        "top1_name": names[top[0]] if top[0] < len(names) else str(top[0]),
        "top1conf": float(values[top[0]]),
        "top5": [int(i) for i in top],
        "top5conf": [float(values[i]) for i in top],
    }


def _source_name(item: SourceItem) -> str:
    """The file name an item's outputs are named after (a URL's last path part; ``camera0``; ``stream``)."""
    text = str(item.name)
    if item.kind == "stream" and isinstance(item.value, int):
        return f"camera{item.value}"
    if is_url(text):
        tail = text.split("://", 1)[1].split("?", 1)[0].split("#", 1)[0].rstrip("/")
        name = tail.rsplit("/", 1)[-1] if "/" in tail else tail
        return re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "stream"
    return Path(text).name


def _annotated_name(name: str) -> str:
    path = Path(name)
    return name if path.suffix.lower() in WRITABLE_IMAGE_SUFFIXES else f"{path.stem}.png"


def _track_stem(item: SourceItem) -> str:
    """The name of a sequence's MOTChallenge results: a video's or stream's stem; for a run of still images the
    folder of its first image (the folder above a MOTChallenge ``img1``), ``images`` without one."""
    if item.kind not in ("image", "url", "memory"):
        return Path(_source_name(item)).stem
    if item.kind != "image":
        return "images"
    folder = Path(str(item.name)).resolve().parent
    if folder.name == "img1" and folder.parent.name:
        folder = folder.parent
    return folder.name or "images"


@dataclass
class _MotOut:
    """The open MOTChallenge results of one sequence (a temporary file until closed)."""

    key: int | None  # the video's item, None for a run of still images
    final: Path
    temporary: Path
    handle: IO[str]
    frames: int = 0  # frames written (a run of still images numbers its frames by it)


@dataclass
class _VideoOut:
    """The open per-video outputs: annotated video (temporary file until closed) and per-frame JSONL."""

    item: int
    writer: Any = None
    size: tuple[int, int] | None = None  # (width, height)
    temporary: Path | None = None
    final: Path | None = None
    jsonl: IO[str] | None = None


class PredictionWriter:
    """Writes what ``lucid-predict`` writes for each (frame, result) pair, in order (module docstring)."""

    def __init__(
        self,
        output: Path,
        items: Sequence[SourceItem],
        *,
        names: Sequence[str],
        imgsz: int,
        task: str,
        save: bool,
        save_txt: bool,
        save_crop: bool,
        save_json: bool,
        vid_stride: int,
        track: bool = False,
    ) -> None:
        self.output = output
        self.items = items
        self.names = list(names)
        self.imgsz = imgsz
        self.task = task
        self.save, self.save_txt, self.save_crop, self.save_json = save, save_txt, save_crop, save_json
        self.per_image_json = not (save or save_txt or save_crop or save_json)
        self.vid_stride = vid_stride
        self.track = track
        self.outputs: list[Path] = []
        self.track_ids: set[tuple[str, int]] = set()  # (results file, ID)
        self._video: _VideoOut | None = None
        self._jsonl: IO[str] | None = None
        self._mot: _MotOut | None = None

    def planned(self) -> list[Path]:
        """The files this writer will create whose names are known before running (checked against inputs)."""
        planned: list[Path] = []
        in_images = False
        for item in self.items:
            still_run = item.kind in ("image", "url", "memory")
            readable = still_run or item.kind in ("video", "stream")
            if self.track and readable and not (still_run and in_images):
                planned.append(self.output / f"{_track_stem(item)}.txt")
            in_images = still_run if readable else in_images
            if item.kind not in ("image", "url", "video", "stream"):
                continue
            name = _source_name(item)
            still = item.kind in ("image", "url")
            if self.per_image_json:
                planned.append(self.output / (f"{name}.json" if still else f"{Path(name).stem}.jsonl"))
            if self.save:
                planned.append(self.output / (_annotated_name(name) if still else f"{Path(name).stem}.mp4"))
            if self.save_txt and still:
                planned.append(self.output / "labels" / f"{Path(name).stem}.txt")
        if self.save_json:
            planned.append(self.output / JSONL_NAME)
        return planned

    def _record(self, frame: Frame, result: Results, name: str) -> dict[str, Any]:
        record = prediction_record(
            frame.source or name, frame.shape, self.imgsz, self.task, result.detections, self.names
        )
        if frame.kind != "image" or self.save_json:
            record = {"image": record["image"], "frame": result.frame, **record}
        return record

    def write(self, frame: Frame, result: Results) -> Path | None:
        """Write the outputs of one image or frame; returns the per-image JSON written (or None)."""
        item = self.items[frame.item]
        name = _source_name(item) if item.kind != "memory" else f"image{frame.item}"
        stem = Path(name).stem
        json_path: Path | None = None
        if frame.kind == "image":
            self._close_video()
            if self.per_image_json:
                json_path = self.output / f"{name}.json"
                write_json_atomic(json_path, self._record(frame, result, name))
            if self.save:
                self.outputs.append(result.save(self.output / _annotated_name(name)))
        else:
            video = self._open_video(frame, stem)
            if video.jsonl is not None:
                video.jsonl.write(json.dumps(self._record(frame, result, name)) + "\n")
                video.jsonl.flush()
            if self.save:
                self._write_video_frame(video, result.plot())
        label_stem = stem if frame.kind == "image" else f"{stem}_{frame.index}"
        if self.save_txt:
            self.outputs.append(result.save_txt(self.output / "labels" / f"{label_stem}.txt"))
        if self.save_crop:
            self.outputs.extend(result.save_crop(self.output / "crops", stem=label_stem))
        if self.save_json:
            if self._jsonl is None:
                self.output.mkdir(parents=True, exist_ok=True)
                self._jsonl = (self.output / JSONL_NAME).open("w", encoding="utf-8")
                self.outputs.append(self.output / JSONL_NAME)
            self._jsonl.write(json.dumps(self._record(frame, result, name)) + "\n")
            self._jsonl.flush()
        if self.track:
            self._write_mot(frame, item, result)
        return json_path

    def _write_mot(self, frame: Frame, item: SourceItem, result: Results) -> None:
        """Append the frame's tracked boxes to its sequence's MOTChallenge results (module docstring)."""
        key = frame.item if frame.kind != "image" else None
        mot = self._mot
        if mot is None or mot.key != key:
            self._close_mot()
            final = self.output / f"{_track_stem(item)}.txt"
            temporary = self.output / f".{final.stem}.partial.txt"
            temporary.parent.mkdir(parents=True, exist_ok=True)
            mot = self._mot = _MotOut(key, final, temporary, temporary.open("w", encoding="utf-8"))
        mot.frames += 1
        number = frame.index + 1 if frame.kind != "image" else mot.frames
        det = result.detections.to("cpu")
        ids = det.ids.tolist() if det.ids is not None else []
        boxes = det.boxes.tolist()
        scores = det.scores.tolist()
        rows = [
            (number, track_id, x1, y1, x2 - x1, y2 - y1, score)
            for track_id, (x1, y1, x2, y2), score in zip(ids, boxes, scores, strict=True)
        ]
        mot.handle.write(format_results(rows))
        mot.handle.flush()
        self.track_ids.update((mot.final.name, track_id) for track_id in ids)

    def _close_mot(self) -> None:
        mot, self._mot = self._mot, None
        if mot is None:
            return
        mot.handle.close()
        os.replace(mot.temporary, mot.final)
        self.outputs.append(mot.final)

    def _open_video(self, frame: Frame, stem: str) -> _VideoOut:
        if self._video is not None and self._video.item == frame.item:
            return self._video
        self._close_video()
        video = _VideoOut(frame.item)
        if self.per_image_json:
            path = self.output / f"{stem}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            video.jsonl = path.open("w", encoding="utf-8")
            self.outputs.append(path)
        if self.save:
            cv2 = require_cv2()
            fps = frame.fps / self.vid_stride if frame.fps else 30.0
            height, width = frame.shape
            video.final = self.output / f"{stem}.mp4"
            video.temporary = self.output / f".{stem}.partial.mp4"
            video.temporary.parent.mkdir(parents=True, exist_ok=True)
            video.writer = cv2.VideoWriter(
                str(video.temporary), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height)
            )
            if not video.writer.isOpened():
                raise OSError(f"{video.final}: OpenCV cannot write an mp4v video here")
            video.size = (width, height)
        self._video = video
        return video

    def _write_video_frame(self, video: _VideoOut, image: np.ndarray) -> None:
        if video.writer is None or video.size is None:
            return
        if (image.shape[1], image.shape[0]) != video.size:  # a stream that changed size after reconnecting
            image = require_cv2().resize(image, video.size)
        video.writer.write(image)

    def _close_video(self) -> None:
        video, self._video = self._video, None
        if video is None:
            return
        if video.jsonl is not None:
            video.jsonl.close()
        if video.writer is not None and video.temporary is not None and video.final is not None:
            video.writer.release()
            os.replace(video.temporary, video.final)
            self.outputs.append(video.final)

    def close(self) -> None:
        """Finish every open file: the current video is released (playable), JSONL and MOT files are closed."""
        self._close_video()
        self._close_mot()
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None


def _expected_frames(items: Sequence[SourceItem], vid_stride: int) -> int | None:
    """Images plus the frames the videos declare (every ``vid_stride``-th); None with a stream or an unknown
    frame count."""
    total = 0
    for item in items:
        if item.kind in ("image", "url", "memory"):
            total += 1
        elif item.kind == "video":
            try:
                count = video_info(str(item.name))[0]
            except ImportError:
                count = 1  # reported as unreadable when read
            if count is None:
                return None
            total += -(-count // vid_stride)
        elif item.kind == "stream":
            return None
    return total


def _check_options(imgsz: int | None, batch: int, vid_stride: int, max_frames: int | None) -> None:
    if imgsz is not None and imgsz <= 0:
        raise UsageError(f"--imgsz {imgsz}: expected a positive image size, e.g. 640")
    if batch < 1:
        raise UsageError(f"--batch {batch}: expected a positive number of frames per forward pass")
    if vid_stride < 1:
        raise UsageError(f"--vid-stride {vid_stride}: expected a positive stride, e.g. 1 for every frame")
    if max_frames is not None and max_frames < 1:
        raise UsageError(f"--max-frames {max_frames}: expected a positive number of frames")


def _plan(source: Any) -> list[SourceItem]:
    """The source's items; a single path that names nothing is a usage error, as before."""
    if isinstance(source, str | os.PathLike):
        text = os.fspath(source)
        if not (is_url(text) or text.isdigit() or any(c in text for c in "*?[") or Path(text).exists()):
            raise UsageError(
                f"--source {source}: no such file or folder; expected an image, a folder, a glob, a .txt list, "
                "a video, a URL or a camera index"
            )
        if text.isdigit() and not Path(text).exists():
            source = int(text)
    return list(expand_source(source))


def iter_predictions_to_dir(
    net: YOLOModel,
    source: Any,
    output: str | os.PathLike[str],
    *,
    mode: Literal["nms", "topk"],
    names: Sequence[str],
    imgsz: int,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device = "cpu",
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    save: bool = False,
    save_txt: bool = False,
    save_crop: bool = False,
    save_json: bool = False,
    batch: int = 1,
    vid_stride: int = 1,
    max_frames: int | None = None,
    weights: str | os.PathLike[str] | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
    on_skip: Callable[[ImageLoadError], None] | None = None,
    tracker: StreamTracker | None = None,
    slice: int | None = None,
    overlap: float = 0.2,
) -> Generator[Results, None, PredictionRun]:
    """Predict every image and frame of ``source`` with ``net`` (made ready by
    :func:`~lucid_core.inference.prepare_inference_model`, decode ``mode``), write the outputs into ``output``
    (module docstring) and yield each :class:`Results`; the generator returns the :class:`PredictionRun`.

    No output may replace ``weights`` or an input file (:func:`~lucid_core.cli_errors.refuse_overwrite`, checked
    before anything is written). ``on_progress(done, total)`` is called after each image or frame (``total``
    None when unknown); a source that cannot be read raises its :class:`~lucid_core.sources.SourceError`, or
    with ``on_skip`` is passed to it and skipped. Ctrl-C closes the outputs and returns the run so far
    (``interrupted``). With ``tracker`` every result is tracked by it first (``--track``: IDs in the outputs and
    a MOTChallenge results file per sequence; ``conf`` is the caller's, e.g. ``tracker.default_conf``).
    ``slice``/``overlap``: sliced inference (:func:`lucid_core.inference.sliced_frame_detections`).
    """
    _check_options(imgsz, batch, vid_stride, max_frames)
    try:
        check_slicing(net, slice, overlap)
    except ValueError as exc:
        raise UsageError(f"--slice {slice} --overlap {overlap}: {exc}") from None
    out_dir = Path(output)
    items = _plan(source)
    inputs = [
        *([weights] if weights is not None else []),
        *(str(item.name) for item in items if item.kind in ("image", "video")),
    ]
    writer = PredictionWriter(
        out_dir,
        items,
        names=names,
        imgsz=imgsz,
        task=net.task,
        save=save,
        save_txt=save_txt,
        save_crop=save_crop,
        save_json=save_json,
        vid_stride=vid_stride,
        track=tracker is not None,
    )
    for path in writer.planned():
        refuse_overwrite("--output", path, inputs)
    total = _expected_frames(items, vid_stride)
    if max_frames is not None and total is not None:
        total = min(total, max_frames)
    reader = FrameReader(items, vid_stride=vid_stride, depth=max(2, 2 * batch), live_capacity=max(2, batch))
    pairs = predict_frame_pairs(
        net,
        reader,
        mode=mode,
        names=names,
        imgsz=imgsz,
        conf=conf,
        iou=iou,
        max_det=max_det,
        device=device,
        classes=classes,
        agnostic_nms=agnostic_nms,
        batch=batch,
        slice=slice,
        overlap=overlap,
    )
    if tracker is not None:
        pairs = _tracked_pairs(pairs, tracker)
    return _write_predictions(
        pairs,
        reader,
        writer,
        total=total,
        max_frames=max_frames,
        on_progress=on_progress,
        on_skip=on_skip,
        tracker=tracker,
    )


def _tracked_pairs(
    pairs: Generator[tuple[Frame, Results], None, None], tracker: StreamTracker
) -> Generator[tuple[Frame, Results], None, None]:
    """``pairs`` with each result tracked by ``tracker`` (closing it closes ``pairs``)."""
    try:
        for frame, result in pairs:
            yield frame, tracker.update(result)
    finally:
        pairs.close()


def _write_predictions(
    pairs: Generator[tuple[Frame, Results], None, None],
    reader: FrameReader,
    writer: PredictionWriter,
    *,
    total: int | None,
    max_frames: int | None,
    on_progress: Callable[[int, int | None], None] | None,
    on_skip: Callable[[ImageLoadError], None] | None,
    tracker: StreamTracker | None = None,
) -> Generator[Results, None, PredictionRun]:
    """The loop of :func:`iter_predictions_to_dir`: write each pair, count, report, stop cleanly on Ctrl-C."""
    images = [Path(str(item.name)) for item in writer.items if item.kind in ("image", "url")]
    written: list[PredictedImage] = []
    skipped: list[SourceError] = []
    done = frames = 0

    def skip(exc: SourceError) -> None:
        nonlocal done
        skipped.append(exc)
        if on_skip is None:
            raise exc
        on_skip(exc)
        if exc.kind in ("missing", "unreadable", "unsupported", "corrupt frame"):
            done += 1
            if on_progress is not None:
                on_progress(done, total)

    reader.on_error = skip
    if writer.items:
        writer.output.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    interrupted = False
    try:
        for frame, result in pairs:
            json_path = writer.write(frame, result)
            if frame.kind == "image":
                written.append(PredictedImage(Path(frame.source or ""), result.detections, json_path))
            else:
                frames += 1
            done += 1
            if on_progress is not None:
                on_progress(done, total)
            yield result
            if max_frames is not None and len(written) + frames >= max_frames:
                break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        pairs.close()
        reader.close()
        writer.close()
    return PredictionRun(
        images,
        written,
        frames=frames,
        skipped=skipped,
        outputs=writer.outputs,
        seconds=time.perf_counter() - start,
        interrupted=interrupted,
        tracks=len(writer.track_ids),
        dropped=tracker.dropped if tracker is not None else 0,
    )


def _drive(results: Generator[Results, None, PredictionRun]) -> PredictionRun:
    """Run ``results`` to its end, keeping nothing, and return its run (Ctrl-C between two results is handed
    to the generator, which closes its outputs and returns)."""
    while True:
        try:
            try:
                next(results)
            except KeyboardInterrupt:
                results.throw(KeyboardInterrupt())
        except StopIteration as stop:
            run: PredictionRun = stop.value
            return run


def predict_to_dir(
    weights: str | os.PathLike[str],
    source: Any,
    output: str | os.PathLike[str],
    *,
    imgsz: int | None = None,
    conf: float | None = None,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str = "cpu",
    decode: Literal["nms", "topk"] | None = None,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    save: bool = False,
    save_txt: bool = False,
    save_crop: bool = False,
    save_json: bool = False,
    batch: int = 1,
    vid_stride: int = 1,
    max_frames: int | None = None,
    track: bool = False,
    tracker: str | os.PathLike[str] = "bytetrack",
    slice: int | None = None,
    overlap: float = 0.2,
    on_progress: Callable[[int, int | None], None] | None = None,
    on_skip: Callable[[ImageLoadError], None] | None = None,
) -> PredictionRun:
    """What ``lucid-predict`` does: predict every image and frame of ``source`` with the checkpoint ``weights``
    and write the outputs into ``output`` (module docstring; :func:`iter_predictions_to_dir`).

    ``imgsz`` defaults to the checkpoint's; ``decode`` to the family's decoder; ``classes`` / ``agnostic_nms`` as
    :func:`lucid_core.predict`. ``track``: follow the objects with ``tracker`` (a name or a YAML file; module
    docstring); ``conf`` defaults to ``PREDICT_CONF``, or to the tracker's ``track_low_thresh`` when tracking.
    ``slice``/``overlap``: sliced inference on ``slice``-pixel tiles (:func:`lucid_core.predict`'s). A
    bad value, a missing source or an output that would replace an input raises
    :class:`~lucid_core.cli_errors.UsageError`; an unusable tracker YAML
    :class:`~lucid_core.track.TrackerConfigError`; an unreadable checkpoint its loader's error. With no image or
    video found, nothing is written.
    """
    _check_options(imgsz, batch, vid_stride, max_frames)
    if not track and os.fspath(tracker) != "bytetrack":
        raise UsageError(f"--tracker {os.fspath(tracker)}: tracker settings need --track")
    session = StreamTracker(tracker) if track else None
    threshold = conf if conf is not None else (session.default_conf if session is not None else PREDICT_CONF)
    ckpt = load(weights)
    size = int(imgsz or ckpt.imgsz)
    target = torch.device(device)
    try:
        class_filter(classes, ckpt.model.num_classes, torch.device("cpu"))
    except ValueError as exc:
        raise UsageError(f"--classes {' '.join(map(str, classes or ()))}: {exc}") from None
    net, mode = prepare_inference_model(ckpt.model, decode=decode, device=target)
    return _drive(
        iter_predictions_to_dir(
            net,
            source,
            output,
            mode=mode,
            names=ckpt.names,
            imgsz=size,
            conf=threshold,
            iou=iou,
            max_det=max_det,
            device=target,
            classes=classes,
            agnostic_nms=agnostic_nms,
            save=save,
            save_txt=save_txt,
            save_crop=save_crop,
            save_json=save_json,
            batch=batch,
            vid_stride=vid_stride,
            max_frames=max_frames,
            weights=weights,
            on_progress=on_progress,
            on_skip=on_skip,
            tracker=session,
            slice=slice,
            overlap=overlap,
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The ``lucid-predict`` command: parse, set the process's malloc policy (a command may), run."""
    args = build_parser().parse_args(argv)
    tune_glibc_malloc()
    return run_cli("lucid-predict", lambda: _run(args), extra_known=(TrackerConfigError, MissingExtraError))


def summary(run: PredictionRun, output: str | os.PathLike[str]) -> str:
    """The closing line: what was written where, at what rate, and what was skipped by kind."""
    parts = [f"{len(run.written)}/{len(run.images)} image(s)"] if run.images or not run.frames else []
    if run.frames:
        parts.append(f"{run.frames} video/stream frame(s)")
    line = f"lucid-predict: {' and '.join(parts)} written to {Path(output)}"
    if run.processed > 1:
        line += f" ({run.frames_per_second:.1f} frames/s)"
    if run.tracks:
        line += f"; {run.tracks} track ID(s)"
    if run.dropped:
        line += f"; the tracker skipped {run.dropped} detection(s) with a non-finite value or an empty box"
    if run.skipped:
        kinds = Counter(exc.kind for exc in run.skipped)
        line += f"; skipped {len(run.skipped)}: " + ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    if run.interrupted:
        line += "; interrupted (Ctrl-C), the outputs so far are complete"
    return line


def _run(args: argparse.Namespace) -> int:
    progress = Progress()

    def skipped(exc: ImageLoadError) -> None:
        progress.finish()
        print(f"lucid-predict: skipped {exc}", file=sys.stderr, flush=True)

    run = predict_to_dir(
        args.weights,
        args.source,
        args.output,
        imgsz=args.imgsz,
        conf=args.conf,
        iou=args.iou,
        max_det=args.max_det,
        device=args.device,
        decode=args.decode,
        classes=args.classes,
        agnostic_nms=args.agnostic_nms,
        save=args.save,
        save_txt=args.save_txt,
        save_crop=args.save_crop,
        save_json=args.save_json,
        batch=args.batch,
        vid_stride=args.vid_stride,
        max_frames=args.max_frames,
        track=args.track,
        tracker=args.tracker,
        slice=args.slice,
        overlap=args.overlap,
        on_progress=progress,
        on_skip=skipped,
    )
    progress.finish()
    if not run.images and not run.frames and not run.skipped:
        print(f"lucid-predict: no image or video files in {args.source}", file=sys.stderr)
        return 1
    print(summary(run, args.output), file=sys.stderr)
    if run.interrupted:
        return EXIT_INTERRUPTED
    return 0 if run.processed else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
