"""Each release-guard rule fails on a small planted tree, naming the file, the import and the rule."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tool_testing import load_tool

REPO = Path(__file__).resolve().parents[2]
rg = load_tool("release_guard")

MAPPING = {
    "torch": ["torch"],
    "numpy": ["numpy"],
    "yaml": ["PyYAML"],
    "matplotlib": ["matplotlib"],
    "lightning": ["lightning"],
    "requests": ["requests"],
    "triton": ["triton"],
}


def plant(
    root: Path,
    name: str,
    deps: list[str],
    files: dict[str, str],
    *,
    version: str = "0.1.0",
    extras: dict[str, list[str]] | None = None,
) -> None:
    imp = name.replace("-", "_")
    pkg = root / "packages" / name
    (pkg / "src" / imp).mkdir(parents=True, exist_ok=True)
    lines = [
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = {deps!r}\n'.replace("'", '"')
    ]
    if extras:
        lines.append("[project.optional-dependencies]\n")
        for k, v in extras.items():
            lines.append(f"{k} = {v!r}\n".replace("'", '"'))
    (pkg / "pyproject.toml").write_text("".join(lines))
    (pkg / "src" / imp / "__init__.py").write_text("")
    for fname, body in files.items():
        (pkg / "src" / imp / fname).write_text(textwrap.dedent(body))


def violations(root: Path) -> list[str]:
    pkgs = rg.load_packages(root)
    return [str(v) for v in rg.check_imports(root, pkgs, MAPPING) + rg.check_versions(root, pkgs)]


def test_clean_tree_passes(tmp_path: Path) -> None:
    plant(
        tmp_path, "lucid-core", ["torch", "numpy"], {"a.py": "import torch\nimport numpy as np\nimport os\n"}
    )
    plant(
        tmp_path,
        "lucid-viz",
        ["lucid-core>=0.1,<0.2", "matplotlib"],
        {"b.py": "import matplotlib\nimport lucid_core\n"},
    )
    assert violations(tmp_path) == []


def test_rule1_undeclared_import(tmp_path: Path) -> None:
    plant(tmp_path, "lucid-core", ["torch"], {"io.py": "import torch\nimport requests\n"})
    (msg,) = violations(tmp_path)
    assert "packages/lucid-core/src/lucid_core/io.py" in msg
    assert "import requests" in msg and "[rule 1-imports]" in msg


def test_rule1_extra_must_be_guarded(tmp_path: Path) -> None:
    plant(
        tmp_path,
        "lucid-data",
        ["lucid-core>=0.1,<0.2"],
        {
            "bad.py": "import yaml\n",
            "good.py": """
            try:
                import yaml
            except ImportError as e:
                raise ImportError("install lucid-data[yaml]") from e
            def lazy():
                import yaml
        """,
        },
        extras={"yaml": ["pyyaml"]},
    )
    plant(tmp_path, "lucid-core", [], {})
    out = violations(tmp_path)
    assert len(out) == 1, out
    assert (
        "bad.py" in out[0] and "import yaml" in out[0] and "extra [yaml]" in out[0] and "1-imports" in out[0]
    )


def test_rule2_forbidden_in_core_even_guarded(tmp_path: Path) -> None:
    plant(tmp_path, "lucid-core", ["torch", "matplotlib"], {"plot.py": "def f():\n    import matplotlib\n"})
    (msg,) = violations(tmp_path)
    assert "plot.py" in msg and "import matplotlib" in msg and "[rule 2-tiers]" in msg


def test_rule2_sibling_graph(tmp_path: Path) -> None:
    plant(tmp_path, "lucid-core", [], {"x.py": "import lucid_data\n"})
    plant(tmp_path, "lucid-data", ["lucid-core>=0.1,<0.2"], {})
    plant(tmp_path, "lucid-viz", [], {"y.py": "from lucid_core import geometry\n"})
    out = violations(tmp_path)
    assert any("x.py" in m and "import lucid_data" in m and "tier graph" in m and "2-tiers" in m for m in out)
    assert any("y.py" in m and "lucid_core" in m and "not declared" in m and "2-tiers" in m for m in out)


def test_rule3_sibling_range_must_admit_version(tmp_path: Path) -> None:
    plant(tmp_path, "lucid-core", [], {}, version="0.2.0")
    plant(tmp_path, "lucid-data", ["lucid-core>=0.1,<0.2"], {"z.py": "import lucid_core\n"})
    (msg,) = violations(tmp_path)
    assert "packages/lucid-data/pyproject.toml" in msg and "lucid-core" in msg and "0.2.0" in msg
    assert "[rule 3-versions]" in msg


def test_rule4_copyleft_in_closure(tmp_path: Path) -> None:
    plant(tmp_path, "lucid-core", ["torch"], {})
    (tmp_path / "uv.lock").write_text(
        textwrap.dedent("""
        version = 1
        [[package]]
        name = "lucid-core"
        version = "0.1.0"
        dependencies = [{ name = "torch" }]
        [[package]]
        name = "torch"
        version = "9.0"
        dependencies = [{ name = "sneaky" }, { name = "winonly", marker = "sys_platform == 'win32'" }]
        [[package]]
        name = "sneaky"
        version = "1.0"
        [[package]]
        name = "winonly"
        version = "1.0"
    """)
    )
    licences = {"torch": "BSD-3-Clause", "sneaky": "GPL-3.0-or-later", "winonly": "AGPL-3.0"}
    table: list[str] = []
    out = rg.check_licences(
        tmp_path,
        rg.load_packages(tmp_path),
        licence_of=licences.get,
        env={
            "sys_platform": "linux",
            "python_version": "3.11",
            "python_full_version": "3.11.7",
            "platform_machine": "x86_64",
        },
        report=table.append,
    )
    assert [str(v) for v in out] == [
        "uv.lock: sneaky 1.0: copyleft licence 'GPL-3.0-or-later' in the runtime closure of lucid-core [rule 4-licences]"
    ]
    assert any("sneaky" in row and "GPL" in row for row in table)


def test_rule4_copyleft_in_a_dependency_group(tmp_path: Path) -> None:
    plant(tmp_path, "lucid-core", [], {})
    (tmp_path / "uv.lock").write_text(
        textwrap.dedent("""
        version = 1
        [[package]]
        name = "lucid-core"
        version = "0.1.0"
        [[package]]
        name = "workspace"
        version = "0.1.0"
        source = { virtual = "." }
        [package.dev-dependencies]
        docs = [{ name = "sitegen" }]
        [[package]]
        name = "sitegen"
        version = "2.0"
        dependencies = [{ name = "themer" }]
        [[package]]
        name = "themer"
        version = "1.0"
    """)
    )
    licences = {"sitegen": "BSD-2-Clause", "themer": "GPL-2.0"}
    table: list[str] = []
    out = rg.check_licences(
        tmp_path, rg.load_packages(tmp_path), licence_of=licences.get, env={}, report=table.append
    )
    assert [str(v) for v in out] == [
        "uv.lock: themer 1.0: copyleft licence 'GPL-2.0' in the dependency group 'docs' (dev/docs tools are "
        "audited too) [rule 4-licences]"
    ]
    assert any(row.startswith("[docs]") and "themer" in row for row in table)


def test_real_workspace_is_clean() -> None:
    out = rg.run(REPO, licences=True, quiet=True)
    assert [str(v) for v in out] == []
