"""glibc malloc policy for loops that allocate and free the same large arrays every iteration (issue 18).

A training sample (a 640x640x3 CHW array, a flipped copy) allocates blocks of a few MiB, frees them and allocates
them again for the next sample; a training step does the same with its activations and gradients, most of them
larger than any mmap threshold glibc accepts (an 8 x 64 x 160 x 160 float32 activation is 52 MiB). glibc serves a
request above ``M_MMAP_THRESHOLD`` (128 KiB at start, raised dynamically up to 32 MiB) with a fresh ``mmap`` and
unmaps it on ``free``, and gives the heap's free top back to the kernel above ``M_TRIM_THRESHOLD``; either way the
next iteration's block is new memory, and every one of its 4 KiB pages costs a page fault when first written.
Measured with glibc's defaults: ~290 minor faults per augmented coco8 sample (`tools/bench/data.py`, about a fifth
of the sample's CPU time), and 65,000-110,000 per yolo26n training step at batch 8 / 640 (0.1-0.2 s of kernel
time in a ~2 s step, `tools/bench/train.py --step`).

:func:`tune_glibc_malloc` sets, with ``mallopt(3)``:

- ``M_MMAP_MAX = 0``: no request is served by ``mmap``, so blocks of every size come from the heap and a freed
  block is reused by the next request that fits (``M_MMAP_THRESHOLD`` is also fixed at 32 MiB, the largest value
  glibc accepts on 64-bit, which only matters if a later ``mallopt`` re-enables mmap);
- ``M_TRIM_THRESHOLD = -1``: the heap's free top is never given back ("disables trimming completely",
  ``mallopt(3)``), so the next step's activations land on pages that are already mapped.

Measured after it: 0 faults per sample and 0-3,000 per training step, the step ~5 % faster (yolo26n, 4 alternating
process pairs: 1.87 s against 1.98 s median). The price: a process keeps its heap's high-water mark (freed memory is
reused, not returned), i.e. its resident memory stays at its peak instead of falling between steps; the peak
itself moved by +0-3 % (3,637-3,767 MiB against 3,642-3,747 MiB). It is a per-process setting that forked
DataLoader workers inherit. It changes no result, only where memory comes from, and it does nothing (returns
False) when:

- the C library is not glibc (macOS, Windows, musl),
- the user set ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_MMAP_MAX_``, ``MALLOC_TRIM_THRESHOLD_`` or ``GLIBC_TUNABLES``
  (their choice wins),
- ``LUCID_MALLOC_TUNING=0``.

``YOLODataModule`` and ``YOLOLitModule`` (so ``lucid-train``) call it, and so do ``tools/bench/data.py`` and
``tools/bench/train.py --step``, to time what training runs. ``lucid_core.predict`` calls it on its first call
(so ``lucid-predict``): with the defaults a yolo26n call at 640 page-faulted 5,600-16,000 times, under 50 after.
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


def tune_glibc_malloc(
    mmap_threshold: int = MMAP_THRESHOLD_BYTES,
    trim_threshold: int = TRIM_THRESHOLD_BYTES,
    mmap_max: int = MMAP_MAX,
) -> bool:
    """Serve every block from a never-trimmed heap in this process (see the module docstring); True when applied.

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
    ok = (
        bool(mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold)))
        and bool(mallopt(_M_MMAP_MAX, int(mmap_max)))
        and bool(mallopt(_M_TRIM_THRESHOLD, int(trim_threshold)))
    )
    _applied = ok
    return ok
