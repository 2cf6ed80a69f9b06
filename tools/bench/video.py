"""Benchmark: frames/s of ``predict(video, stream=True)`` over a whole video file, CPU, ours against the reference.

The video is generated (``--frames`` frames of ``--size`` W×H at 30 fps, moving shapes on a textured background,
OpenCV's ``mp4v``) unless ``--video`` names one. The model is yolo26n detect with 80 classes, random
initialisation, at ``--imgsz``, on ``--threads`` torch threads. Ours, as the reference's ``video`` workload
measures (``../shared/refbench/README.md``): a warm-up pass over the first ``--warmup`` frames, then
``predict(model, video, stream=True)`` over the whole file, timed from the call to the last result.
``--save`` also times the same loop writing the annotated video (``Results.plot()`` into a ``cv2.VideoWriter``,
``mp4v``, the source's size and frame rate: what ``lucid-predict --save`` writes). ``--batch N`` adds a pass
with N frames per forward. ``--vs-reference`` runs ``run.sh video --video V --family yolo26n`` on the same
file and threads after ours, ``--pairs`` times alternating, and prints the medians and ours/reference (higher
is better; targets: ≥ 1.5 for plain predict, ≥ 1.3 with ``--save``; the reference's figure is its plain
``predict(stream=True)``, run.sh writes no video). ``--track`` also times ``lucid_core.track.track(model, video,
stream=True)`` (ByteTrack, its default settings) against ``run.sh video --track`` (the reference's
``track(persist=True, stream=True)``; target ≥ 1.4). The benchmark opts in to the malloc policy ``lucid-predict``
uses (``tune_glibc_malloc`` at the start of ``main``) and its OpenMP policy (``GOMP_SPINCOUNT`` from
:mod:`lucid_core.openmp`, set before torch loads), while the reference runs in the caller's environment (libgomp's
default spin); ``--passive`` runs both sides with ``OMP_WAIT_POLICY=PASSIVE`` instead (docs/benchmarks.md, "Known
effect on a busy machine"). A policy the caller sets is kept on both sides.

Run by hand (not by tests):
``uv run --no-sync python tools/bench/video.py [--threads 2] [--save] [--track] [--batch 4] [--passive]
[--vs-reference [--pairs 3]]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from lucid_core.openmp import limit_openmp_spinning

#: the caller's environment, which the reference runs in (libgomp's defaults unless the caller set a policy)
REFERENCE_ENVIRON = dict(os.environ)
if __name__ == "__main__":  # before torch loads libgomp
    if "--passive" in sys.argv:  # both sides: idle OpenMP threads sleep at once
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        REFERENCE_ENVIRON = dict(os.environ)
    limit_openmp_spinning()  # ours as lucid-predict runs (lucid_core.openmp), unless a policy is set

import numpy as np  # noqa: E402
import torch  # noqa: E402

from lucid_core.allocator import tune_glibc_malloc  # noqa: E402
from lucid_core.inference import predict  # noqa: E402
from lucid_core.models import YOLOModel, build_model  # noqa: E402
from lucid_core.results import Results  # noqa: E402
from lucid_core.sources import require_cv2  # noqa: E402
from lucid_core.track import track  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import (  # noqa: E402
    REFERENCE_TIMEOUT_S,
    RUN_SH,
    ReferenceFigure,
    add_reference_flag,
    print_pair,
    reference_available,
    run_measured,
)

#: run.sh's video line: ``ref video predict yolo26n@640: 10.4 frames/s (150 frames)``
_VIDEO_LINE = re.compile(
    r"^ref (?P<name>video .+?): (?P<value>[-+0-9.eE]+) (?P<unit>frames/s)\b", re.MULTILINE
)


def run_video_reference(video: Path, imgsz: int, threads: int, track: bool = False) -> ReferenceFigure | None:
    """``run.sh video --video V --family yolo26n --imgsz S --threads N [--track]`` in the caller's environment
    (:data:`REFERENCE_ENVIRON`): its figure, or None with a printed reason."""
    if not reference_available():
        print(f"reference video: skipped ({RUN_SH} not found; set LUCID_SHARED_DIR or check out ../shared)")
        return None
    command = [str(RUN_SH), "video", "--video", str(video), "--family", "yolo26n"]
    command += ["--imgsz", str(imgsz), "--threads", str(threads), *(["--track"] if track else [])]
    env = {**REFERENCE_ENVIRON, "OMP_NUM_THREADS": str(threads)}
    try:
        done = run_measured(command, env=env, timeout=REFERENCE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"reference video: no figure (run.sh took over {REFERENCE_TIMEOUT_S} s)")
        return None
    match = _VIDEO_LINE.search(done.stdout)
    if done.returncode != 0 or match is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        print(f"reference video: no figure (run.sh exit {done.returncode}): {' | '.join(tail)}")
        return None
    return ReferenceFigure(match["name"], float(match["value"]), match["unit"], done.peak_rss_mib)


def generate_video(path: Path, frames: int, size_wh: tuple[int, int], fps: float = 30.0) -> Path:
    """A synthetic video: a fixed noise texture with three bright shapes moving across it (mp4v)."""
    cv2 = require_cv2()
    width, height = size_wh
    rng = np.random.default_rng(0)
    texture = cv2.GaussianBlur(rng.integers(0, 256, (height, width, 3), dtype=np.uint8), (0, 0), 3)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, size_wh)
    if not writer.isOpened():
        raise OSError(f"{path}: OpenCV cannot write an mp4v video")
    for index in range(frames):
        image = texture.copy()
        x = (index * 6) % max(1, width - 120)
        cv2.rectangle(image, (x, height // 4), (x + 100, height // 4 + 140), (40, 200, 240), -1)
        cv2.circle(image, (width - x - 60, height // 2), 55, (230, 60, 60), -1)
        cv2.rectangle(
            image, (width // 2 - 40, (index * 4) % max(1, height - 80)), (width // 2 + 40, 0), (0, 0, 0), 3
        )
        writer.write(image)
    writer.release()
    return path


def bench_model() -> YOLOModel:
    torch.manual_seed(0)
    return build_model("yolo26", "detect", "n", num_classes=80).eval()


def frames_per_second(
    model: YOLOModel,
    video: Path,
    *,
    imgsz: int,
    warmup: int,
    batch: int = 1,
    save_to: Path | None = None,
    tracked: bool = False,
) -> tuple[float, int, dict[str, float]]:
    """Frames/s of ``predict(model, video, stream=True)`` (``tracked``: ``track(...)`` with ByteTrack) over the
    whole file after ``warmup`` frames, the frame count, and the mean per-frame ``Results.speed`` (ms). With
    ``save_to``, each frame is drawn and written to an mp4v video there."""

    def run() -> Iterator[Results]:
        if tracked:
            return track(model, video, imgsz=imgsz, stream=True, batch=batch)
        return predict(model, video, imgsz=imgsz, stream=True, batch=batch)

    for count, _ in enumerate(run(), 1):
        if count >= warmup:
            break
    cv2 = require_cv2() if save_to is not None else None
    writer = None
    totals = {"preprocess": 0.0, "inference": 0.0, "postprocess": 0.0}
    count = 0
    start = time.perf_counter()
    for result in run():
        count += 1
        for key in totals:
            totals[key] += result.speed.get(key, 0.0)
        if cv2 is not None and save_to is not None:
            annotated = result.plot()
            if writer is None:
                height, width = annotated.shape[:2]
                writer = cv2.VideoWriter(str(save_to), cv2.VideoWriter_fourcc(*"mp4v"), 30.0, (width, height))
            writer.write(annotated)
    if writer is not None:
        writer.release()
    elapsed = time.perf_counter() - start
    return count / elapsed, count, {k: v / max(count, 1) for k, v in totals.items()}


def _median_pair(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    tune_glibc_malloc()  # as lucid-predict does
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--video", type=Path, default=None, help="a video file (default: a generated one)")
    parser.add_argument("--frames", type=int, default=150, help="frames of the generated video")
    parser.add_argument("--size", default="640x480", help="W x H of the generated video")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (and the reference's)")
    parser.add_argument("--warmup", type=int, default=10, help="frames predicted before timing")
    parser.add_argument("--batch", type=int, default=1, help="also time N frames per forward pass (N > 1)")
    parser.add_argument("--save", action="store_true", help="also time writing the annotated video")
    parser.add_argument("--pairs", type=int, default=1, help="ours/reference rounds, alternating (medians)")
    parser.add_argument("--track", action="store_true", help="also time tracking (ByteTrack) on both sides")
    parser.add_argument(
        "--passive", action="store_true", help="both sides with OMP_WAIT_POLICY=PASSIVE (a busy machine)"
    )
    add_reference_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    width, height = (int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory(prefix="lucid-bench-video-") as folder:
        video = args.video or generate_video(Path(folder) / "bench.mp4", args.frames, (width, height))
        model = bench_model()
        print(
            f"torch {torch.__version__}, {args.threads} thread(s), predict(yolo26n, {video.name}, stream=True) "
            f"at {args.imgsz}"
        )
        plain: list[float] = []
        saved: list[float] = []
        batched: list[float] = []
        tracked: list[float] = []
        references: list[ReferenceFigure] = []
        track_references: list[ReferenceFigure] = []
        for _ in range(max(1, args.pairs)):
            fps, count, speed = frames_per_second(model, video, imgsz=args.imgsz, warmup=args.warmup)
            plain.append(fps)
            parts = ", ".join(f"{k} {v:.1f}" for k, v in speed.items())
            print(
                f"video predict yolo26n@{args.imgsz}: {fps:.2f} frames/s over {count} frames ({parts} ms/frame)"
            )
            if args.save:
                out = Path(folder) / "annotated.mp4"
                fps, count, _ = frames_per_second(
                    model, video, imgsz=args.imgsz, warmup=args.warmup, save_to=out
                )
                saved.append(fps)
                print(
                    f"video predict yolo26n@{args.imgsz} --save: {fps:.2f} frames/s (annotated mp4v written)"
                )
            if args.batch > 1:
                fps, count, _ = frames_per_second(
                    model, video, imgsz=args.imgsz, warmup=args.warmup, batch=args.batch
                )
                batched.append(fps)
                print(f"video predict yolo26n@{args.imgsz} batch={args.batch}: {fps:.2f} frames/s")
            if args.track:
                fps, count, _ = frames_per_second(
                    model, video, imgsz=args.imgsz, warmup=args.warmup, tracked=True
                )
                tracked.append(fps)
                print(f"video track yolo26n@{args.imgsz} (ByteTrack): {fps:.2f} frames/s")
            if args.vs_reference:
                ref = run_video_reference(video, args.imgsz, args.threads)
                if ref is not None:
                    references.append(ref)
                    print(f"reference video: {ref.value:.2f} {ref.unit} ({ref.name})")
                if args.track:
                    ref = run_video_reference(video, args.imgsz, args.threads, track=True)
                    if ref is not None:
                        track_references.append(ref)
                        print(f"reference video --track: {ref.value:.2f} {ref.unit} ({ref.name})")
        if args.pairs > 1:
            print(f"medians of {args.pairs} alternating rounds:")
        reference = (
            ReferenceFigure(
                references[0].name, _median_pair([r.value for r in references]), references[0].unit
            )
            if references
            else None
        )
        if args.vs_reference:
            print_pair(f"video predict yolo26n@{args.imgsz}", _median_pair(plain), reference, "frames/s")
            if saved:
                print_pair(
                    f"video predict yolo26n@{args.imgsz} --save", _median_pair(saved), reference, "frames/s"
                )
            if tracked and track_references:
                track_reference = ReferenceFigure(
                    track_references[0].name,
                    _median_pair([r.value for r in track_references]),
                    track_references[0].unit,
                )
                print_pair(
                    f"video track yolo26n@{args.imgsz}", _median_pair(tracked), track_reference, "frames/s"
                )
            if batched:
                print_pair(
                    f"video predict yolo26n@{args.imgsz} batch={args.batch}",
                    _median_pair(batched),
                    reference,
                    "frames/s",
                )


if __name__ == "__main__":
    main()
