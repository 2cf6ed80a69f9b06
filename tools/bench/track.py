"""Benchmark: our ByteTrack and BoT-SORT on simulated detections of MOT ground truth, and the tracker's cost.

For every setting (seed, miss rate, box jitter, false positives per frame) ``../shared/data/mot-tud/make_dets.py``
turns the TUD-Stadtmitte ground truth into a detection file; ``lucid-track``'s typed function
(:func:`lucid_core.track_cli.track_detection_file`) tracks it with each tracker and
:func:`lucid_train.eval.mot.evaluate_tracking` scores the results (HOTA, MOTA, IDF1, ID switches). The first
setting is the shipped ``det_seed0.txt``.

``--vs-reference`` also runs the reference's own trackers on the same detection files (``../shared/refbench/run.sh
tracker``: its default settings, no appearance model, no camera-motion compensation), scores them with the same
code and prints ours, the reference and ours/reference for each metric (IDSW: ours − reference), plus the goal
check: IDF1 and MOTA ≥ the reference's, HOTA ≥ the reference's − 0.01.

Finally the tracker's cost: ms per frame of ``update`` over a synthetic scene of ``--objects`` moving boxes
(median of ``--repeats`` runs of ``--frames`` frames), wall clock and process CPU time (the latter is what the
tracker costs when other work shares the cores).

Run by hand (not by tests): ``OMP_NUM_THREADS=1 uv run --no-sync python tools/bench/track.py [--vs-reference]``.
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lucid_core.track import build_tracker
from lucid_core.track_cli import track_detection_file
from lucid_train.eval.mot import evaluate_tracking

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import REFERENCE_TIMEOUT_S, RUN_SH, SHARED_DIR, add_reference_flag, reference_available

MOT_TUD = SHARED_DIR / "data" / "mot-tud"
GT = MOT_TUD / "TUD-Stadtmitte" / "gt.txt"
SHIPPED = MOT_TUD / "TUD-Stadtmitte" / "det_seed0.txt"
METRICS = ("HOTA", "MOTA", "IDF1", "IDSW")
TRACKERS = ("bytetrack", "botsort")


@dataclass(frozen=True)
class Setting:
    """One simulated detector: ``make_dets.py`` seed, miss rate, jitter (fraction of the box size), FPs per frame."""

    seed: int
    miss: float
    jitter: float
    fp: float

    @property
    def name(self) -> str:
        return f"s{self.seed} miss{self.miss:.2f} jit{self.jitter:.2f} fp{self.fp:g}"


#: the shipped file's setting first, then other seeds and noise levels (30 % misses and 3 FPs/frame included).
SETTINGS = (
    Setting(0, 0.10, 0.05, 1.0),
    Setting(1, 0.10, 0.05, 1.0),
    Setting(2, 0.30, 0.05, 3.0),
    Setting(3, 0.30, 0.08, 3.0),
    Setting(4, 0.20, 0.10, 2.0),
    Setting(5, 0.05, 0.02, 0.5),
    Setting(6, 0.15, 0.05, 1.5),
    Setting(7, 0.30, 0.05, 3.0),
)


def make_detections(setting: Setting, folder: Path) -> Path:
    """The detection file of ``setting`` (the shipped file for seed 0 with the defaults)."""
    if setting == SETTINGS[0] and SHIPPED.is_file():
        return SHIPPED
    out = folder / f"det_{setting.seed}_{setting.miss}_{setting.jitter}_{setting.fp}.txt"
    subprocess.run(
        [
            sys.executable,
            str(MOT_TUD / "make_dets.py"),
            str(GT),
            str(out),
            str(setting.seed),
            str(setting.miss),
            str(setting.jitter),
            str(setting.fp),
        ],
        check=True,
        capture_output=True,
    )
    return out


_REF_TRACKER = re.compile(r"^ref tracker (?P<name>\S+): (?P<ms>[0-9.eE+-]+) ms/frame", re.MULTILINE)


def run_reference_tracker(dets: Path, out: Path, name: str, threads: int) -> float | None:
    """Run the reference's tracker on ``dets`` into ``out``; its ms/frame, or None (reason printed)."""
    if not reference_available():
        print(f"reference tracker: skipped ({RUN_SH} not found)")
        return None
    command = [str(RUN_SH), "tracker", "--dets", str(dets), "--out", str(out), "--tracker", name]
    command += ["--threads", str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=REFERENCE_TIMEOUT_S)
    found = _REF_TRACKER.search(done.stdout)
    if done.returncode != 0 or found is None or not out.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        print(f"reference tracker {name}: no result (exit {done.returncode}): {' | '.join(tail)}")
        return None
    return float(found["ms"])


def score(results: Path) -> dict[str, float]:
    metrics = evaluate_tracking(GT, results)
    return {k: metrics[k] for k in METRICS}


def synthetic_scene(objects: int, frames: int, seed: int = 0) -> list[np.ndarray]:
    """``frames`` arrays (N, 6) of ``objects`` boxes moving at constant velocity in 1280x720, jittered."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform([0, 0], [1200, 640], size=(objects, 2))
    vel = rng.normal(0, 3, size=(objects, 2))
    size = rng.uniform([30, 60], [80, 200], size=(objects, 2))
    out = []
    for _ in range(frames):
        pos = pos + vel
        jitter = rng.normal(0, 1.5, size=(objects, 2))
        xy = pos + jitter
        scores = rng.uniform(0.3, 1.0, size=(objects, 1))
        out.append(np.concatenate([xy, xy + size, scores, np.zeros((objects, 1))], axis=1))
    return out


def time_tracker(name: str, scene: list[np.ndarray], repeats: int) -> tuple[float, float]:
    """Median over ``repeats`` of the ms per ``update`` over the scene: (wall clock, process CPU time)."""
    wall, cpu = [], []
    for _ in range(repeats):
        tracker = build_tracker(name)
        start, start_cpu = time.perf_counter(), time.process_time()
        for frame in scene:
            tracker.update(frame)
        wall.append(1e3 * (time.perf_counter() - start) / len(scene))
        cpu.append(1e3 * (time.process_time() - start_cpu) / len(scene))
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=20, help="objects per frame of the timing scene")
    parser.add_argument("--frames", type=int, default=300, help="frames of the timing scene")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads, and the reference's")
    parser.add_argument("--settings", type=int, default=len(SETTINGS), help="how many of the settings to run")
    add_reference_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not GT.is_file():
        print(f"skipped: {GT} not found (../shared/data/mot-tud)")
        return
    goal_ok = True
    header = f"{'setting':<28} {'tracker':<9} " + " ".join(
        f"{m + ' ours':>10} {m + ' ref':>9} {'ratio':>6}" for m in METRICS
    )
    header += f" {'ms/frame ours':>13} {'ref':>6}"
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for setting in SETTINGS[: args.settings]:
            dets = make_detections(setting, folder)
            for name in TRACKERS:
                ours_file = folder / f"ours_{name}.txt"
                summary = track_detection_file(dets, ours_file, tracker=name)
                ours = score(ours_file)
                ref = None
                ref_ms = None
                if args.vs_reference:
                    ref_file = folder / f"ref_{name}.txt"
                    ref_ms = run_reference_tracker(dets, ref_file, name, args.threads)
                    ref = score(ref_file) if ref_ms is not None else None
                    goal_ok &= ref is not None
                cells = []
                for metric in METRICS:
                    digits = ".0f" if metric == "IDSW" else ".4f"
                    if ref is None:  # no reference run
                        cells.append(f"{ours[metric]:>10{digits}} {'-':>9} {'-':>6}")
                        continue
                    if metric == "IDSW":  # a count: the difference, not a ratio
                        ratio = f"{ours[metric] - ref[metric]:>+6.0f}"
                    else:
                        ratio = f"{ours[metric] / ref[metric]:>6.3f}" if ref[metric] else f"{'-':>6}"
                    cells.append(f"{ours[metric]:>10{digits}} {ref[metric]:>9{digits}} {ratio}")
                timing = f" {summary.ms_per_frame:>13.3f} " + (
                    f"{ref_ms:>6.3f}" if ref_ms is not None else f"{'-':>6}"
                )
                print(f"{setting.name:<28} {name:<9} " + " ".join(cells) + timing, flush=True)
                if ref is not None:
                    ok = (
                        ours["IDF1"] >= ref["IDF1"] - 1e-12
                        and ours["MOTA"] >= ref["MOTA"] - 1e-12
                        and ours["HOTA"] >= ref["HOTA"] - 0.01
                    )
                    goal_ok &= ok
                    if not ok:
                        print(f"  goal missed: {setting.name} {name}")
    if args.vs_reference:
        print(f"goal (IDF1, MOTA >= reference; HOTA >= reference - 0.01) on every setting: {goal_ok}")
    scene = synthetic_scene(args.objects, args.frames)
    for name in TRACKERS:
        wall, cpu = time_tracker(name, scene, args.repeats)
        print(
            f"{name} update: {wall:.3f} ms/frame wall, {cpu:.3f} ms/frame CPU at {args.objects} objects "
            f"({args.frames} frames, no image; median of {args.repeats})"
        )


if __name__ == "__main__":
    main()
