"""Atomic outputs of the exporters: a folder built beside its target and renamed onto it in one step.

Single files go through :func:`lucid_core.atomic.atomic_path`; converters that write several files (an OpenVINO
IR's ``.xml`` + ``.bin``, a Core ML package) write into :func:`atomic_directory`'s temporary folder. Either way a
failed export leaves neither a partial file nor a temporary behind, and an existing output stays intact.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_directory"]


@contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; when the block succeeds it replaces ``path``.

    An existing ``path`` (a folder) is moved aside first and removed after the rename; on an exception the
    temporary folder is removed and ``path`` is left as it was.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    old: Path | None = None
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".old", dir=final.parent))
            os.replace(final, old / final.name)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
