"""Execute a jupytext percent-format notebook source through a real Jupyter kernel (issue 20's fast contract).

Not a test module: imported by ``test_notebooks_run.py`` and by ``make notebooks`` (``python -m``-style through
``tools/run_notebooks.py``). The command is exactly the documented one,
``jupytext --from py:percent --to ipynb --set-kernel python3 --execute SOURCE -o OUT``; a failing cell makes it
exit non-zero, which :func:`execute_notebook` turns into :class:`NotebookFailed` with the tail of its output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"


class NotebookFailed(RuntimeError):
    """A notebook did not run top to bottom."""


def notebook_sources(directory: Path = NOTEBOOKS) -> list[Path]:
    """Every notebook source (``notebooks/*.py``; files starting with ``_`` are helpers, not notebooks)."""
    return sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))


def execute_notebook(source: Path, output: Path, *, fast: bool = True, timeout: float = 600.0) -> Path:
    """Convert ``source`` to ``output`` (.ipynb) and execute every cell in a fresh kernel; return ``output``."""
    output.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if fast:
        env["LUCID_NOTEBOOK_FAST"] = "1"
    env.setdefault("LUCID_NOTEBOOK_OUT", str(output.parent / "out"))
    env.setdefault("MPLBACKEND", "Agg")
    env.setdefault("LUCID_REPO", str(REPO))
    jupytext = Path(sys.executable).with_name("jupytext")
    command = [
        str(jupytext) if jupytext.exists() else "jupytext",
        "--from",
        "py:percent",
        "--to",
        "ipynb",
        "--set-kernel",
        "python3",
        "--execute",
        str(source),
        "-o",
        str(output),
    ]
    proc = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0 or not output.is_file():
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise NotebookFailed(f"{source.name}: exit {proc.returncode}\n{tail}")
    return output
