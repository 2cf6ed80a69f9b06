"""Import hygiene, in fresh interpreters: core and training never pull matplotlib in; lucid_viz never picks a
backend, never imports pyplot and never closes a caller's figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap


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
    # Only the top-level packages and lucid_core's own modules: lucid_train's modules may grow, and the one
    # that writes plots imports lucid_viz lazily, at the end of fit.
    found = run_python(
        """
        import importlib, json, pkgutil, sys
        import lucid_core, lucid_train
        after_top_level = sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "lucid_viz"))
        failed = {}
        for info in pkgutil.walk_packages(lucid_core.__path__, "lucid_core.", onerror=lambda name: None):
            try:
                importlib.import_module(info.name)
            except Exception as error:  # a module another engineer is still writing
                failed[info.name] = repr(error)
        after_core = sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "lucid_viz"))
        print(json.dumps({"top": after_top_level, "core": after_core, "failed": failed}))
        """
    )
    assert found["top"] == [], f"import lucid_core, lucid_train pulled in {found['top']}"
    assert found["core"] == [], f"lucid_core modules pulled in {found['core']}"


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
        print(json.dumps({"before": str(before), "after": str(after), "pyplot": pyplot,
                          "backend": matplotlib.get_backend()}))
    """
    plain = run_python(probe.replace("IMPORT_VIZ", "False"))
    viz = run_python(probe.replace("IMPORT_VIZ", "True"))
    assert viz["before"] == viz["after"], "importing lucid_viz changed rcParams['backend']"
    assert viz["backend"] == plain["backend"]
    assert viz["pyplot"] is False
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


def test_viz_modules_do_not_import_lucid_data() -> None:
    found = run_python(
        """
        import json, sys
        import lucid_viz.training, lucid_viz.cli
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "lucid_data")))
        """
    )
    assert found == []
