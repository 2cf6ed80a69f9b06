"""lucid_core's top-level API (issue 14): every name in ``__all__`` resolves, ``import lucid_core`` stays light,
``lucid_core.predict`` stays the function, and the README's top-level example uses only those names and runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from public_api_testing import api_examples, deep_lucid_uses

README = Path(__file__).resolve().parents[2] / "packages" / "lucid-core" / "README.md"


def test_every_name_in_all_resolves() -> None:
    import lucid_core

    missing = [name for name in lucid_core.__all__ if getattr(lucid_core, name, None) is None]
    assert missing == []
    namespace: dict[str, object] = {}
    exec("from lucid_core import *", namespace)
    assert set(lucid_core.__all__) <= set(namespace)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = lucid_core.no_such_name  # type: ignore[attr-defined]


def test_import_is_light_and_predict_stays_the_function() -> None:
    code = (
        "import sys, lucid_core\n"
        "heavy = [m for m in ('torch', 'lightning', 'matplotlib') if m in sys.modules]\n"
        "import lucid_core.inference\n"
        "from lucid_core.inference import predict_prepared\n"
        "print(heavy, callable(lucid_core.predict), lucid_core.predict.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "True", "lucid_core.inference"]


def test_readme_example_uses_top_level_names_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = api_examples(README)
    assert deep_lucid_uses(example) == []
    monkeypatch.chdir(tmp_path)
    exec(compile(example, str(README), "exec"), {"__name__": "readme_example"})
    assert (tmp_path / "demo" / "yolo26n.onnx").is_file()
