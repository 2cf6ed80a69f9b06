"""MkDocs hooks of the documentation site (``mkdocs.yml`` ``hooks:``): pages generated from the code itself.

- ``<!-- lucid:cli-reference -->`` in a page becomes the ``--help`` of every console script the packages declare
  (``[project.scripts]`` of ``packages/*/pyproject.toml``; ``lucid-train`` also per subcommand), run in a
  subprocess at build time, so the reference is always the parsers' own text.
- ``<!-- lucid:api-reference -->`` becomes the public API: every name in each package's ``__all__`` with its
  signature and docstring (``inspect``), so a renamed or undocumented export shows up in the site.
"""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("lucid_core", "lucid_data", "lucid_train", "lucid_viz", "lucid_accel")
SUBCOMMANDS = {"lucid-train": ("fit", "validate")}
CLI_MARK = "<!-- lucid:cli-reference -->"
API_MARK = "<!-- lucid:api-reference -->"


def console_scripts(repo: Path = REPO) -> dict[str, str]:
    """``{script: "module:function"}`` over every package's ``pyproject.toml``, sorted by name."""
    scripts: dict[str, str] = {}
    for pyproject in sorted((repo / "packages").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        scripts.update(project.get("scripts", {}))
    return dict(sorted(scripts.items()))


def _help(script: str, *args: str) -> str:
    exe = Path(sys.executable).with_name(script)
    command = [str(exe) if exe.exists() else script, *args, "--help"]
    env = {**os.environ, "COLUMNS": "110", "NO_COLOR": "1"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"docs: `{' '.join(command)}` exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout.rstrip()


def cli_reference() -> str:
    parts = []
    for script, target in console_scripts().items():
        parts.append(f"## `{script}`\n\nEntry point `{target}`.\n\n```text\n{_help(script)}\n```\n")
        for sub in SUBCOMMANDS.get(script, ()):
            parts.append(f"### `{script} {sub}`\n\n```text\n{_help(script, sub)}\n```\n")
    return "\n".join(parts)


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""


def api_reference() -> str:
    parts = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        names = list(getattr(module, "__all__", []))
        parts.append(f"## `{package}`\n\n{inspect.getdoc(module) or ''}\n")
        for name in names:
            obj = getattr(module, name)
            kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "value"
            signature = _signature(obj) if kind != "value" else ""
            doc = inspect.getdoc(obj) if kind != "value" else repr(obj)
            parts.append(f"### `{package}.{name}{signature}`\n\n*{kind}*\n\n{doc or '(no docstring)'}\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    if API_MARK in markdown:
        markdown = markdown.replace(API_MARK, api_reference())
    return markdown
