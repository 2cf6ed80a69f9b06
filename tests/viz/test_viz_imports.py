"""Import hygiene: core and training never pull matplotlib in (a fresh interpreter, plus a scan of every module's
imports); lucid_viz never picks a backend, never imports pyplot or lucid_data, never closes a caller's figure."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path


def run_python(code: str, **env_overrides: str | None) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON object as its last line."""
    env = {key: value for key, value in os.environ.items() if key != "MPLBACKEND"}
    for key, value in env_overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    env.setdefault("OMP_NUM_THREADS", "1")
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_core_and_train_do_not_import_matplotlib() -> None:
    found = run_python(
        """
        import json, sys
        import lucid_core, lucid_train
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "lucid_viz"))))
        """
    )
    assert found == [], f"import lucid_core, lucid_train pulled in {found}"


PLOTTING_ROOTS = {"matplotlib", "pylab", "lucid_viz"}


def plotting_imports(path: Path, *, inside_functions: bool) -> list[str]:
    """``file:line module`` of each import of matplotlib / lucid_viz in ``path``; imports inside a function
    body (lazy, run only when plots are made) are skipped unless ``inside_functions``."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if (
                isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                and not inside_functions
            ):
                continue
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            found.extend(f"{path}:{child.lineno} {n}" for n in names if n.split(".")[0] in PLOTTING_ROOTS)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return found


def test_no_module_of_core_or_train_imports_plotting_at_import_time(repo_root: Path) -> None:
    # Every module, present and future (importing them all at run time would cost many seconds of CPU):
    # lucid_core never imports matplotlib or lucid_viz at all; lucid_train only inside a function, the guarded
    # call at the end of fit (issue 8).
    core = sorted((repo_root / "packages/lucid-core/src/lucid_core").rglob("*.py"))
    train = sorted((repo_root / "packages/lucid-train/src/lucid_train").rglob("*.py"))
    assert core and train
    offending = [hit for path in core for hit in plotting_imports(path, inside_functions=True)]
    offending += [hit for path in train for hit in plotting_imports(path, inside_functions=False)]
    assert offending == []


def test_the_import_scan_sees_module_level_and_lazy_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\ntry:\n    import matplotlib.pyplot as plt\nexcept ImportError:\n    plt = None\n"
        "def fit():\n    from lucid_viz.training import write_fit_plots\n"
    )
    assert [hit.split()[-1] for hit in plotting_imports(sample, inside_functions=False)] == [
        "matplotlib.pyplot"
    ]
    assert len(plotting_imports(sample, inside_functions=True)) == 2


def test_importing_lucid_viz_keeps_the_backend_and_pyplot_untouched() -> None:
    probe = """
        import importlib, json, pkgutil, sys
        import matplotlib
        before = dict.__getitem__(matplotlib.rcParams, "backend")
        if IMPORT_VIZ:
            import lucid_viz
            for info in pkgutil.walk_packages(lucid_viz.__path__, "lucid_viz."):
                importlib.import_module(info.name)
        after = dict.__getitem__(matplotlib.rcParams, "backend")
        pyplot = "matplotlib.pyplot" in sys.modules  # read before get_backend(), which may import pyplot
        data = sorted(m for m in sys.modules if m.split(".")[0] == "lucid_data")
        print(json.dumps({"before": str(before), "after": str(after), "pyplot": pyplot, "lucid_data": data,
                          "backend": matplotlib.get_backend()}))
    """
    plain = run_python(probe.replace("IMPORT_VIZ", "False"))
    viz = run_python(probe.replace("IMPORT_VIZ", "True"))
    assert viz["before"] == viz["after"], "importing lucid_viz changed rcParams['backend']"
    assert viz["backend"] == plain["backend"]
    assert viz["pyplot"] is False
    assert viz["lucid_data"] == [], "lucid_viz reads targets by duck typing, it must not import lucid_data"
    chosen = run_python(probe.replace("IMPORT_VIZ", "True"), MPLBACKEND="svg")
    assert chosen["backend"].lower() == "svg", "a backend chosen by the user survives importing lucid_viz"


def test_drawing_leaves_pyplot_figures_alone() -> None:
    found = run_python(
        """
        import json
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
        fig = plt.figure()
        before = plt.get_fignums()
        import lucid_viz
        image = np.zeros((32, 48, 3), np.uint8)
        lucid_viz.draw_predictions(image, {"boxes": [[1, 1, 20, 20]], "scores": [0.9], "labels": [0]}, "detect")
        lucid_viz.plot_curves([{"epoch": 1, "train/box_loss": 1.0}, {"epoch": 2, "train/box_loss": 0.5}])
        lucid_viz.draw_grid([image, image], [None, None], "detect")
        print(json.dumps({"before": before, "after": plt.get_fignums(), "current": plt.gcf() is fig}))
        """
    )
    assert found["before"] == found["after"] == [1]
    assert found["current"] is True
