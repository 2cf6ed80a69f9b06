"""Atomic file writes: a temporary file in the target's folder, flushed to disk, then ``os.replace``.

Readers never see a half-written checkpoint or report, and a crash leaves the previous file intact. The final file
gets the permissions an ordinary ``open`` would give (``0o666`` minus the umask), not ``mkstemp``'s ``0o600``.
Every package writes checkpoints, reports and figures through these helpers.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; when the block succeeds it is synced and renamed onto ``path``.

    The caller writes the temporary path by any means (e.g. ``safetensors.torch.save_file``); on an exception it
    is removed and ``path`` is left untouched.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with tmp.open("rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, _default_mode())
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically; returns the path."""
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: str | os.PathLike[str], payload: Any, *, indent: int | None = 2) -> Path:
    """Serialise ``payload`` as JSON (plus a final newline) and write it atomically; returns the path."""
    return atomic_write_text(path, json.dumps(payload, indent=indent) + "\n")
