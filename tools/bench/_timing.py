"""The benchmarks' timing loop: untimed warm-up calls, then the median wall time of the timed ones."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_ms(call: Callable[[], object], *, runs: int, warmup: int = 3) -> float:
    """Median of ``runs`` timed calls of ``call`` in milliseconds, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
