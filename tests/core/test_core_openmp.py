"""lucid-train and lucid-predict set GOMP_SPINCOUNT before torch loads, and only when the user chose no policy."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from lucid_core.openmp import SPINCOUNT, limit_openmp_spinning

COMMAND_MODULES = ("lucid_train.cli", "lucid_core.predict_cli")


def _probe(module: str, prelude: str = "", **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    probe = (
        f"import os, sys; import {module}; print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", prelude + probe],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split("\n")[-2]


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_the_command_module_sets_the_spin_count_before_torch_is_loaded(module: str) -> None:
    # set, and torch was imported after it (by the command module's own imports)
    assert _probe(module) == f"{SPINCOUNT} True"


@pytest.mark.parametrize("variable", ["GOMP_SPINCOUNT", "OMP_WAIT_POLICY"])
def test_a_users_choice_is_kept(variable: str) -> None:
    value = "PASSIVE" if variable == "OMP_WAIT_POLICY" else "123"
    expected = "123" if variable == "GOMP_SPINCOUNT" else "None"
    assert _probe("lucid_core.predict_cli", **{variable: value}) == f"{expected} True"


def test_nothing_is_set_once_torch_is_loaded() -> None:
    assert _probe("lucid_core.predict_cli", "import torch; ") == "None True"
    env: dict[str, str] = {}
    importlib.import_module("torch")  # this test process has torch loaded whichever tests ran before
    assert "torch" in sys.modules
    assert limit_openmp_spinning(env) is False and env == {}
