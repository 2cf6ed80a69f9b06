"""Exclusive run directories: concurrent runs never share one.

A run takes the first of ``runs/<name>``, ``runs/<name>2``, ... that holds no finished-run marker (``last.ckpt``
for a fit, ``config.yaml`` for validate/test/predict) and whose claim file :data:`CLAIM_FILE` it can create with
``O_CREAT | O_EXCL`` (the operating system lets exactly one process create it). The claim file stays, so a killed
run's directory is never reused. DDP ranks 1..N-1 adopt rank 0's claim, which it passes in the environment variable
:data:`CLAIM_ENV`. Standard library only, so a test can race two processes on it without importing Lightning.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

#: created exclusively in a directory a run takes; holds ``{"pid": ..., "argv": [...]}``.
CLAIM_FILE = ".lucid-run"
#: environment variable carrying rank 0's claim to the processes it starts.
CLAIM_ENV = "LUCID_RUN_DIR_CLAIM"
#: safety bound of the ``name``, ``name2``, ... search.
MAX_CANDIDATES = 100_000


def candidates(base: Path) -> list[Path]:
    """The first few names :func:`claim_run_dir` tries (for messages): ``base``, ``base2``, ``base3``."""
    return [base, *(base.parent / f"{base.name}{n}" for n in (2, 3))]


def _inherited_claim(base: Path) -> Path | None:
    raw = os.environ.get(CLAIM_ENV)
    if not raw:
        return None
    try:
        claim = json.loads(raw)
        if int(claim["pid"]) == os.getppid() and claim["base"] == str(base):
            return Path(claim["claimed"])
    except (ValueError, KeyError, TypeError):
        return None
    return None


def claim_run_dir(base: str | os.PathLike[str], marker: str) -> Path:
    """Create and take the first free directory of ``base``, ``base2``, ...; returns it (see the module docstring).

    Raises ``OSError`` (with the directory named) when a directory cannot be created, e.g. on a read-only or
    full disk.
    """
    base_path = Path(base)
    inherited = _inherited_claim(base_path)
    if inherited is not None:
        return inherited
    for n in range(1, MAX_CANDIDATES):
        candidate = base_path if n == 1 else base_path.parent / f"{base_path.name}{n}"
        if (candidate / marker).exists() or (candidate / CLAIM_FILE).exists():
            continue
        candidate.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(candidate / CLAIM_FILE, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:  # another process took it between the check and the create
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"pid": os.getpid(), "argv": sys.argv}, handle)
        os.environ[CLAIM_ENV] = json.dumps(
            {"pid": os.getpid(), "base": str(base_path), "claimed": str(candidate)}
        )
        return candidate
    raise OSError(f"{base_path}: no free run directory among {MAX_CANDIDATES} candidates")
