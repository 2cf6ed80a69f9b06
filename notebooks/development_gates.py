# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Development gates: overfit goldens and benchmarks
#
# The gates a change must pass before it lands, as `docs/TRAINING.md` ("Goldens") and the benchmarks page spell
# them:
#
# ```bash
# make goldens                     # uv run python tools/check_goldens.py: every goldens/*.json case inside its band
# make bench                       # tools/bench/*.py, each printing a ratio against a baseline of the same run
# uv run python tools/bench/data.py --vs-reference   # ours beside the incumbent (../shared/refbench)
# ```
#
# Under `LUCID_NOTEBOOK_FAST=1` this notebook lists the golden cases with their bands and trains one case for a
# couple of steps (to show the mechanism, not to judge it); the full run executes `make goldens` and `make bench`.

# %%
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(os.environ.get("LUCID_REPO", Path.cwd()))  # the checkout (make notebooks / the test set it)
while not (REPO / "goldens").is_dir() and REPO != REPO.parent:
    REPO = REPO.parent
sys.path.insert(0, str(REPO / "tools"))
import check_goldens  # noqa: E402

FAST = os.environ.get("LUCID_NOTEBOOK_FAST") == "1"

# %% [markdown]
# ## The golden cases and their bands

# %%
cases = check_goldens.load_cases()
for case in cases:
    task = check_goldens.case_task(case)
    print(f"{case['name']:<24} task {task:<8} steps {case['train'].get('steps')}  band {json.dumps(case['band'])}")

# %% [markdown]
# ## One case, shrunk (fast) or every case (full)

# %%
if FAST:
    case = next(c for c in cases if c["data"]["kind"] == "synth")
    probe = json.loads(json.dumps(case))
    probe["train"].update(epochs=1, steps=None)
    probe["data"].update(n_train=4)
    probe["train"]["batch_size"] = 4
    metrics = check_goldens.run_case(probe)
    print({k: round(v, 4) for k, v in metrics.items()})
    print("would fail the band:" if check_goldens.check_case(case, metrics) else "inside the band:", case["band"])
else:
    subprocess.run(["make", "goldens"], cwd=REPO, check=True)

# %% [markdown]
# ## Benchmarks (full run only: each prints its own ratio against a baseline measured in the same run)

# %%
if not FAST:
    subprocess.run(["make", "bench"], cwd=REPO, check=True)
else:
    print("make bench  # skipped in the fast contract")
