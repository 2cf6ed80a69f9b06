"""Validation losses of the reference's own checkpoints, ours against its ``results.csv``: an exact fidelity check.

The reference's trainer logs ``val/<item>`` per epoch: its objective on the validation split, computed with the EMA
weights it then saves (``weights/epoch<e>.pt``, ``save_period=1``). Loading that checkpoint (restricted unpickler)
into our Lightning module and validating it with :class:`lucid_train.callbacks.val_loss.ValidationLosses` gives
our figure for the same weights, images and labels, with no augmentation and no randomness: any difference is in
our validation data, head forward, assignment or loss, not in training. Recorded runs live under
``runs/fidelity/ref/<gate>/seed<s>/`` (``tools/record_reference.py record``).

Usage: ``uv run --no-sync python tools/compare_val_losses.py GATE [--seeds 0] [--epochs 0 9]`` prints, per
checkpoint, both figures of every loss item and their ratio; ``--checkpoint PT --results CSV --epoch E`` compares
one checkpoint. docs/TRAINING.md, "Validation losses of the reference's checkpoints", has the measured table.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch

from lucid_core.interop.reference import import_checkpoint
from lucid_train.callbacks.val_loss import VAL_PREFIX, ValidationLosses
from lucid_train.loggers import drop_lightning_tips

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_trajectory as ct  # tools/ is not a package: the directory is on sys.path

REF_DIR = ct.REPO_ROOT / "runs" / "fidelity" / "ref"


def validation_losses(checkpoint: Path, g: ct.Gate, shared: Path = ct.SHARED_DIR) -> dict[str, float]:
    """Our validation loss items of a reference ``checkpoint`` (``.pt``, or a renamed canary) under ``g``'s recipe:
    the EMA weights validated by our module exactly as in-training validation runs (rectangular batches of twice
    the training batch), ``{item: mean over batches}``."""
    drop_lightning_tips()
    datamodule, module = ct.recipe_modules(g.recipe, ct._data_yaml(g.recipe, shared), shared, workers=0)
    state = import_checkpoint(checkpoint)[0].state_dict()
    module.model.load_state_dict(state)
    module.ema_model.load_state_dict(state)
    losses = ValidationLosses()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[losses],
    )
    trainer.validate(module, datamodule=datamodule, verbose=False)
    return dict(losses.means)


def reference_val_losses(results_csv: Path, epoch: int) -> dict[str, float]:
    """The reference's own ``val/<item>`` figures of 0-based ``epoch`` from its ``results.csv`` (row ``epoch``)."""
    with results_csv.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if not 0 <= epoch < len(rows):
        raise ValueError(f"{results_csv}: no row for epoch {epoch} ({len(rows)} rows)")
    row = {k.strip(): v for k, v in rows[epoch].items()}
    return {k.removeprefix(VAL_PREFIX): float(v) for k, v in row.items() if k.startswith(VAL_PREFIX)}


def format_comparison(ours: dict[str, float], reference: dict[str, float]) -> str:
    """``item ours/reference (ratio)`` for every item the reference logs (0 there: not computed in its validation)."""
    parts = []
    for item, ref in reference.items():
        mine = ours.get(item, float("nan"))
        ratio = f"{mine / ref:.4f}" if ref else "ref 0"
        parts.append(f"{item} {mine:.5f}/{ref:.5f} ({ratio})")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("gate", choices=[g.name for g in ct.GATES])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, nargs="+", default=None, help="0-based (default: every epoch)")
    parser.add_argument("--checkpoint", type=Path, help="one checkpoint instead of the recorded runs")
    parser.add_argument("--results", type=Path, help="with --checkpoint: its run's results.csv")
    parser.add_argument("--epoch", type=int, help="with --checkpoint: its 0-based epoch")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    g = ct.select_gates([args.gate])[0]
    if args.checkpoint is not None:
        if args.results is None or args.epoch is None:
            parser.error("--checkpoint needs --results and --epoch")
        jobs = [(args.checkpoint, args.results, args.epoch)]
    else:
        epochs = args.epochs if args.epochs is not None else list(range(g.recipe.epochs))
        runs = [REF_DIR / g.name / f"seed{s}" for s in args.seeds]
        jobs = [(run / "weights" / f"epoch{e}.pt", run / "results.csv", e) for run in runs for e in epochs]
    for checkpoint, results, epoch in jobs:
        if not checkpoint.is_file() or not results.is_file():
            print(f"{checkpoint}: not recorded (tools/record_reference.py record {g.name})", flush=True)
            return 2
        line = format_comparison(validation_losses(checkpoint, g), reference_val_losses(results, epoch))
        print(f"{g.name} {checkpoint.parent.parent.name} epoch {epoch}: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
