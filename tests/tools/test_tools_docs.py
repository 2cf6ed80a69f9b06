"""The documentation site cannot rot (issue 20): every nav entry of ``mkdocs.yml`` is an existing file, every
notebook source has a nav entry, and the generated references list what the code declares."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import docs_hooks  # noqa: E402


def _nav_files(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [f for item in nav for f in _nav_files(item)]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    raise AssertionError(f"unexpected nav entry {nav!r}")


def _config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    return config


def test_every_nav_entry_points_at_an_existing_file() -> None:
    config = _config()
    docs_dir = REPO / config.get("docs_dir", "docs")
    files = _nav_files(config["nav"])
    assert files
    missing = [f for f in files if not (docs_dir / f).is_file()]
    assert missing == [], f"mkdocs.yml nav entries without a file under {docs_dir}: {missing}"


def test_every_notebook_source_has_a_nav_entry() -> None:
    files = set(_nav_files(_config()["nav"]))
    sources = sorted(p for p in (REPO / "notebooks").glob("*.py") if not p.name.startswith("_"))
    assert sources
    missing = [p.name for p in sources if f"notebooks/{p.name}" not in files]
    assert missing == [], f"notebooks without a docs nav entry: {missing}"


def test_cli_reference_covers_every_declared_console_script() -> None:
    scripts = docs_hooks.console_scripts(REPO)
    assert {"lucid-train", "lucid-eval", "lucid-predict", "lucid-data", "lucid-viz"} <= set(scripts)
    for target in scripts.values():
        module, _, function = target.partition(":")
        assert module and function, target
