"""How long idle OpenMP threads spin before they sleep, for the ``lucid-train`` process.

PyTorch's CPU kernels run on GNU OpenMP (libgomp). Between two parallel regions an idle libgomp thread spins for
``GOMP_SPINCOUNT`` iterations before it sleeps; unset, that is 300,000 (the libgomp manual, "GOMP_SPINCOUNT"). A
training step is thousands of short parallel regions, so the training process's threads keep spinning on cores
that its DataLoader workers, or another job on the machine, need. Measured with the embedded default run (2 cores,
2 torch threads, 1 worker; ``lucid-train fit`` for 4 epochs, identical metrics in every case):

============================  ==================  =========================================
GOMP_SPINCOUNT                one run alone        two runs at once (epoch 0, each run)
============================  ==================  =========================================
unset (300,000)               51.8-53.6 s          675-682 s
20,000                        50.6-51.2 s          102 s
**10,000** (set here)         49.6 s               67 s
3,000                         57.0-57.5 s          41 s
``OMP_WAIT_POLICY=PASSIVE``   98.6-99.2 s          -
============================  ==================  =========================================

libgomp reads the variable once, when it is loaded (with torch), so :func:`limit_openmp_spinning` runs at the top
of :mod:`lucid_train.cli`, before anything imports torch. It changes nothing when torch is already loaded or the
user set ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``; the scheduling of the work, and so every result, is the same.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

#: idle spins before a libgomp thread sleeps in lucid-train (module docstring: the measurements).
SPINCOUNT = "10000"


def limit_openmp_spinning(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPINCOUNT` unless torch is loaded or the user chose a wait policy.

    Returns whether it was set.
    """
    env = os.environ if environ is None else environ
    if "torch" in sys.modules or "GOMP_SPINCOUNT" in env or "OMP_WAIT_POLICY" in env:
        return False
    env["GOMP_SPINCOUNT"] = SPINCOUNT
    return True
