"""Helpers of the process-state tests (imported by ``test_core_no_global_state.py`` and
``test_train_datamodule_state.py``, and by the child processes they start; not a test module).

:func:`snapshot` reads the process-wide settings a library call must leave alone: ``warnings.filters``, torch's
intra- and inter-op thread counts, OpenCV's thread count, and glibc malloc's policy. The malloc policy cannot be read
back from glibc, so it is observed twice: every ``mallopt`` lucid-core would make goes through
``lucid_core.allocator._glibc_mallopt``, which :func:`record_mallopt` replaces by a recorder (the calls are listed),
and :func:`large_block_is_mmapped` asks glibc (``mallinfo2``) whether a 64 MiB block is still served by ``mmap``,
which any ``M_MMAP_MAX = 0`` in the process, lucid's or not, turns off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parent
LARGE_BLOCK = 64 * 2**20  # above glibc's largest dynamic mmap threshold (32 MiB): mmapped under the defaults
_MALLINFO2_FIELDS = (
    "arena",
    "ordblks",
    "smblks",
    "hblks",
    "hblkhd",
    "usmblks",
    "fsmblks",
    "uordblks",
    "fordblks",
    "keepcost",
)
#: mallopt calls seen by the recorder :func:`record_mallopt` installs
MALLOPT_CALLS: list[tuple[int, int]] = []


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2_FIELDS]


def large_block_is_mmapped() -> bool | None:
    """Whether glibc serves a :data:`LARGE_BLOCK` request with ``mmap`` (None where ``mallinfo2`` is missing)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _Mallinfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = mallinfo2().hblkhd
    block = libc.malloc(LARGE_BLOCK)
    after = mallinfo2().hblkhd
    libc.free(block)
    return bool(after - before >= LARGE_BLOCK)


def record_mallopt() -> None:
    """Replace lucid-core's ``mallopt`` by a recorder that appends to :data:`MALLOPT_CALLS` and changes nothing."""
    from lucid_core import allocator

    def recorder(param: int, value: int) -> bool:
        MALLOPT_CALLS.append((param, value))
        return False

    allocator._glibc_mallopt = recorder


def snapshot() -> dict[str, Any]:
    """The process-wide settings, JSON-ready (torch and cv2 are imported here, before any lucid module)."""
    import cv2
    import torch

    from lucid_core import allocator

    return {
        "warnings.filters": [repr(f) for f in warnings.filters],
        "torch.get_num_threads": torch.get_num_threads(),
        "torch.get_num_interop_threads": torch.get_num_interop_threads(),
        "cv2.getNumThreads": cv2.getNumThreads(),
        "large block mmapped": large_block_is_mmapped(),
        "mallopt calls": list(MALLOPT_CALLS),
        "malloc tuning decided": allocator._applied,
    }


def report(**stages: Any) -> None:
    """Print ``stages`` as the child's last output line (read by :func:`run_child`)."""
    print(json.dumps(stages))


def run_child(code: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter that can import this module; returns what it passed to :func:`report`.

    glibc's own malloc settings are removed from the environment so that the defaults are what is observed.
    """
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    child_env.update(env or {})
    child_env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), child_env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=child_env, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
