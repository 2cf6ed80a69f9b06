"""No library call changes the process: importing every module of the five packages, ``predict`` and ``load`` leave
glibc malloc's policy, ``warnings.filters``, torch's and OpenCV's thread counts as they were (each in a fresh
interpreter, so no other test's state leaks in; the observables are in ``tests/process_state_testing.py``)."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import pytest

from process_state_testing import run_child

PACKAGES = ("lucid_core", "lucid_data", "lucid_accel", "lucid_train", "lucid_viz")

_WALK = """
import importlib, pkgutil, sys
from process_state_testing import record_mallopt, report, snapshot
packages, preimport = sys.argv[1].split(","), [name for name in sys.argv[2].split(",") if name]
for name in preimport:  # third-party packages the walk imports: what they do on import is theirs
    try:
        importlib.import_module(name)
    except Exception:
        pass
record_mallopt()
present = {name.partition(".")[0] for name in sys.modules}
before = snapshot()
imported, optional, failed = [], [], []

def import_one(name):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("lucid_"):
            failed.append(f"{name}: {exc}")
        else:  # a module behind an optional extra (e.g. triton for lucid-accel[cuda])
            optional.append(f"{name}: {exc.name}")
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
    else:
        imported.append(name)

for top in packages:
    import_one(top)
    package = sys.modules[top]
    for info in pkgutil.walk_packages(package.__path__, top + ".", onerror=import_one):
        if info.name.rpartition(".")[2] != "__main__":  # `python -m` entry points run a command when imported
            import_one(info.name)
third_party = sorted({name.partition(".")[0] for name in sys.modules} - present - set(packages) - {"__mp_main__"})
report(before=before, after=snapshot(), imported=imported, optional=optional, failed=failed, third_party=third_party)
"""

_CALLS = """
import sys
import numpy as np
import torch
from process_state_testing import record_mallopt, report, snapshot
import lucid_core
record_mallopt()
folder = sys.argv[1]
torch.manual_seed(0)
model = lucid_core.build_model("yolo26", "detect", "n", num_classes=3).eval()
lucid_core.save_model(model, folder + "/w", imgsz=64)
image = np.full((48, 64, 3), 114, np.uint8)
before = snapshot()
lucid_core.predict(model, image, imgsz=64)
lucid_core.predict(model, torch.zeros(2, 3, 48, 64, dtype=torch.uint8), imgsz=64, decode="topk")
lucid_core.predict(folder + "/w", [image, image], imgsz=64, conf=0.0)
loaded = lucid_core.load(folder + "/w")
lucid_core.predict(loaded.model, image, imgsz=loaded.imgsz)
report(before=before, after=snapshot())
"""

_CONTROL = """
from process_state_testing import report, snapshot
from lucid_core.allocator import tune_glibc_malloc
before = snapshot()
applied = tune_glibc_malloc()
report(before=before, after=snapshot(), applied=applied)
"""


def _assert_unchanged(result: dict[str, Any]) -> None:
    before, after = result["before"], result["after"]
    changed = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
    if "warnings.filters" in changed:  # (removed, added) filters, not two long lists
        old, new = changed["warnings.filters"]
        changed["warnings.filters"] = ([f for f in old if f not in new], [f for f in new if f not in old])
    assert changed == {}
    assert after["mallopt calls"] == [] and after["malloc tuning decided"] is None


def test_importing_every_module_of_every_package_changes_no_process_state() -> None:
    """Run twice: the first walk names the third-party packages it imports (lightning and sympy add warning filters
    of their own when imported), the second imports those before its first snapshot and is the one checked."""
    third_party = run_child(_WALK, ",".join(PACKAGES), "")["third_party"]
    result = run_child(_WALK, ",".join(PACKAGES), ",".join(third_party))
    assert result["failed"] == []
    assert set(PACKAGES) <= set(result["imported"])
    assert len(result["imported"]) > 100  # the walk reached the submodules
    _assert_unchanged(result)


def test_predict_and_load_change_no_process_state(tmp_path: Path) -> None:
    _assert_unchanged(run_child(_CALLS, str(tmp_path)))


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc mallopt")
def test_the_malloc_observable_sees_the_opt_in() -> None:
    """Control: the snapshot notices :func:`tune_glibc_malloc` (both the recorded calls' absence above and the
    mmap probe mean something)."""
    result = run_child(_CONTROL, env={"LUCID_MALLOC_TUNING": "1"})
    if result["before"]["large block mmapped"] is None:
        pytest.skip("glibc without mallinfo2")
    assert result["applied"] is True
    assert result["before"]["large block mmapped"] is True
    assert result["after"]["large block mmapped"] is False
    assert result["after"]["malloc tuning decided"] is True
