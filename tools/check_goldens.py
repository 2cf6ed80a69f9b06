"""Goldens: an overfit micro gate - nano trained for a fixed number of CPU steps must land in a stored metric band.

Every ``goldens/*.json`` file holds one case: the data (``"synth"``: a fixed slice of the synthetic shapes set,
made by ``lucid_data.synth.synthesize`` from the stored parameters; ``"shared"``: a dataset under ``../shared``,
e.g. ``data/coco8/coco8.yaml``, skipped cleanly when absent), the model, the training settings (epochs x batches =
the fixed number of optimizer steps, thread count, seed, optimizer overrides, augmentation overrides), the task
(``model.task``: detect, segment, pose or obb; the synthetic data is written for it) and the band of each metric
(any key training's validation logs, e.g. ``metrics/mask/mAP50`` for segment). Training is the real lucid-train code path (``DetectionLitModule`` + ``DetectionDataModule`` under a
Lightning ``Trainer``; no run directory is written); the metric is training's own validation of the EMA model
(``lucid_train.eval``, COCO protocol), run once after the last epoch on the ``eval_split`` - the training split
itself, because the gate asks "can the recipe fit a handful of images", not "does it generalise".

A band is ``[low, high]``: ``low`` guards against a recipe/model/loss regression, ``high`` against a metric that
cannot be true (e.g. evaluation reading the labels back). Bands were set from measured values on the development
machine (x86-64, 1 and 2 threads) with room for other CPUs' float rounding; the measured value is in each file.

Usage: ``uv run --no-sync python tools/check_goldens.py [--only NAME] [--json]``; exit status 1 when a value is
outside its band (each failure is printed with the case, metric, value and band), 0 otherwise. ``make goldens``
(part of ``make gate``) runs it. Environment: ``LUCID_SHARED_DIR`` (default ``../shared`` next to the checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
GOLDENS_DIR = REPO_ROOT / "goldens"
SHARED_DIR = Path(os.environ.get("LUCID_SHARED_DIR", REPO_ROOT.parent / "shared"))


class GoldenSkipped(Exception):
    """The case's data is not present (e.g. no ../shared); reported as SKIP, not as a failure."""


def load_cases(directory: Path = GOLDENS_DIR) -> list[dict[str, Any]]:
    """Every ``*.json`` case in ``directory``, sorted by file name, each with its ``name`` and ``file``."""
    cases = []
    for path in sorted(directory.glob("*.json")):
        try:
            case = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}: not valid JSON ({exc})") from exc
        for key in ("data", "model", "train", "band"):
            if key not in case:
                raise SystemExit(f"{path}: missing key {key!r}; expected data, model, train and band")
        case.setdefault("name", path.stem)
        case["file"] = str(path)
        cases.append(case)
    return cases


def data_yaml(case: dict[str, Any], workdir: Path) -> Path:
    """The case's data YAML: synthesised into ``workdir`` or found under the shared directory."""
    data = case["data"]
    if data["kind"] == "synth":
        from lucid_data.synth import synthesize

        options = {k: v for k, v in data.items() if k != "kind"}
        return Path(synthesize(case_task(case), workdir / "data", **options))
    if data["kind"] == "shared":
        path = SHARED_DIR / data["path"]
        if not path.is_file():
            raise GoldenSkipped(f"{path} is not present")
        return path
    raise SystemExit(f"{case['file']}: data.kind {data['kind']!r}; expected 'synth' or 'shared'")


def case_task(case: dict[str, Any]) -> str:
    """The task the case trains (``model.task``, default ``detect``): the synthetic data is written for it."""
    return str(case["model"].get("task", "detect"))


def run_case(case: dict[str, Any]) -> dict[str, float]:
    """Train the case for its fixed number of steps; return training's final validation metrics."""
    import lightning.pytorch as pl
    import torch

    from lucid_data.augment.pipeline import AugmentConfig
    from lucid_train.callbacks import EpochStateCallback
    from lucid_train.datamodule import DetectionDataModule
    from lucid_train.loggers import drop_lightning_tips
    from lucid_train.module import DetectionLitModule
    from lucid_train.recipe import OptimizerConfig

    drop_lightning_tips()  # the same quiet log as lucid-train's own runs

    train = case["train"]
    with tempfile.TemporaryDirectory(prefix=f"lucid-golden-{case['name']}-") as tmp:
        yaml_path = data_yaml(case, Path(tmp))
        torch.set_num_threads(int(train.get("threads", 1)))
        pl.seed_everything(int(train.get("seed", 0)), verbose=False)
        datamodule = DetectionDataModule(
            root=str(yaml_path),
            train_split=train.get("split", "train"),
            val_split=case.get("eval_split", "train"),
            imgsz=int(train["imgsz"]),
            batch_size=int(train["batch_size"]),
            workers=0,
            seed=int(train.get("seed", 0)),
            augment=AugmentConfig(**train.get("augment", {})),
            task=case_task(case),
        )
        module = DetectionLitModule(
            family=case["model"].get("family", "yolo26"),
            task=case_task(case),
            task_options=datamodule.task_options,
            scale=case["model"].get("scale", "n"),
            num_classes=datamodule.num_classes,
            names=datamodule.names,
            imgsz=datamodule.imgsz,
            optimizer=OptimizerConfig(**train.get("optimizer", {})),
        )
        epochs = int(train["epochs"])
        trainer = pl.Trainer(
            max_epochs=epochs,
            check_val_every_n_epoch=epochs,  # validate once, after the last step
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            use_distributed_sampler=False,
            num_sanity_val_steps=0,
            default_root_dir=str(Path(tmp) / "run"),
            callbacks=[EpochStateCallback()],  # no run directory: nothing is written
        )
        trainer.fit(module, datamodule=datamodule)
        steps = int(trainer.global_step)
        expected_steps = train.get("steps")
        if expected_steps is not None and steps != int(expected_steps):
            raise SystemExit(
                f"{case['file']}: ran {steps} optimizer steps, the case expects train.steps = {expected_steps}"
            )
        return {**module.val_metrics, "steps": float(steps)}


def check_case(case: dict[str, Any], metrics: dict[str, float]) -> list[str]:
    """Failures (one line each) of ``metrics`` against the case's band."""
    failures = []
    for metric, (low, high) in case["band"].items():
        value = metrics.get(metric)
        if value is None:
            failures.append(f"{case['name']}: metric {metric} was not produced (got {sorted(metrics)})")
        elif not low <= value <= high:
            failures.append(f"{case['name']}: {metric} = {value:.4f} is outside the band [{low}, {high}]")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", action="append", default=None, help="run only this case (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the measured metrics as one JSON line")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode.*")
    warnings.filterwarnings("ignore", message=r".*overridden `transfer_batch_to_device`.*")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    import torch

    # the float rounding of a run is a function of the kernels PyTorch dispatches to (AVX2 vs AVX-512 x86 paths
    # give different curves; two AVX-512 machines gave identical ones): say which, next to the results
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    cases = [c for c in load_cases() if not args.only or c["name"] in args.only]
    if not cases:
        print(f"goldens: no cases selected in {GOLDENS_DIR}", file=sys.stderr)
        return 1
    failures: list[str] = []
    measured: dict[str, dict[str, float]] = {}
    for case in cases:
        start = time.perf_counter()
        try:
            metrics = run_case(case)
        except GoldenSkipped as exc:
            print(f"SKIP {case['name']}: {exc}")
            continue
        measured[case["name"]] = metrics
        problems = check_case(case, metrics)
        failures += problems
        shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if k in case["band"])
        status = "FAIL" if problems else "ok"
        print(
            f"{status:<4} {case['name']}: {shown} in {time.perf_counter() - start:.1f} s ({metrics['steps']:.0f} steps)"
        )
    for line in failures:
        print(f"goldens: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(measured))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
