"""glibc malloc policy for loops that allocate and free the same large arrays every iteration.

:func:`tune_glibc_malloc` sets, with ``mallopt(3)``, ``M_MMAP_MAX = 0`` (no block is served by ``mmap``, so a freed
block is reused by the next request that fits; ``M_MMAP_THRESHOLD`` is also fixed at 32 MiB, the largest value
glibc accepts on 64-bit) and ``M_TRIM_THRESHOLD = -1`` (the heap's free top is never given back). A training step's
or a ``predict`` call's activations then land on pages that are already mapped instead of page-faulting fresh ones;
the price is that the process keeps its heap's high-water mark. It changes no result, only where memory comes from.

It is a process-wide setting, so no library function calls it: the console scripts do (``lucid-train``,
``lucid-predict``), and a program embedding ``lucid_core.predict`` or a data module opts in by calling it once
itself. Forked DataLoader workers inherit it. Measurements and rationale: docs/benchmarks.md "glibc malloc policy".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["MMAP_MAX", "MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "tune_glibc_malloc"]

MMAP_THRESHOLD_BYTES = 32 * 2**20  # glibc refuses more than HEAP_MAX_SIZE / 2 = 32 MiB on 64-bit
MMAP_MAX = 0  # at most this many blocks served by mmap at once: none
TRIM_THRESHOLD_BYTES = -1  # mallopt(3): -1 disables trimming
_M_TRIM_THRESHOLD = -1  # <malloc.h>
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")

_applied: bool | None = None


def _glibc_mallopt(param: int, value: int) -> bool:
    """``mallopt(param, value)`` of the process's glibc; False where the C library is not glibc (or refuses)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # glibc only: musl has mallopt as a no-op stub
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(param, value))


def tune_glibc_malloc(
    mmap_threshold: int = MMAP_THRESHOLD_BYTES,
    trim_threshold: int = TRIM_THRESHOLD_BYTES,
    mmap_max: int = MMAP_MAX,
) -> bool:
    """Serve every block from a never-trimmed heap in this whole process (module docstring); True when applied.

    An explicit opt-in: only a console script's ``main()`` or the embedding program calls it. Idempotent (the first
    call decides). Does nothing and returns False off Linux/glibc, when the user set ``MALLOC_MMAP_THRESHOLD_``,
    ``MALLOC_MMAP_MAX_``, ``MALLOC_TRIM_THRESHOLD_`` or ``GLIBC_TUNABLES`` (their choice wins), or with
    ``LUCID_MALLOC_TUNING=0``.
    """
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if not sys.platform.startswith("linux") or os.environ.get("LUCID_MALLOC_TUNING", "1") == "0":
        return False
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    ok = (
        _glibc_mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold))
        and _glibc_mallopt(_M_MMAP_MAX, int(mmap_max))
        and _glibc_mallopt(_M_TRIM_THRESHOLD, int(trim_threshold))
    )
    _applied = ok
    return ok
