"""Every lucid_core module imports on its own, first, in a fresh interpreter (no circular-import order traps)."""

from __future__ import annotations

import subprocess
import sys

CODE = r"""
import importlib, pkgutil, sys
import lucid_core
names = sorted(m.name for m in pkgutil.walk_packages(lucid_core.__path__, "lucid_core."))
failures = []
for name in names:
    for loaded in [k for k in sys.modules if k == "lucid_core" or k.startswith("lucid_core.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:  # report all, not only the first
        failures.append(f"{name}: {type(exc).__name__}: {exc}")
print(len(names))
print("\n".join(failures))
"""


def test_each_core_module_imports_first() -> None:
    res = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    count, *failures = res.stdout.strip().split("\n")
    assert int(count) > 20
    assert [f for f in failures if f] == []
