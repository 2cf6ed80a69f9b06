"""lucid_data's top-level API (issue 14): every name in ``__all__`` resolves; the README's top-level example uses
only those names and runs."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "packages" / "lucid-data" / "README.md"
MARKER = "<!-- example: top-level API"


def api_examples(readme: Path) -> list[str]:
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
    """Uses of lucid packages below their top level (see tests/core/test_core_public_api.py)."""
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


@pytest.mark.parametrize("package", ["lucid_data", "lucid_viz", "lucid_accel"])
def test_every_name_in_all_resolves(package: str) -> None:
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


def test_readme_example_uses_top_level_names_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = api_examples(README)
    assert deep_lucid_uses(example) == []
    monkeypatch.chdir(tmp_path)
    exec(compile(example, str(README), "exec"), {"__name__": "readme_example"})
    assert (tmp_path / "demo" / "shapes" / "data.yaml").is_file()
