"""Kill a fit 20 times at random points, then every artefact loads and ``best`` is consistent (issue 13 acceptance).

Each start runs ``lucid-train fit`` in a child process that SIGKILLs itself either at a random file-system step of
the artefact writes (the N-th ``os.fsync``/``os.replace``: a temporary written but not renamed, or a rename not
yet made, i.e. during the checkpoint writes) or after a random delay (anywhere, also while a checkpoint is being
written). The next start resumes with only ``--ckpt_path`` when the run has a ``last.ckpt`` and starts a new run
otherwise. A last, unkilled start trains one more epoch and finishes the run. Then in every run directory every ``last.ckpt``/``best.ckpt``
loads with ``weights_only=True``, every ``best`` export loads with its digest, ``best.json``, ``best.ckpt`` and the
resumable state agree on the best epoch, and the finished run left no temporaries and logged every epoch once.
"""

from __future__ import annotations

import csv
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from lucid_train_testing import make_shapes, tiny_cli_args

KILLS = 20
#: never reached while killing (an event kill lets a start progress by at most ~2 epochs); the last start trains
#: one epoch beyond what was logged and finishes the run.
EPOCHS = 100
#: artefact writes (fsync + rename) per epoch: metrics.csv/jsonl, last.ckpt, and best.ckpt + the best pair
EVENTS_PER_EPOCH = 13

DRIVER = textwrap.dedent(
    """
    import os, signal, sys, threading

    mode, value = sys.argv[1], float(sys.argv[2])
    if mode == "event":
        calls = [0]

        def dying(real):
            def call(*args, **kwargs):
                calls[0] += 1
                if calls[0] == int(value):
                    os.kill(os.getpid(), signal.SIGKILL)
                return real(*args, **kwargs)
            return call

        os.fsync = dying(os.fsync)
        os.replace = dying(os.replace)
    elif mode == "timer":
        threading.Timer(value, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    from lucid_train.cli import main
    sys.exit(main(sys.argv[3:]))
    """
)


def _start(driver: Path, mode: str, value: float, argv: list[str], cwd: Path) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(driver), mode, str(value), *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=600,
    )
    return done.returncode


def _best_epoch_of_state(last: Path) -> int:
    state = torch.load(last, map_location="cpu", weights_only=True)
    for key, value in state.get("callbacks", {}).items():
        if "RunArtifacts" in key:
            return int(value["best_epoch"])
    raise AssertionError(f"{last}: no RunArtifacts state")


@pytest.mark.slow
def test_twenty_kills_leave_every_artefact_loadable_and_best_consistent(tmp_path: Path) -> None:
    from lucid_core.checkpoint import load_checkpoint

    data = make_shapes(tmp_path / "shapes", n_train=8, n_val=4)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    fresh = ["fit", *tiny_cli_args(data, tmp_path / "runs" / "train", "--trainer.max_epochs", str(EPOCHS))]
    rng = random.Random(13)

    def resumable() -> Path | None:
        runs = sorted((tmp_path / "runs").glob("train*"), key=lambda p: p.stat().st_mtime)
        return next((r for r in reversed(runs) if (r / "last.ckpt").is_file()), None)

    def argv() -> list[str]:
        run = resumable()
        return fresh if run is None else ["fit", "--ckpt_path", str(run / "last.ckpt")]

    codes = []
    for kill in range(KILLS):
        mode, value = (
            ("timer", rng.uniform(2.0, 25.0))
            if kill % 3 == 2
            else ("event", rng.randint(1, 2 * EVENTS_PER_EPOCH))
        )
        codes.append(_start(driver, mode, value, argv(), tmp_path))
    assert codes.count(-9) >= KILLS // 2, codes  # most starts really were killed
    final = resumable()
    assert final is not None, "no start got as far as the first last.ckpt"
    with (final / "metrics.csv").open() as handle:
        logged = len(list(csv.DictReader(handle)))
    epochs = logged + 1
    assert _start(driver, "none", 0, [*argv(), "--trainer.max_epochs", str(epochs)], tmp_path) == 0
    for run in (tmp_path / "runs").iterdir():
        for name in ("last.ckpt", "best.ckpt"):
            if (run / name).is_file():
                assert "state_dict" in torch.load(run / name, map_location="cpu", weights_only=True), (
                    run / name
                )
        if (run / "best.json").is_file():
            load_checkpoint(run / "best")  # digest, keys and shapes agree
    assert not [p.name for p in final.iterdir() if p.name.endswith((".tmp", ".pending"))]
    with (final / "metrics.csv").open() as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == list(range(epochs))
    best_epoch = _best_epoch_of_state(final / "last.ckpt")
    assert int(load_checkpoint(final / "best").extra["epoch"]) == best_epoch
    assert int(torch.load(final / "best.ckpt", map_location="cpu", weights_only=True)["epoch"]) == best_epoch
