"""lucid-train sets GOMP_SPINCOUNT before torch loads, and only when the user chose no OpenMP wait policy."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from lucid_train.openmp import SPINCOUNT, limit_openmp_spinning

PROBE = (
    "import os, sys; import lucid_train.cli; print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)"
)


def _probe(prelude: str = "", **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    result = subprocess.run(
        [sys.executable, "-c", prelude + PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split("\n")[-2]


def test_the_cli_module_sets_the_spin_count_before_torch_is_loaded() -> None:
    assert _probe() == f"{SPINCOUNT} True"  # set, and torch was imported after it (by the CLI's imports)


@pytest.mark.parametrize("variable", ["GOMP_SPINCOUNT", "OMP_WAIT_POLICY"])
def test_a_users_choice_is_kept(variable: str) -> None:
    value = "PASSIVE" if variable == "OMP_WAIT_POLICY" else "123"
    expected = "123" if variable == "GOMP_SPINCOUNT" else "None"
    assert _probe(**{variable: value}) == f"{expected} True"


def test_nothing_is_set_once_torch_is_loaded() -> None:
    assert _probe("import torch; ") == "None True"
    env: dict[str, str] = {}
    importlib.import_module("torch")  # this test process has torch loaded whichever tests ran before
    assert "torch" in sys.modules
    assert limit_openmp_spinning(env) is False and env == {}
