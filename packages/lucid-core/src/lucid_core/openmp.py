"""How long idle OpenMP threads spin before they sleep, for the processes lucid's commands start.

PyTorch's CPU kernels run on GNU OpenMP (libgomp), whose idle threads spin ``GOMP_SPINCOUNT`` iterations (300,000
when unset; the libgomp manual, "GOMP_SPINCOUNT") between parallel regions, on cores that the DataLoader workers,
the frame reader or another job need; ``OMP_WAIT_POLICY=PASSIVE`` (spin 0) wakes a sleeping thread for each of a
forward pass's hundreds of operators instead. libgomp reads the variable once, when it is loaded (with torch), so
:func:`limit_openmp_spinning` runs at the top of the ``lucid-train`` and ``lucid-predict`` command modules,
before anything imports torch. Scheduling only: every result is the same.
Measurements: docs/TRAINING.md "OpenMP threads on a shared CPU", docs/benchmarks.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

__all__ = ["SPINCOUNT", "limit_openmp_spinning"]

#: idle spins before a libgomp thread sleeps in lucid's commands (docs/TRAINING.md: the measurements).
SPINCOUNT = "10000"


def limit_openmp_spinning(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPINCOUNT` unless torch is loaded or the user chose a wait policy.

    Returns whether it was set. For a command's module only: it changes the process environment.
    """
    env = os.environ if environ is None else environ
    if "torch" in sys.modules or "GOMP_SPINCOUNT" in env or "OMP_WAIT_POLICY" in env:
        return False
    env["GOMP_SPINCOUNT"] = SPINCOUNT
    return True
