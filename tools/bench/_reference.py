"""Shared plumbing of the ``--vs-reference`` benchmark mode (issue 18).

``../shared/refbench/run.sh WORKLOAD [ARGS]`` runs the incumbent as a black box in its own virtual environment and
prints ``ref <name>: <value> <unit>`` lines (``../shared/refbench/README.md``; its source is never read or
imported). A benchmark times ours first, then calls :func:`run_reference` with the same inputs and thread count
(the README's "fair pair" rule: one after the other in the same process tree, never concurrently) and prints both
figures and their ratio with :func:`print_pair`. Without ``../shared`` (or without ``run.sh``) the reference is
skipped with one line saying so, and the benchmark still prints its own figures.

The shared folder is ``$LUCID_SHARED_DIR`` when set, else ``../shared`` next to the repository (as in
``tests/conftest.py``).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = Path(os.environ.get("LUCID_SHARED_DIR", REPO_ROOT.parent / "shared"))
RUN_SH = SHARED_DIR / "refbench" / "run.sh"
REFERENCE_TIMEOUT_S = 1800

_REF_LINE = re.compile(r"^ref (?P<name>.+?): (?P<value>[-+0-9.eE]+) (?P<unit>\S+)\s*$")


@dataclass(frozen=True)
class ReferenceFigure:
    """One ``ref <name>: <value> <unit>`` line of run.sh, with the run's peak resident memory (of its largest
    process, measured from outside by :func:`run_measured`: the workload prints none)."""

    name: str
    value: float
    unit: str
    peak_rss_mib: float | None = None


@dataclass(frozen=True)
class Finished:
    """A command run to completion by :func:`run_measured`."""

    returncode: int
    stdout: str
    stderr: str
    peak_rss_mib: float  # the largest ru_maxrss of the command and its descendants (nan if unreported)


_MEASURE = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[1:])\n"
    "sys.stderr.write('\\n%s %d\\n' % ('__peak_rss_kib', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(rc)\n"
)
_PEAK = re.compile(r"^__peak_rss_kib (\d+)$", re.MULTILINE)


def run_measured(command: list[str], *, env: dict[str, str], timeout: float) -> Finished:
    """Run ``command``, capture its output and return it with its peak RSS: the largest ``ru_maxrss`` of the
    command and its descendants (the largest single process, not a sum).

    The command runs under a small Python launcher that reports ``getrusage(RUSAGE_CHILDREN)``: a process forked
    from this (large) benchmark process inherits its resident size as its high-water mark at ``exec``, so the
    figure must come from children of a process that is small when it forks. Past ``timeout`` seconds the whole
    process group is killed and ``subprocess.TimeoutExpired`` raised.
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEASURE, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    peaks = _PEAK.findall(err)
    err = _PEAK.sub("", err).rstrip("\n")
    return Finished(proc.returncode, out, err, int(peaks[-1]) / 1024.0 if peaks else float("nan"))


def add_reference_flag(parser: argparse.ArgumentParser) -> None:
    """``--vs-reference``: after our figures, run the reference workload and print both and the ratio."""
    parser.add_argument(
        "--vs-reference",
        action="store_true",
        help="after ours, run ../shared/refbench/run.sh on the same inputs and print both figures and the ratio "
        "(skipped with a note when ../shared is absent)",
    )


def reference_available() -> bool:
    return RUN_SH.is_file()


def parse_reference_output(text: str) -> list[ReferenceFigure]:
    """Every ``ref <name>: <value> <unit>`` line of run.sh's output (other lines are its own logging)."""
    figures = []
    for line in text.splitlines():
        match = _REF_LINE.match(line.strip())
        if match:
            figures.append(ReferenceFigure(match["name"], float(match["value"]), match["unit"]))
    return figures


def run_reference(
    workload: str, *args: str | int | Path, threads: int, environ: Mapping[str, str] | None = None
) -> ReferenceFigure | None:
    """Run ``run.sh WORKLOAD ARGS --threads N`` in ``environ`` (default: this process's environment) and return
    its figure; None (with a printed reason) when the shared folder is absent or the run fails."""
    if not reference_available():
        print(
            f"reference {workload}: skipped ({RUN_SH} not found; set LUCID_SHARED_DIR or check out ../shared)"
        )
        return None
    command = [str(RUN_SH), workload, *(str(a) for a in args), "--threads", str(threads)]
    env = {**(os.environ if environ is None else environ), "OMP_NUM_THREADS": str(threads)}
    try:
        done = run_measured(command, env=env, timeout=REFERENCE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"reference {workload}: no figure (run.sh took over {REFERENCE_TIMEOUT_S} s)")
        return None
    figures = parse_reference_output(done.stdout)
    if done.returncode != 0 or not figures:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        print(f"reference {workload}: no figure (run.sh exit {done.returncode}): {' | '.join(tail)}")
        return None
    last = figures[-1]
    return ReferenceFigure(last.name, last.value, last.unit, done.peak_rss_mib)


def print_peak_rss(label: str, ours_mib: float, references: list[ReferenceFigure | None]) -> None:
    """Peak RSS of ours beside the largest of the reference runs' (each measured from outside, `run_measured`)."""
    peaks = [r.peak_rss_mib for r in references if r is not None and r.peak_rss_mib is not None]
    if not peaks:
        print(f"{label}: ours {ours_mib:.0f} MiB, reference skipped")
        return
    ref = max(peaks)
    print(f"{label}: ours {ours_mib:.0f} MiB, reference {ref:.0f} MiB, ours/reference {ours_mib / ref:.2f}x")


def print_pair(label: str, ours: float, reference: ReferenceFigure | None, unit: str) -> float | None:
    """Print ours, the reference's figure and ours/reference; returns the ratio (None without a reference).

    ``unit`` is ours, and must equal the reference's (a mismatch is a bug in the benchmark, raised).
    """
    if reference is None:
        print(f"{label}: ours {ours:.3f} {unit}, reference skipped")
        return None
    if reference.unit != unit:
        raise ValueError(f"{label}: our unit {unit!r} differs from the reference's {reference.unit!r}")
    ratio = ours / reference.value if reference.value else float("inf")
    faster = "higher is better" if unit.endswith("/s") else "lower is better"
    print(
        f"{label}: ours {ours:.3f} {unit}, reference {reference.value:.3f} {unit} ({reference.name}), "
        f"ours/reference {ratio:.2f}x ({faster})"
    )
    return ratio


def peak_rss_mib(children: bool = False) -> float:
    """Peak resident set size of this process (or of its waited-for children, e.g. DataLoader workers), MiB.

    ``getrusage(2)``: ``ru_maxrss`` is in KiB on Linux.
    """
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024.0
