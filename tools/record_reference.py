"""Record the reference's seed distribution of a gate's recipe, black box, and score it with our evaluator.

- ``record GATE --seeds 0 1 2``: runs ``../shared/refbench/run.sh train`` once per seed, one after the other, into
  ``runs/fidelity/ref/<gate>/seed<s>/`` (git-ignored): the reference's own ``train()`` with the gate's recipe
  (:func:`reference_settings`), per-epoch checkpoints ``weights/epoch<e>.pt``. A seed whose last checkpoint exists is
  skipped, so an interrupted recording resumes. The data is a copy under ``runs/fidelity/data/`` (the reference
  writes label caches next to the labels): the shared folder copied, or the gate's synthesized dataset.
- ``score GATE``: scores every recorded checkpoint of every seed with our current evaluator and importer
  (``check_trajectory.score_checkpoints``, the gate's protocol) and writes ``tools/fidelity/<gate>.json`` with the
  provenance: recipe, seeds, machine class, reference version, lucid-core version and :func:`evaluator_version`,
  and per seed the machine and the reference's version (with its torch build) it was recorded with. A seed already
  in the file whose checkpoints are not here is kept when the file was scored by the current evaluator
  (:func:`merge_runs`), so seeds recorded on other machines add up.
- ``--rescore``: re-scores the canary checkpoints under ``tests/data/fidelity/`` and rewrites their committed figures
  (``canary.json``). When the canary test fails, the evaluator moved: run ``--rescore``, then ``score`` every gate
  (the reference's checkpoints must be recorded again on a machine without them).

Every gate is one of ``check_trajectory.GATES``. Usage: ``uv run --no-sync python tools/record_reference.py
{record,score} GATE [--seeds ...]`` or ``... --rescore``.
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from lucid_core.tasks import get_task

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_trajectory as ct  # tools/ is not a package: the directory is on sys.path
from compare_val_losses import reference_val_losses

REPO_ROOT = ct.REPO_ROOT
RUNS_DIR = REPO_ROOT / "runs" / "fidelity"
DATA_DIR = RUNS_DIR / "data"
REF_DIR = RUNS_DIR / "ref"
REFBENCH = ct.SHARED_DIR / "refbench" / "run.sh"
CANARY_DIR = REPO_ROOT / "tests" / "data" / "fidelity"
CANARY_FILE = CANARY_DIR / "canary.json"
#: the committed canary checkpoints: file name -> gate (a reference run's final ``last.pt``, renamed so that
#: .gitignore's ``*.pt`` does not hide it)
CANARIES: dict[str, str] = {"shapes_yolo26n_detect_seed0_last.refpt": "shapes_yolo26n_detect"}
#: the recorded run and 0-based epoch of each canary: where its reference's own ``val/<item>`` figures are read
CANARY_RUNS: dict[str, tuple[int, int]] = {"shapes_yolo26n_detect_seed0_last.refpt": (0, 9)}

#: the embedded default run's settings (lucid_train/configs/shapes_default.yaml) as ../shared/trajectories/README.md
#: records the reference was run for shapes_yolo26n_adamw.json; ``workers=1`` as our recipe (the README names none)
REFERENCE_SETTINGS: dict[str, object] = {
    "epochs": 10,
    "batch": 16,
    "imgsz": 96,
    "optimizer": "AdamW",
    "lr0": 0.004,
    "momentum": 0.9,
    "nbs": 16,
    "warmup_epochs": 1.0,
    "close_mosaic": 3,
    "workers": 1,
}
#: beside a recorded seed's run: the machine class and the refbench venv's packages it was recorded with
PROVENANCE_FILE = "provenance.json"
REFBENCH_PACKAGES = ("torch", "torchvision", "opencv-python", "numpy")
THREADS = 1  # refbench's --threads: one core for the reference, the other for everyone else
#: the source the scores depend on: the importer, the model, decoding/NMS, letterboxing, the COCO evaluator and
#: classification's evaluation crop and accuracy
EVALUATOR_SOURCES = (
    "packages/lucid-core/src/lucid_core/interop",
    "packages/lucid-core/src/lucid_core/models",
    "packages/lucid-core/src/lucid_core/nn",
    "packages/lucid-core/src/lucid_core/heads",
    "packages/lucid-core/src/lucid_core/decode",
    "packages/lucid-core/src/lucid_core/geometry",
    "packages/lucid-core/src/lucid_core/postprocess.py",
    "packages/lucid-core/src/lucid_core/inference.py",
    "packages/lucid-data/src/lucid_data/rect.py",
    "packages/lucid-data/src/lucid_data/augment/classify.py",  # classification's resize + centre crop
    "packages/lucid-train/src/lucid_train/eval",
)


def gate(name: str) -> ct.Gate:
    return ct.select_gates([name])[0]


def reference_settings(g: ct.Gate) -> dict[str, object]:
    """The reference's ``train()`` settings of ``g``'s recipe (its key names, docs.ultralytics.com/usage/cfg):
    :data:`REFERENCE_SETTINGS` for the dense gates; ``close_mosaic`` only where the recipe sets it."""
    r = g.recipe
    settings: dict[str, object] = {
        "epochs": r.epochs,
        "batch": r.batch_size,
        "imgsz": r.imgsz,
        "optimizer": r.optimizer["name"],
        "lr0": r.optimizer["lr0"],
        "momentum": r.optimizer["momentum"],
        "nbs": r.optimizer["nominal_batch"],
        "warmup_epochs": r.optimizer["warmup_epochs"],
    }
    if "close_mosaic" in r.augment:
        settings["close_mosaic"] = r.augment["close_mosaic"]
    return {**settings, "workers": r.workers}


def evaluator_version() -> dict[str, str]:
    """lucid-core's version and a short hash of :data:`EVALUATOR_SOURCES` (every ``.py`` file, path and bytes)."""
    return {
        "lucid_core": importlib.metadata.version("lucid-core"),
        "evaluator_sha256": ct.sources_digest(EVALUATOR_SOURCES, REPO_ROOT),
        "sources": ", ".join(EVALUATOR_SOURCES),
    }


def machine_class() -> dict[str, str]:
    """The CPU model (``/proc/cpuinfo``) and its core count, where the reference was recorded."""
    model = platform.processor() or "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(encoding="utf-8"), re.M)
        model = names[0].strip() if names else model
        cores = str(len(names))
    else:
        cores = "unknown"
    return {"cpu": model, "cpus": cores, "machine": platform.machine()}


def refbench_packages() -> dict[str, str]:
    """The versions of the packages in the refbench venv that move the reference's numbers (its torch build, the
    OpenCV its augmentation warps with, numpy), read from the venv's metadata; {} where the venv cannot say."""
    venv = Path(os.environ.get("LUCID_REFBENCH_VENV", Path.home() / ".cache" / "lucid-refbench" / "venv"))
    code = (
        "import importlib.metadata as m, json\n"
        f"names = {list(REFBENCH_PACKAGES)!r}\n"
        "versions = {}\n"
        "for name in names:\n"
        "    try:\n"
        "        versions[name] = m.version(name)\n"
        "    except m.PackageNotFoundError:\n"
        "        pass\n"
        "print(json.dumps(versions))"
    )
    try:
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return {str(k): str(v) for k, v in json.loads(done.stdout).items()}


def dataset_yaml(g: ct.Gate) -> Path:
    """The gate's dataset copy for the reference (made on first use), as ``reference.yaml``: its data YAML with an
    absolute ``path`` (refbench runs in a temporary folder). An image-level task's (classify) synthesized set is
    passed as its folder-per-class root, absolute (the reference's ``data=`` for classification)."""
    data = g.recipe.data
    if data.startswith("synth:"):
        synthesized = ct.synth_dataset(data.removeprefix("synth:"), DATA_DIR, imgsz=g.recipe.imgsz)
        if synthesized.is_dir():
            return synthesized.resolve()
        root = synthesized.parent
    else:
        source = (ct.SHARED_DIR / data).parent
        root = DATA_DIR / source.name
        if not root.is_dir():
            shutil.copytree(source, root)
    settings = yaml.safe_load((root / "data.yaml").read_text(encoding="utf-8"))
    settings["path"] = str(root.resolve())
    out = root / "reference.yaml"
    out.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    return out


def seed_dir(g: ct.Gate, seed: int) -> Path:
    return REF_DIR / g.name / f"seed{seed}"


def recorded_seeds(g: ct.Gate) -> list[int]:
    """The seeds with a run folder under :data:`REF_DIR` for ``g``, ascending."""
    return sorted(int(p.name.removeprefix("seed")) for p in (REF_DIR / g.name).glob("seed*") if p.is_dir())


def seed_finished(g: ct.Gate, seed: int) -> bool:
    return (seed_dir(g, seed) / "weights" / f"epoch{g.recipe.epochs - 1}.pt").is_file()


def refbench_command(model: Path, project: Path, settings: dict[str, Any], threads: int) -> list[str]:
    """The ``run.sh train`` command line for the reference's ``train()`` from ``model`` into ``project`` with
    ``settings`` (its key names; None is passed as ``null``)."""
    cmd = [
        str(REFBENCH),
        "train",
        "--threads",
        str(threads),
        "--model",
        str(model),
        "--project",
        str(project),
    ]
    return cmd + [f"{k}={'null' if v is None else v}" for k, v in settings.items()]


def refbench_train(model: Path, project: Path, settings: dict[str, Any], threads: int, log: Path) -> None:
    """The reference's ``train()`` (:func:`refbench_command`), its output in ``log``; a failure is a RuntimeError
    naming the log."""
    cmd = refbench_command(model, project, settings, threads)
    with open(log, "w", encoding="utf-8") as stream:
        done = subprocess.run(cmd, stdout=stream, stderr=subprocess.STDOUT, check=False)
    if done.returncode:
        raise RuntimeError(f"the reference's train() failed (exit {done.returncode}); its log: {log}")


def record(g: ct.Gate, seeds: list[int]) -> None:
    """Run the reference's ``train()`` for each unfinished seed, sequentially; its log goes to ``seed<s>.log``."""
    data = dataset_yaml(g)
    for seed in seeds:
        if seed_finished(g, seed):
            print(f"{g.name} seed {seed}: done, skipped", flush=True)
            continue
        out = seed_dir(g, seed)
        if out.exists():
            shutil.rmtree(out)  # an interrupted seed restarts from scratch
        out.parent.mkdir(parents=True, exist_ok=True)
        settings = {**reference_settings(g), "data": str(data), "seed": seed, "name": out.name}
        cmd = [str(REFBENCH), "train", "--threads", str(THREADS), "--model", g.reference_model]
        cmd += ["--project", str(out.parent), *(f"{k}={v}" for k, v in settings.items())]
        print(f"{g.name} seed {seed}: {' '.join(cmd)}", flush=True)
        with open(out.parent / f"seed{seed}.log", "w", encoding="utf-8") as log:
            subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        recorded = {"machine_class": machine_class(), "refbench_packages": refbench_packages()}
        (out / PROVENANCE_FILE).write_text(json.dumps(recorded) + "\n", encoding="utf-8")


def reference_version(log: Path) -> str:
    """The reference's version and its torch build as its training log prints them (``Ultralytics 8.4.190 🚀
    Python-3.11.7 torch-2.15.0+cu132 CPU ...`` -> ``ultralytics 8.4.190, torch 2.15.0+cu132``)."""
    text = log.read_text(encoding="utf-8", errors="replace")
    found = re.search(r"Ultralytics (\d+\.\d+\.\d+)", text)
    if not found:
        return "unknown"
    torch_build = re.search(r"torch-(\S+)", text[found.start() : found.start() + 300])
    return f"ultralytics {found.group(1)}" + (f", torch {torch_build.group(1)}" if torch_build else "")


def seed_provenance(g: ct.Gate, seed: int) -> dict[str, Any]:
    """Where and with what a seed was recorded: its reference version (from its log), and the machine class and
    refbench packages of ``provenance.json`` beside its run (this machine's class, and no packages, for a run
    recorded before that file existed)."""
    path = seed_dir(g, seed) / PROVENANCE_FILE
    recorded = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    provenance: dict[str, Any] = {
        "reference_version": reference_version(REF_DIR / g.name / f"seed{seed}.log"),
        "machine_class": dict(recorded.get("machine_class") or machine_class()),
    }
    if recorded.get("refbench_packages"):
        provenance["refbench_packages"] = dict(recorded["refbench_packages"])
    return provenance


def merge_runs(
    committed: dict[str, Any] | None,
    scored: dict[str, list[dict[str, Any]]],
    provenance: dict[str, dict[str, Any]],
    evaluator_sha256: str,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, Any]]]:
    """The runs (and per-seed provenance) of a distribution: the seeds scored here, plus every seed of the
    ``committed`` file that was not, provided that file was scored by the evaluator ``evaluator_sha256`` names.

    A committed seed missing here under another evaluator cannot be re-scored: :class:`SystemExit` names the seeds
    to record again (or to drop by removing the file). A committed file from before per-seed provenance gives
    its seeds the file's machine class and reference version."""
    runs, seeds_provenance = dict(scored), dict(provenance)
    if not committed:
        return runs, seeds_provenance
    missing = sorted((s for s in committed["runs"] if s not in scored), key=int)
    if not missing:
        return runs, seeds_provenance
    if committed["scored_with"]["evaluator_sha256"] != evaluator_sha256:
        raise SystemExit(
            f"{committed['gate']}: seeds {', '.join(missing)} of the committed distribution were scored by evaluator "
            f"{committed['scored_with']['evaluator_sha256']} and have no checkpoints here to re-score with "
            f"{evaluator_sha256}: record them again (record --seeds {' '.join(missing)})"
        )
    before = committed.get("provenance", {})
    for seed in missing:
        runs[seed] = committed["runs"][seed]
        seeds_provenance[seed] = before.get(
            seed,
            {
                "reference_version": committed["reference_version"],
                "machine_class": committed["machine_class"],
            },
        )
    order = sorted(runs, key=int)
    return {s: runs[s] for s in order}, {s: seeds_provenance[s] for s in order}


def summary_machine_class(provenance: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The distribution's machine class: the one every seed shares, else each field's distinct values joined."""
    classes = [p["machine_class"] for p in provenance.values()]
    return {key: "; ".join(sorted({str(c.get(key, "unknown")) for c in classes})) for key in classes[0]}


def reference_internal(run: Path) -> list[dict[str, float]]:
    """The reference validator's own per-epoch ``metrics/*`` figures (``results.csv``; its matching, not COCO's)."""
    with open(run / "results.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [{k.strip(): float(v) for k, v in row.items() if k.strip().startswith("metrics/")} for row in rows]


def protocol(g: ct.Gate) -> str:
    """How ``score`` scored the checkpoints (``check_trajectory.score_model``), as the distribution file says."""
    if get_task(g.recipe.task).image_level:
        how = f"evaluate_accuracy: imgsz {g.recipe.imgsz}, resize + centre crop"
    else:
        how = f"imgsz {g.recipe.imgsz}, rect {g.recipe.score_rect}, multi_label {g.recipe.score_multi_label}"
    return f"check_trajectory.score_model: {how}, EMA weights of weights/epoch<e>.pt"


def score(g: ct.Gate, out: Path | None = None) -> Path:
    """Score every recorded seed of ``g`` and write its distribution file (default ``tools/fidelity/<gate>.json``)."""
    seeds = recorded_seeds(g)
    seeds = [s for s in seeds if seed_finished(g, s)]
    if not seeds:
        raise SystemExit(f"{g.name}: no finished reference run under {REF_DIR / g.name}")
    runs: dict[str, list[dict[str, Any]]] = {}
    provenance: dict[str, dict[str, Any]] = {}
    for seed in seeds:
        print(f"{g.name} seed {seed}:", flush=True)
        rows = ct.score_checkpoints(
            g.recipe, seed_dir(g, seed) / "weights", shared=ct.SHARED_DIR, threads=THREADS
        )
        internal = reference_internal(seed_dir(g, seed))
        runs[str(seed)] = [
            {
                "epoch": row["epoch"],
                **{c.label: row[c.label] for c in g.recipe.curves},
                "reference_internal": ref,
            }
            for row, ref in zip(rows, internal, strict=True)
        ]
        provenance[str(seed)] = seed_provenance(g, seed)
    path = out or g.distribution
    committed = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    evaluator = evaluator_version()
    runs, provenance = merge_runs(committed, runs, provenance, evaluator["evaluator_sha256"])
    record_ = {
        "gate": g.name,
        "recipe": {
            "reference_model": g.reference_model,
            "data": g.recipe.data,
            "settings": reference_settings(g),
            "refbench_threads": THREADS,
        },
        "seeds": [int(s) for s in runs],
        "machine_class": summary_machine_class(provenance),
        "reference_version": "; ".join(sorted({p["reference_version"] for p in provenance.values()})),
        "scored_with": {
            **evaluator,
            "protocol": protocol(g),
        },
        "curves": [c.label for c in g.recipe.curves],
        "provenance": provenance,
        "runs": runs,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record_, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}", flush=True)
    return path


def score_canary(path: Path, g: ct.Gate, val_source: Any = None) -> dict[str, float]:
    """Our evaluator's score of one canary checkpoint under ``g``'s protocol (what the canary test compares);
    ``val_source``: :func:`check_trajectory.validation_source` of ``g``'s recipe, built here when None."""
    from lucid_core.interop.reference import import_checkpoint

    model = import_checkpoint(path)[0].eval()
    source = val_source if val_source is not None else ct.validation_source(g.recipe)
    return ct.score_model(g.recipe, model, source)


#: how far a canary's score may move before the test says the evaluator moved (a different CPU's float rounding
#: moves it by far less; the YOLO26 SPPF fix moved the epoch-3 canary of the old curve by 0.0057)
CANARY_TOLERANCE = 5e-4


def canary_drift(
    scores: dict[str, float], committed: dict[str, float], tol: float = CANARY_TOLERANCE
) -> list[str]:
    """One line per curve whose score moved by more than ``tol`` from the committed figure (or is missing)."""
    lines = []
    for label, figure in committed.items():
        value = scores.get(label)
        if value is None or abs(value - figure) > tol:
            lines.append(f"{label}: {value} vs committed {figure:.6f} (tolerance {tol})")
    return lines


def rescore() -> None:
    """Re-score every canary and rewrite ``canary.json`` (its figures and the evaluator version). The reference's
    own validation losses of each canary are read from its recorded ``results.csv`` when present, else kept."""
    committed = (
        json.loads(CANARY_FILE.read_text(encoding="utf-8"))["canaries"] if CANARY_FILE.is_file() else {}
    )
    figures = {}
    for name, gate_name in CANARIES.items():
        g = gate(gate_name)
        scores = score_canary(CANARY_DIR / name, g)
        figures[name] = {"gate": gate_name, "scores": scores}
        seed, epoch = CANARY_RUNS[name]
        results = seed_dir(g, seed) / "results.csv"
        if results.is_file():
            figures[name]["reference_val_losses"] = reference_val_losses(results, epoch)
        elif "reference_val_losses" in committed.get(name, {}):
            figures[name]["reference_val_losses"] = committed[name]["reference_val_losses"]
        print(f"{name}: " + ", ".join(f"{k} {v:.6f}" for k, v in scores.items()), flush=True)
    payload = {"scored_with": evaluator_version(), "canaries": figures}
    CANARY_FILE.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {CANARY_FILE}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("action", nargs="?", choices=["record", "score"])
    parser.add_argument("gate", nargs="?", choices=[g.name for g in ct.GATES])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rescore", action="store_true", help="re-score the canaries, rewrite canary.json")
    args = parser.parse_args(argv)
    if args.rescore:
        if args.action:
            parser.error("--rescore takes no action")
        rescore()
        return 0
    if not args.action or not args.gate:
        parser.error("an action (record, score) and a gate are needed, or --rescore")
    if args.action == "record":
        record(gate(args.gate), args.seeds)
    else:
        score(gate(args.gate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
