"""Benchmark: ``lucid-train fit`` wall time with libgomp's default idle spin against lucid-train's ``GOMP_SPINCOUNT``.

Runs the embedded default fit (2 torch threads, its 1 DataLoader worker) for ``--batches`` training batches of
one epoch and no validation, as console-script processes: alone, then ``--jobs`` at once (a shared machine), each
with ``GOMP_SPINCOUNT=300000`` (libgomp's default when unset) and without (lucid-train sets
``lucid_core.openmp.SPINCOUNT``). Prints the wall seconds of each case and the ratio lucid-train/default (lower is
better). Run by hand (not by tests): ``uv run --no-sync python tools/bench/openmp.py [--batches 12] [--jobs 2]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIBGOMP_DEFAULT = "300000"


def fits(count: int, batches: int, spincount: str | None, root: Path) -> float:
    """Wall seconds for ``count`` concurrent fits (the slowest of them)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env["OMP_NUM_THREADS"] = "2"
    if spincount is not None:
        env["GOMP_SPINCOUNT"] = spincount
    script = Path(sys.executable).with_name("lucid-train")
    procs = []
    start = time.perf_counter()
    for job in range(count):
        run = root / f"run-{spincount}-{count}-{job}"
        shutil.rmtree(run, ignore_errors=True)
        argv = [
            str(script),
            "fit",
            "--trainer.max_epochs",
            "1",
            "--trainer.limit_train_batches",
            str(batches),
        ]
        argv += ["--trainer.limit_val_batches", "0", "--trainer.enable_progress_bar", "false"]
        argv += ["--trainer.default_root_dir", str(run)]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"lucid-train fit failed:\n{err.decode()[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--batches", type=int, default=12, help="training batches per fit")
    parser.add_argument("--jobs", type=int, default=2, help="concurrent fits in the shared-machine case")
    args = parser.parse_args()
    from lucid_core.openmp import SPINCOUNT

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        fits(1, 2, None, root)  # synthesise and cache the embedded dataset once, untimed
        for count in (1, args.jobs):
            default = fits(count, args.batches, LIBGOMP_DEFAULT, root)
            ours = fits(count, args.batches, None, root)
            print(
                f"lucid-train fit, {count} at once, {args.batches} batches: GOMP_SPINCOUNT {LIBGOMP_DEFAULT} "
                f"{default:.1f} s, lucid-train ({SPINCOUNT}) {ours:.1f} s, lucid-train/default {ours / default:.2f}x"
            )


if __name__ == "__main__":
    main()
