"""Run directories are taken exclusively (issue 13): two processes racing for one base never share a directory."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

CLAIMS_PER_PROCESS = 40

RACER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from lucid_train.run_dir import claim_run_dir

    base, me, other, count = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    (base.parent / f"ready-{me}").touch()
    deadline = time.monotonic() + 60
    while not (base.parent / f"ready-{other}").exists() and time.monotonic() < deadline:
        pass  # spin: both processes start claiming at the same moment
    print(json.dumps([str(claim_run_dir(base, "last.ckpt")) for _ in range(count)]))
    """
)


def test_two_processes_racing_for_run_directories_never_share_one(tmp_path: Path) -> None:
    base = tmp_path / "runs" / "train"
    base.parent.mkdir(parents=True)
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    racers = [
        subprocess.Popen(
            [sys.executable, str(script), str(base), me, other, str(CLAIMS_PER_PROCESS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me, other in (("a", "b"), ("b", "a"))
    ]
    claimed: list[str] = []
    pids = set()
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        claimed += json.loads(out)
        pids.add(racer.pid)
    assert len(claimed) == len(set(claimed)) == 2 * CLAIMS_PER_PROCESS
    owners = {json.loads((Path(d) / ".lucid-run").read_text())["pid"] for d in claimed}
    assert owners == pids


CLAIM_THEN_START_A_RANK = textwrap.dedent(
    """
    import subprocess, sys
    from lucid_train.run_dir import claim_run_dir

    print(claim_run_dir(sys.argv[1], "last.ckpt"), flush=True)
    if len(sys.argv) > 2:  # start "rank 1" the way Lightning's launcher does: the same command, inherited env
        subprocess.run([sys.executable, sys.argv[0], sys.argv[1]], check=True)
    """
)


def test_a_rank_started_by_the_claiming_process_adopts_its_directory(tmp_path: Path) -> None:
    script = tmp_path / "claim.py"
    script.write_text(CLAIM_THEN_START_A_RANK)
    base = str(tmp_path / "train")
    done = subprocess.run(
        [sys.executable, str(script), base, "rank1"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [base, base]
    # a later, unrelated process takes the next directory
    again = subprocess.run([sys.executable, str(script), base], capture_output=True, text=True, timeout=60)
    assert again.stdout.split() == [str(tmp_path / "train2")]
