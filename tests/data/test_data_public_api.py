"""lucid_data's top-level API (issue 14): every name in ``__all__`` resolves; the README's top-level example uses
only those names and runs."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from public_api_testing import api_examples, deep_lucid_uses

README = Path(__file__).resolve().parents[2] / "packages" / "lucid-data" / "README.md"


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
