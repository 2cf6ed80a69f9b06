"""One epoch of ours from the reference's full training state at the end of an epoch, against the reference's own.

A reference per-epoch checkpoint (``save_period=1``: ``weights/epoch<N>.pt`` of a recorded gate seed) holds the EMA
weights, the optimiser's state (AdamW moments and step count, per parameter group) and the EMA update count. From
that state ours trains epoch N + 1 of the gate's recipe: the checkpoint's weights, its optimiser state mapped to
our parameters by name, its EMA count, the epoch's learning rate (the linear schedule's value at N + 1, no
warm-up), mosaic on or closed as the recipe has it at N + 1, and the YOLO26 branch weights after N + 1 updates.
Ours' score after that epoch is printed beside the reference's recorded epoch N + 1 (its run continued from the
raw model). ``--against resumed`` also runs the reference itself from the same checkpoint (``resume=True``, one
epoch, then stopped) and compares with that: both sides then start from the same state. Equal means, seed by
seed, say ours trains that epoch as the reference does from the same state; a gap says the step differs.
Against the resumed reference the epoch's training losses of both sides are printed too. A seed recorded here but
not in the committed distribution is scored from its own checkpoints.
``--set KEY=VALUE`` changes an augmentation setting of ours only.

Usage: ``uv run --no-sync python tools/probe_epoch_from_reference.py --gate shapes_yolo26n_obb --epoch 6
[--seeds 3 4 5] [--set mosaic_recent=0] [--against resumed]`` (reference checkpoints under
``runs/fidelity/ref/<gate>/seed<s>``, as tools/record_reference.py leaves them; resumed checkpoints are kept under
``runs/fidelity/resumed/<gate>/seed<s>/`` and reused).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from lucid_core.interop.reference import read_reference_checkpoint, reference_to_lucid_key
from lucid_core.interop.unpickler import StandInModule
from lucid_core.loss.schedule import BranchWeightSchedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_trajectory as ct  # tools/ is not a package: the directory is on sys.path
import record_reference as rr
from probe_classify_augment import parse_settings

#: reference module classes whose weights go to the undecayed "bn" group (as our optimiser's routing)
NORM_CLASSES = frozenset({"BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm"})
#: where ``--against resumed`` keeps the reference's resumed checkpoints (``<gate>/seed<s>/epoch<N+1>.pt``)
RESUMED_DIR = rr.RUNS_DIR / "resumed"


def reference_group_names(root: StandInModule) -> dict[str, list[str]]:
    """The reference's parameter names per optimiser group ("weight", "bn", "bias"), in its module order: a name
    containing ``bias`` is a bias, a normalisation layer's weight is "bn", any other "weight" (the frozen DFL
    integral of a ``reg_max > 1`` head is left out, as the reference's optimiser leaves it)."""
    groups: dict[str, list[str]] = {"weight": [], "bn": [], "bias": []}
    seen: set[int] = set()

    def visit(module: StandInModule, prefix: str) -> None:
        if id(module) in seen:
            return
        seen.add(id(module))
        for name, value in (module.__dict__.get("_parameters") or {}).items():
            full = f"{prefix}.{name}" if prefix else name
            if value is None or ".dfl." in f".{full}":
                continue
            if "bias" in full:
                groups["bias"].append(full)
            elif module.class_name in NORM_CLASSES or name == "logit_scale":
                groups["bn"].append(full)
            else:
                groups["weight"].append(full)
        for child_name, child in module.children().items():
            visit(child, f"{prefix}.{child_name}" if prefix else child_name)

    visit(root, "")
    return groups


def load_reference_optimizer(optimizer: torch.optim.Optimizer, checkpoint: dict[str, Any]) -> int:
    """Copy the checkpoint's optimiser state into ``optimizer`` (our groups carry ``param_group`` and
    ``param_names``), parameter by parameter through the names; returns how many were set. A group, name or shape
    that does not match is a ValueError naming it."""
    reference = checkpoint["optimizer"]
    names = reference_group_names(checkpoint["ema"])
    ours: dict[str, tuple[str, torch.nn.Parameter]] = {}
    for group in optimizer.param_groups:
        for name, param in zip(group["param_names"], group["params"], strict=True):
            ours[name] = (group["param_group"], param)
    count = 0
    for group in reference["param_groups"]:
        kind = group["param_group"]
        if len(names[kind]) != len(group["params"]):
            raise ValueError(
                f"group {kind}: {len(group['params'])} reference parameters, {len(names[kind])} named"
            )
        for name, index in zip(names[kind], group["params"], strict=True):
            key = reference_to_lucid_key(name)
            if key not in ours or ours[key][0] != kind:
                raise ValueError(f"{name} ({kind}): no such parameter in our {kind} group")
            state = reference["state"][index]
            param = ours[key][1]
            if state["exp_avg"].shape != param.shape:
                raise ValueError(
                    f"{name}: reference moments {tuple(state['exp_avg'].shape)}, ours {tuple(param.shape)}"
                )
            optimizer.state[param] = {
                k: v.clone().to(param.dtype) if k != "step" else v.clone() for k, v in state.items()
            }
            count += 1
    if count != len(ours):
        raise ValueError(f"{count} of our {len(ours)} parameters got the reference's state")
    return count


def epoch_lr(optimizer: dict[str, Any], epoch: int, epochs: int) -> float:
    """The linear schedule's lr of ``epoch`` (after warm-up): lr0 · ((1 − e/E)(1 − lrf) + lrf)."""
    lrf = float(optimizer.get("lrf", 0.01))
    return float(optimizer["lr0"]) * ((1 - epoch / epochs) * (1 - lrf) + lrf)


class ReferenceState(pl.Callback):
    """At the start of training: the checkpoint's optimiser state, EMA count and the branch weights of ``epoch``."""

    def __init__(self, checkpoint: dict[str, Any], epoch: int, epochs: int) -> None:
        self.checkpoint, self.epoch, self.epochs = checkpoint, epoch, epochs

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        load_reference_optimizer(trainer.optimizers[0], self.checkpoint)
        pl_module.ema.updates = int(self.checkpoint["updates"])
        schedule = getattr(pl_module.criterion, "schedule", None)
        if isinstance(schedule, BranchWeightSchedule):
            pl_module.criterion.schedule = BranchWeightSchedule(
                self.epochs, schedule.o2m_init, schedule.o2m_final, updates=self.epoch
            )


def continued_schedule(optimizer: dict[str, Any], epoch: int, count: int, epochs: int) -> dict[str, float]:
    """``lr0`` and ``lrf`` of a ``count``-epoch run whose linear schedule gives epochs ``epoch`` .. ``epoch + count
    - 1`` of an ``epochs``-epoch run's lr (a line is fixed by its first and last value; one epoch: a constant)."""
    first = epoch_lr(optimizer, epoch, epochs)
    if count == 1:
        return {"lr0": first, "lrf": 1.0}
    last = epoch_lr(optimizer, epoch + count - 1, epochs)
    return {"lr0": first, "lrf": (last / first - 1 / count) / (1 - 1 / count)}


def train_from(
    gate: ct.Gate, path: Path, epoch: int, settings: dict[str, Any], seed: int, count: int = 1
) -> list[dict[str, Any]]:
    """Ours' rows after training epochs ``epoch`` .. ``epoch + count - 1`` from the reference checkpoint ``path``
    (its end of ``epoch - 1``), our data order and augmentation drawn with ``seed``."""
    base = gate.recipe
    checkpoint = read_reference_checkpoint(path)
    first_closed = base.epochs - int(base.augment.get("close_mosaic", 10))
    recipe = replace(
        base,
        epochs=count,
        seed=seed,
        weights=str(path.resolve()),
        optimizer={
            **base.optimizer,
            **continued_schedule(base.optimizer, epoch, count, base.epochs),
            "warmup_epochs": 0.0,
        },
        augment={
            **base.augment,
            **settings,
            "close_mosaic": min(count, max(0, epoch + count - first_closed)),
        },
    )
    return ct.train_and_score(recipe, callbacks=[ReferenceState(checkpoint, epoch, base.epochs)])


def aside_path(run: Path) -> Path:
    """Where :func:`prepare_resume` keeps a recorded run folder (a name ``recorded_seeds`` does not list)."""
    return run.with_name(f".{run.name}.recorded")


def restore_run(run: Path) -> None:
    """Put back a run folder that :func:`prepare_resume` set aside, dropping what the resumed run wrote in its
    place; nothing happens when none is set aside (so it also repairs a probe that was killed)."""
    aside = aside_path(run)
    if aside.is_dir():
        if run.exists():
            shutil.rmtree(run)
        aside.rename(run)


def prepare_resume(run: Path, epoch: int) -> None:
    """Set the recorded run folder ``run`` aside and leave in its place what the reference's ``resume=True`` reads
    to continue after ``epoch``: ``weights/last.pt`` (its ``epoch<epoch>.pt``), ``args.yaml`` and ``results.csv``
    up to that epoch. Its checkpoints name this folder as the one to write to, so the resumed run writes here."""
    checkpoint = run / "weights" / f"epoch{epoch}.pt"
    if not checkpoint.is_file():
        raise FileNotFoundError(f"{checkpoint}: no such reference checkpoint")
    restore_run(run)
    aside = aside_path(run)
    run.rename(aside)
    (run / "weights").mkdir(parents=True)
    shutil.copy2(aside / "weights" / checkpoint.name, run / "weights" / "last.pt")
    shutil.copy2(aside / "args.yaml", run / "args.yaml")
    rows = (aside / "results.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (run / "results.csv").write_text("".join(rows[: epoch + 2]), encoding="utf-8")


def checkpoint_complete(path: Path) -> bool:
    """True when ``path`` reads as a whole reference checkpoint (the file exists before its writer finishes)."""
    try:
        read_reference_checkpoint(path)
    except Exception:  # a partly written archive fails in the zip reader or the unpickler
        return False
    return True


def resume_reference(run: Path, epoch: int, out: Path, threads: int = 2, poll_s: float = 2.0) -> Path:
    """The reference resumed from ``run``'s ``weights/epoch<epoch>.pt`` (``resume=True``: its weights, optimiser
    state and EMA) for one epoch: its ``epoch<epoch + 1>.pt`` is copied to ``out`` and the run is stopped there.
    ``run`` is the recorded folder again afterwards, whatever happens; the reference's log is ``out``'s
    ``resume.log``. Returns the copied checkpoint."""
    target = out / f"epoch{epoch + 1}.pt"
    out.mkdir(parents=True, exist_ok=True)
    log = out / "resume.log"
    written = run / "weights" / target.name
    prepare_resume(run, epoch)
    try:
        cmd = rr.refbench_command(run / "weights" / "last.pt", out / "project", {"resume": True}, threads)
        with open(log, "w", encoding="utf-8") as stream:
            process = subprocess.Popen(cmd, stdout=stream, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                while not (written.is_file() and checkpoint_complete(written)):
                    if process.poll() is not None:
                        raise RuntimeError(
                            f"the reference stopped (exit {process.returncode}) before writing {written.name}; "
                            f"its log: {log}"
                        )
                    time.sleep(poll_s)
                shutil.copy2(written, target)
            finally:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait()
    finally:
        restore_run(run)
    return target


def recorded_score(
    gate: ct.Gate,
    committed: dict[str, list[dict[str, Any]]],
    seed: int,
    epoch: int,
    label: str,
    val_source: Any = None,
) -> float:
    """The reference's recorded ``label`` of ``seed`` at ``epoch``: the committed distribution's figure, or, for a
    seed recorded here but not in the distribution file, our evaluator's score of its ``epoch<epoch>.pt`` (the
    same protocol, :func:`record_reference.score_canary`, on ``val_source`` when given)."""
    rows = committed.get(str(seed))
    if rows is not None:
        return float(rows[epoch][label])
    path = rr.seed_dir(gate, seed) / "weights" / f"epoch{epoch}.pt"
    return float(rr.score_canary(path, gate, val_source)[label])


def checkpoint_losses(path: Path) -> dict[str, float]:
    """The training losses of a reference checkpoint's last epoch (its ``train_results``' ``train/<name>``
    columns), by name without the ``train/`` prefix, as ours' rows name them."""
    results = read_reference_checkpoint(path).get("train_results") or {}
    return {
        key.strip().removeprefix("train/"): float(values[-1])
        for key, values in results.items()
        if key.strip().startswith("train/") and values
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gate", required=True, choices=[g.name for g in ct.select_gates(["all"])])
    parser.add_argument(
        "--epoch", type=int, required=True, help="the reference checkpoint's epoch N (ours trains N+1)"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", help="reference seeds (default: every one with checkpoints)"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="an augmentation setting of ours"
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=1,
        help="how many epochs ours trains on from the checkpoint (recorded only)",
    )
    parser.add_argument(
        "--against",
        choices=("recorded", "resumed"),
        default="recorded",
        help="the reference's recorded next epoch, or the reference resumed from the same checkpoint",
    )
    args = parser.parse_args(argv)
    gate = ct.select_gates([args.gate])[0]
    if not 0 <= args.epoch < gate.recipe.epochs - 1:
        parser.error(f"--epoch {args.epoch}: expected 0 .. {gate.recipe.epochs - 2} for {gate.name}")
    if not 1 <= args.epochs <= gate.recipe.epochs - 1 - args.epoch:
        parser.error(
            f"--epochs {args.epochs}: expected 1 .. {gate.recipe.epochs - 1 - args.epoch} after epoch {args.epoch}"
        )
    if args.epochs > 1 and args.against == "resumed":
        parser.error("--against resumed runs the reference for one epoch: use --epochs 1")
    try:
        settings = parse_settings(args.set)
    except ValueError as exc:
        parser.error(str(exc))
    for aside in (rr.REF_DIR / gate.name).glob(".seed*.recorded"):  # left by a probe that was killed
        restore_run(aside.with_name(aside.name[1:].removesuffix(".recorded")))
    seeds = args.seeds or sorted(
        s
        for s in rr.recorded_seeds(gate)
        if (rr.seed_dir(gate, s) / "weights" / f"epoch{args.epoch}.pt").is_file()
    )
    recorded = ct.load_distribution(gate)["runs"]
    label = gate.recipe.curves[0].label
    scored_here = args.against == "resumed" or any(str(s) not in recorded for s in seeds)
    val_source = ct.validation_source(gate.recipe) if scored_here else None  # built once for every score
    gaps: dict[str, list[float]] = {"recorded": [], "resumed": []}
    loss_ratios: dict[str, list[float]] = {}  # loss name -> ours / reference resumed, per seed
    later: dict[int, list[float]] = {}  # epoch -> ours - recorded, for --epochs > 1
    for seed in seeds:
        run = rr.seed_dir(gate, seed)
        path = run / "weights" / f"epoch{args.epoch}.pt"
        if not path.is_file():
            parser.error(f"{path}: no such reference checkpoint")
        # the reference seed's number is ours' seed
        rows = train_from(gate, path, args.epoch + 1, settings, seed, args.epochs)
        ours = float(rows[0][label])
        theirs = recorded_score(gate, recorded, seed, args.epoch + 1, label, val_source)
        gaps["recorded"].append(ours - theirs)
        line = f"seed {seed}: {label} at epoch {args.epoch + 1}: reference {theirs:.4f}"
        if args.against == "resumed":
            out = RESUMED_DIR / gate.name / f"seed{seed}"
            resumed = out / f"epoch{args.epoch + 1}.pt"
            if not resumed.is_file():
                resume_reference(run, args.epoch, out)
            again = float(rr.score_canary(resumed, gate, val_source)[label])
            gaps["resumed"].append(ours - again)
            line += f", resumed from the same checkpoint {again:.4f}"
            theirs_losses = checkpoint_losses(resumed)
            ours_losses = rows[0].get("losses", {})
            shared = [k for k in ours_losses if theirs_losses.get(k)]
            for key in shared:
                loss_ratios.setdefault(key, []).append(float(ours_losses[key]) / theirs_losses[key])
            print(
                f"seed {seed}: training losses of epoch {args.epoch + 1}, ours / reference resumed: "
                + ", ".join(f"{k} {float(ours_losses[k]):.4f} / {theirs_losses[k]:.4f}" for k in shared),
                flush=True,
            )
        print(
            f"{line}, ours from its epoch-{args.epoch} state {ours:.4f} "
            f"(reference at epoch {args.epoch}: "
            f"{recorded_score(gate, recorded, seed, args.epoch, label, val_source):.4f})",
            flush=True,
        )
        for offset, row in enumerate(rows[1:], start=2):
            epoch = args.epoch + offset
            theirs = recorded_score(gate, recorded, seed, epoch, label, val_source)
            later.setdefault(epoch, []).append(float(row[label]) - theirs)
            print(f"seed {seed}: {label} at epoch {epoch}: reference {theirs:.4f}, ours {row[label]:.4f}")
    for against, gap in gaps.items():
        if len(gap) > 1:
            se = statistics.stdev(gap) / math.sqrt(len(gap))
            print(
                f"ours - reference {against} over {len(gap)} seeds: {statistics.mean(gap):+.4f} (SE {se:.4f})"
            )
    for key, ratios in loss_ratios.items():
        if len(ratios) > 1:
            se = statistics.stdev(ratios) / math.sqrt(len(ratios))
            print(
                f"{key}, ours / reference resumed over {len(ratios)} seeds: {statistics.mean(ratios):.4f} (SE {se:.4f})"
            )
    for epoch, gap in sorted(later.items()):
        if len(gap) > 1:
            se = statistics.stdev(gap) / math.sqrt(len(gap))
            print(f"epoch {epoch}: ours - reference recorded: {statistics.mean(gap):+.4f} (SE {se:.4f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
