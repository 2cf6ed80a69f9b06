"""Loading a script of tools/ (not a package) as a module under its own name, for the tests of tests/tools."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS_DIR = Path(__file__).resolve().parents[1] / "tools"


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` executed as module ``name`` and registered in ``sys.modules`` (a tool that imports
    another by name, with tools/ on ``sys.path``, then shares this instance). An already loaded one is returned."""
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, "__file__", "")).resolve() == TOOLS_DIR / f"{name}.py":
        return loaded
    spec = importlib.util.spec_from_file_location(name, TOOLS_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
