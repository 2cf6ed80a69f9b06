"""glibc malloc policy for loops that allocate and free the same large arrays every iteration (issue 18).

A training sample (a 640x640x3 CHW array, a flipped copy) allocates blocks of a few MiB, frees them and allocates
them again for the next sample. glibc serves a request above ``M_MMAP_THRESHOLD``
(128 KiB at start, raised dynamically) with a fresh ``mmap`` and gives the heap's free top back to the kernel above
``M_TRIM_THRESHOLD``; either way the next iteration's block is new memory, and every one of its 4 KiB pages costs
a page fault when first written. Measured on the coco8 mosaic pipeline (`tools/bench/data.py`): ~290 minor faults
per sample, about a fifth of the sample's CPU time on this machine, and 0 after :func:`tune_glibc_malloc`. (The
training step's activations are mostly larger than any threshold glibc allows; its step time did not move beyond
the machine's noise.)

:func:`tune_glibc_malloc` fixes both thresholds with ``mallopt(3)`` (``M_MMAP_THRESHOLD`` to 32 MiB, the largest
value glibc accepts on 64-bit, and ``M_TRIM_THRESHOLD`` to 64 MiB), so such blocks come from the heap and are
reused. The price is bounded: the heap may keep up to the trim threshold of freed memory per process instead of
returning it at once. It is a per-process setting that forked DataLoader workers inherit. It changes no result,
only where memory comes from, and it does nothing (returns False) when:

- the C library is not glibc (macOS, Windows, musl),
- the user set ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or ``GLIBC_TUNABLES`` (their choice wins),
- ``LUCID_MALLOC_TUNING=0``.

``YOLODataModule`` (so ``lucid-train``) calls it, and so does ``tools/bench/data.py``, to time what training runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "tune_glibc_malloc"]

MMAP_THRESHOLD_BYTES = 32 * 2**20  # glibc refuses more than HEAP_MAX_SIZE / 2 = 32 MiB on 64-bit
TRIM_THRESHOLD_BYTES = 64 * 2**20
_M_TRIM_THRESHOLD = -1  # <malloc.h>
_M_MMAP_THRESHOLD = -3
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")

_applied: bool | None = None


def tune_glibc_malloc(
    mmap_threshold: int = MMAP_THRESHOLD_BYTES, trim_threshold: int = TRIM_THRESHOLD_BYTES
) -> bool:
    """Fix glibc's mmap and trim thresholds for this process (see the module docstring); True when applied.

    Idempotent: the first call decides, later calls return its answer.
    """
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if not sys.platform.startswith("linux") or os.environ.get("LUCID_MALLOC_TUNING", "1") == "0":
        return False
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        gnu_get_libc_version = libc.gnu_get_libc_version  # glibc only: musl has mallopt as a no-op stub
    except (OSError, AttributeError):
        return False
    del gnu_get_libc_version
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold))) and bool(
        mallopt(_M_TRIM_THRESHOLD, int(trim_threshold))
    )
    _applied = ok
    return ok
