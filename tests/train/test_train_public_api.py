"""lucid_train's top-level API (issue 14): every name in ``__all__`` resolves, ``import lucid_core, lucid_train``
imports neither Lightning nor matplotlib, and the README's top-level example uses only those names and runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from public_api_testing import api_examples, deep_lucid_uses

README = Path(__file__).resolve().parents[2] / "packages" / "lucid-train" / "README.md"


def test_every_name_in_all_resolves() -> None:
    import lucid_train

    assert [name for name in lucid_train.__all__ if getattr(lucid_train, name, None) is None] == []
    namespace: dict[str, object] = {}
    exec("from lucid_train import *", namespace)
    assert set(lucid_train.__all__) <= set(namespace)


def test_importing_the_packages_loads_no_lightning_or_matplotlib() -> None:
    code = "import sys, lucid_core, lucid_train\nprint([m for m in ('lightning', 'matplotlib') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_readme_example_uses_only_top_level_names() -> None:
    (example,) = api_examples(README)
    assert deep_lucid_uses(example) == []


@pytest.mark.slow
def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    (example,) = api_examples(README)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, str(README), "exec"), {"__name__": "readme_example"})
    for name in ("best.safetensors", "eval.json", "best.onnx"):
        assert (tmp_path / "demo" / "run" / name).is_file(), name
    assert sorted(p.name for p in (tmp_path / "demo" / "predictions").iterdir())
