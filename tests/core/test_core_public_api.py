"""lucid_core's top-level API (issue 14): every name in ``__all__`` resolves, ``import lucid_core`` stays light,
``lucid_core.predict`` stays the function, and the README's top-level example uses only those names and runs."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "packages" / "lucid-core" / "README.md"
MARKER = "<!-- example: top-level API"


def api_examples(readme: Path) -> list[str]:
    """The ```python blocks right after a ``<!-- example: top-level API`` line of ``readme``."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.startswith(MARKER):
            assert lines[i + 1] == "```python", (
                f"{readme}:{i + 2}: expected a ```python block after the marker"
            )
            end = lines.index("```", i + 2)
            blocks.append("\n".join(lines[i + 2 : end]))
    return blocks


def deep_lucid_uses(code: str) -> list[str]:
    """Uses of lucid packages below their top level: ``import lucid_x.y``, ``from lucid_x.y import``, or a name
    taken from / looked up on a lucid package that is not in its ``__all__``."""
    problems = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            problems += [a.name for a in node.names if a.name.startswith("lucid_") and "." in a.name]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lucid_"):
            module = str(node.module)
            if "." in module:
                problems.append(module)
                continue
            public = set(importlib.import_module(module).__all__)
            problems += [f"{module}.{a.name}" for a in node.names if a.name not in public]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id.startswith("lucid_")
            and node.attr not in set(importlib.import_module(node.value.id).__all__)
        ):
            problems.append(f"{node.value.id}.{node.attr}")
    return problems


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
        "import lucid_core.predict\n"
        "from lucid_core.predict import predict_prepared\n"
        "print(heavy, callable(lucid_core.predict), lucid_core.predict.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "True", "lucid_core.predict"]


def test_readme_example_uses_top_level_names_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = api_examples(README)
    assert deep_lucid_uses(example) == []
    monkeypatch.chdir(tmp_path)
    exec(compile(example, str(README), "exec"), {"__name__": "readme_example"})
    assert (tmp_path / "demo" / "yolo26n.onnx").is_file()
