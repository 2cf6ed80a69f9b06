"""Helpers of the public-API tests (issue 14; imported by ``tests/*/test_*_public_api.py``, not a test module):
the README's marked top-level examples and the lucid names they use below a package's top level."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

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
