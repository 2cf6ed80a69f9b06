"""Step parity: our training steps against the reference's, exactly, where no seed noise can hide a difference.

The distributional gate (``check_trajectory.py``) compares seed means, so a small training difference can hide in
the spread. This instrument takes the noise away: from the same weights (a reference checkpoint) and one fixed,
un-augmented batch (the first ``--images`` training images of the gate's dataset: one batch per epoch, mosaic,
colour, affine and flips off, so every step is deterministic), it runs the reference's own ``train()``
(``../shared/refbench/run.sh train``, black box) and ours (the real lucid-train path, the gate's recipe) for
``--epochs`` epochs, then compares

- the **first step's clipped gradient**, per parameter, through the optimiser's state after one step (the
  reference's ``epoch0.pt`` holds it): Adam's first moment ``(1 − β1)·g`` or SGD's momentum buffer, against the
  same entry of our optimiser;
- the **EMA weights and buffers after every epoch** (the reference stores them in float16: ours are rounded alike).

That covers the model, the objective (both branches and their epoch schedule), gradient clipping, the
optimiser, warm-up and the lr schedule, the EMA and batch-norm statistics, and the close-mosaic switch (it fires
at the recipe's epoch with mosaic already off, so only a side effect on training would show); random
augmentation and data order are left to the distributional gate (lr-0 readings in docs/TRAINING.md). The
deterministic augmentations are in reach: ``--flip`` flips every image (``fliplr=1`` on both sides), and
``--border`` first moves every instance of the fixed batch 60-90 % across one of the four borders, its label cut
at the image (detect and segment labels), so that the border arithmetic of boxes and masks counts. An
image-level task (classify) takes the first ``--images`` images of its class folders, the classes in turn, and
turns its own augmentation off too (``auto_augment`` none, ``erasing`` 0; the crop then keeps the whole image).

Every first-step gradient must agree within :data:`GRAD_RTOL` of its norm plus :data:`GRAD_ATOL` of the total
norm (float32 summation noise), every EMA tensor within :data:`EMA_RTOL` (float16 storage and rounding); else the
exit status is 1. Parameters whose reference gradient is numerically zero (norm ≤ :data:`NEGLIGIBLE` × the total:
a bias ahead of a batch norm) are counted, not judged: Adam moves them by full steps of either sign. ``--loss box=3.75`` trains ours with a broken recipe (a failing run, to see the check bite).

Usage: ``uv run --no-sync python tools/check_step_parity.py [--task all|GATE|TASK] [--weights W.pt] [--images 16]
[--epochs N] [--flip] [--border]`` (``make parity``: every gate, about 4 minutes each on 2 cores). Needs ``../shared/refbench`` (set
up by its ``setup.sh``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
import yaml
from torch import Tensor

from lucid_core.interop.reference import read_reference_checkpoint, reference_root, reference_to_lucid_key
from lucid_core.interop.unpickler import StandInModule
from lucid_core.tasks import get_task
from lucid_data.augment.geometry import clip_polygon

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_trajectory as ct  # tools/ is not a package: the directory is on sys.path
import record_reference as rr

#: a reference gradient at or below this fraction of the total gradient norm is numerical zero (its EMA not judged)
NEGLIGIBLE = 1e-8
#: a first-step gradient agrees when ``‖ours − reference‖ ≤ GRAD_RTOL·‖reference‖ + GRAD_ATOL·‖total‖``
GRAD_RTOL = 1e-3
GRAD_ATOL = 1e-7
#: largest relative difference of a judged EMA tensor (ours rounded to float16, as the reference stores it)
EMA_RTOL = 1e-2
#: augmentation off, in both trainers' key names (the reference's ``train()`` keys; ours ``AugmentConfig``); the
#: recipe's ``close_mosaic`` stays, so both trainers still switch mosaic off at that epoch. ``auto_augment`` and
#: ``erasing`` are classification's (the dense tasks ignore them)
AUGMENT_OFF: dict[str, float | None] = {
    "auto_augment": None,
    "erasing": 0.0,
    "mosaic": 0.0,
    "hsv_h": 0.0,
    "hsv_s": 0.0,
    "hsv_v": 0.0,
    "translate": 0.0,
    "scale": 0.0,
    "fliplr": 0.0,
}
#: the optimiser state entry that holds a multiple of the first step's gradient, and that multiple's factor
_FIRST_STEP_STATE: dict[str, str] = {"exp_avg": "Adam/AdamW: (1 - beta1) * g", "momentum_buffer": "SGD: g"}


@dataclass(frozen=True)
class TensorGap:
    """One compared tensor: its name, ``‖ours − reference‖``, the reference's norm and whether it is judged."""

    name: str
    difference: float
    reference_norm: float
    judged: bool

    @property
    def relative(self) -> float:
        return 0.0 if self.difference == 0.0 else self.difference / max(self.reference_norm, 1e-300)


def compare(
    ours: Mapping[str, Tensor], reference: Mapping[str, Tensor], judged: set[str] | None = None
) -> list[TensorGap]:
    """Per reference tensor (all of them must exist in ``ours`` with the same shape): the gap in float64, largest
    relative gap first. ``judged`` (default: all) names the tensors that count for the verdict."""
    gaps = []
    for name, ref in reference.items():
        if name not in ours:
            raise KeyError(f"{name}: in the reference's state, not in ours")
        if tuple(ours[name].shape) != tuple(ref.shape):
            raise ValueError(f"{name}: ours {tuple(ours[name].shape)} vs reference {tuple(ref.shape)}")
        judge = judged is None or name in judged
        difference = float((ours[name].double() - ref.double()).norm())
        gaps.append(TensorGap(name, difference, float(ref.double().norm()), judge))
    return sorted(gaps, key=lambda g: (not g.judged, -g.relative))


def worst(gaps: list[TensorGap], rtol: float, atol: float = 0.0) -> tuple[float, float, list[TensorGap]]:
    """``(median, max)`` relative gap over the judged gaps, and the failures: ``difference > rtol·‖ref‖ + atol``."""
    values = sorted(g.relative for g in gaps if g.judged)
    if not values:
        return 0.0, 0.0, []
    failures = [g for g in gaps if g.judged and g.difference > rtol * g.reference_norm + atol]
    return values[len(values) // 2], values[-1], failures


def parameter_order(root: StandInModule) -> dict[str, list[str]]:
    """The reference's optimiser groups, parameter names in its order: every module's own parameters in module
    order, biases to ``bias``, normalisation weights to ``bn``, every other weight to ``weight`` (the grouping the
    fixtures README's optimiser rules describe)."""
    groups: dict[str, list[str]] = {"weight": [], "bn": [], "bias": []}

    def walk(module: StandInModule, prefix: str) -> None:
        for name, value in (module.__dict__.get("_parameters") or {}).items():
            if value is None:
                continue
            if name == "bias":
                groups["bias"].append(prefix + name)
            elif "Norm" in module.class_name:
                groups["bn"].append(prefix + name)
            else:
                groups["weight"].append(prefix + name)
        for child_name, child in module.children().items():
            walk(child, f"{prefix}{child_name}.")

    walk(root, "")
    return groups


def reference_first_step(checkpoint: Mapping[str, Any]) -> tuple[str, dict[str, Tensor]]:
    """The reference optimiser's gradient-carrying state entry after its first step, by our parameter name
    (parameters that never received a gradient are absent)."""
    root, _ = reference_root(checkpoint)
    order = parameter_order(root)
    optimizer = checkpoint["optimizer"]
    state = optimizer["state"]
    held = next(iter(state.values()))
    entry = next((k for k in _FIRST_STEP_STATE if k in held), None)
    if entry is None:
        raise ValueError(f"optimiser state holds {sorted(held)}: expected one of {sorted(_FIRST_STEP_STATE)}")
    moments: dict[str, Tensor] = {}
    for group in optimizer["param_groups"]:
        names = order[group["param_group"]]
        if len(names) != len(group["params"]):
            raise ValueError(
                f"group {group['param_group']}: {len(group['params'])} indices, {len(names)} parameters"
            )
        for index, name in zip(group["params"], names, strict=True):
            if index in state:  # a frozen parameter (the DFL's fixed projection) never steps: no state
                moments[reference_to_lucid_key(name)] = state[index][entry].float()
    return entry, moments


def reference_ema(checkpoint: Mapping[str, Any]) -> dict[str, Tensor]:
    """The checkpoint's EMA floating-point tensors (parameters and buffers), by our name."""
    root, _ = reference_root(checkpoint)
    tensors = root.state_tensors()
    return {
        reference_to_lucid_key(k): v.float()
        for k, v in tensors.items()
        if torch.is_tensor(v) and v.is_floating_point() and v.numel()
    }


#: the part of an instance ``--border`` moves outside the image, in turn (of its extent across that border)
BORDER_FRACTIONS = (0.6, 0.7, 0.85, 0.9)


def across_border(line: str, k: int, task: str) -> str | None:
    """A YOLO label line (normalised) with its instance moved across border ``k % 4`` (left, right, top, bottom)
    by ``BORDER_FRACTIONS[k % 4]`` of its extent and cut at the image: a polygon (segment) is clipped, a box
    (detect) is cut to its part inside. None when nothing of it is left."""
    values = line.split()
    if task not in ("detect", "segment"):
        raise ValueError(f"--border moves detect and segment labels, not {task!r} ones")
    cls, numbers = values[0], [float(v) for v in values[1:]]
    if task == "detect":
        cx, cy, w, h = numbers[:4]
        x1, y1, x2, y2 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
        points = [(x1, y1), (x2, y1), (x2, y2), (x1, y2)]
    else:
        points = list(zip(numbers[0::2], numbers[1::2]))
    pts = np.asarray(points, dtype=np.float64)
    low, high = pts.min(0), pts.max(0)
    side, fraction = k % 4, BORDER_FRACTIONS[k % 4]
    axis = 0 if side < 2 else 1
    extent = high[axis] - low[axis]
    pts[:, axis] += (
        -(low[axis] + fraction * extent) if side % 2 == 0 else (1 - high[axis]) + fraction * extent
    )
    cut = clip_polygon(pts, 1.0, 1.0)
    if len(cut) < 3:
        return None
    if task == "detect":
        (x1, y1), (x2, y2) = cut.min(0), cut.max(0)
        if x2 - x1 <= 0 or y2 - y1 <= 0:
            return None
        fields = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
    else:
        fields = cut.reshape(-1).tolist()
    return " ".join([cls, *(f"{v:.6f}" for v in fields)])


def subset_dataset(data_yaml: Path, images: int, out: Path, border_task: str | None = None) -> Path:
    """The first ``images`` training images of ``data_yaml`` (sorted names) with their label files, as both the
    train and val split of a new dataset under ``out``; its ``data.yaml`` (absolute ``path``) is returned.
    ``border_task``: move every instance across a border (:func:`across_border`, borders in turn)."""
    settings = yaml.safe_load(data_yaml.read_text(encoding="utf-8"))
    root = (data_yaml.parent / settings.get("path", ".")).resolve()
    train = root / settings["train"]
    if not train.is_dir():
        raise FileNotFoundError(f"{data_yaml}: train split {train} is not a folder of images")
    files = sorted(p for p in train.iterdir() if p.suffix.lower() in {".jpg", ".jpeg", ".png", ".bmp"})[
        :images
    ]
    if len(files) < images:
        raise ValueError(f"{train}: {len(files)} images, --images asks for {images}")
    if "images" not in train.parts:
        raise ValueError(f"{train}: no 'images' folder in the path, so no sibling 'labels' folder to read")
    last = len(train.parts) - 1 - train.parts[::-1].index("images")
    labels = Path(*train.parts[:last], "labels", *train.parts[last + 1 :])
    texts: dict[str, str] = {}
    turn = 0  # the borders are taken in turn over all instances of the subset
    for image in files:
        label = labels / f"{image.stem}.txt"
        if not label.is_file():
            continue
        text = label.read_text(encoding="utf-8")
        if border_task is not None:
            lines = [ln for ln in text.splitlines() if ln.strip()]
            moved = [across_border(ln, turn + i, border_task) for i, ln in enumerate(lines)]
            turn += len(lines)
            text = "".join(f"{ln}\n" for ln in moved if ln is not None)
        texts[label.name] = text
    for split in ("train", "val"):
        (out / "images" / split).mkdir(parents=True)
        (out / "labels" / split).mkdir(parents=True)
        for image in files:
            shutil.copy2(image, out / "images" / split / image.name)
        for name, text in texts.items():
            (out / "labels" / split / name).write_text(text, encoding="utf-8")
    settings.update(path=str(out.resolve()), train="images/train", val="images/val")
    settings.pop("test", None)
    result = out / "data.yaml"
    result.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    return result


def subset_class_folders(root: Path, images: int, out: Path) -> Path:
    """The first ``images`` training images of the folder-per-class dataset ``root``, the classes in turn (each
    class's images in name order), as both the train and val split of a new class-folder dataset ``out``."""
    train = root / "train"
    classes = sorted(p for p in train.iterdir() if p.is_dir()) if train.is_dir() else []
    if not classes:
        raise FileNotFoundError(f"{root}: no class folders under {train}")
    per_class = [
        sorted(p for p in c.iterdir() if p.suffix.lower() in {".jpg", ".jpeg", ".png", ".bmp"})
        for c in classes
    ]
    chosen = [files[k] for k in range(max(map(len, per_class))) for files in per_class if k < len(files)][
        :images
    ]
    if len(chosen) < images:
        raise ValueError(f"{train}: {len(chosen)} images, --images asks for {images}")
    for split in ("train", "val"):
        for image in chosen:
            folder = out / split / image.parent.name
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy2(image, folder / image.name)
    return out


class StepRecorder(pl.Callback):
    """Our side of the comparison: the optimiser's state entry after the first step, the EMA after every epoch."""

    def __init__(self, entry: str) -> None:
        self.entry = entry
        self.first_step: dict[str, Tensor] = {}
        self.ema: list[dict[str, Tensor]] = []

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        optimizer = trainer.optimizers[0]
        names = {id(p): n for n, p in pl_module.model.named_parameters()}

        def after_step(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            if not self.first_step:
                for group in opt.param_groups:
                    for p in group["params"]:
                        if self.entry in opt.state.get(p, {}):
                            self.first_step[names[id(p)]] = opt.state[p][self.entry].detach().float().clone()

        optimizer.register_step_post_hook(after_step)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.ema.append({k: v.detach().float().clone() for k, v in pl_module.ema_model.state_dict().items()})


def run_reference(
    gate: ct.Gate, weights: Path, data: Path, epochs: int, out: Path, augment: Mapping[str, float | None]
) -> Path:
    """The reference's ``train()`` from ``weights`` on ``data`` with the deterministic ``augment``; its weights
    folder."""
    model = out / "start.pt"  # its trainer reads the checkpoint by its suffix
    shutil.copy2(weights, model)
    settings = {
        **rr.reference_settings(gate),
        **augment,
        "epochs": epochs,
        "data": str(data),
        "seed": 0,
        "workers": 0,
        "val": False,
        "name": "reference",
    }
    rr.refbench_train(model, out, settings, threads=2, log=out / "reference.log")
    return out / "reference" / "weights"


def fixed_batch_recipe(
    gate: ct.Gate, weights: Path, data: Path, epochs: int, augment: Mapping[str, float | None]
) -> ct.TrajectoryRecipe:
    """The gate's recipe from ``weights`` on the fixed batch ``data`` for ``epochs``, with ``augment`` only."""
    return replace(
        gate.recipe,
        data=str(data),
        epochs=epochs,
        seed=0,
        workers=0,
        weights=str(weights),
        augment={**gate.recipe.augment, **augment},
    )


def run_ours(recipe: ct.TrajectoryRecipe, entry: str, model_options: dict[str, Any]) -> StepRecorder:
    """Our training of ``recipe`` (:func:`fixed_batch_recipe`), recorded."""
    recorder = StepRecorder(entry)
    ct.train_and_score(recipe, threads=2, model_options=model_options, callbacks=[recorder])
    return recorder


def report(title: str, gaps: list[TensorGap], rtol: float, atol: float = 0.0) -> bool:
    """Print the judged median/max relative gap and the failures; True when there are none."""
    median, largest, failures = worst(gaps, rtol, atol)
    skipped = sum(not g.judged for g in gaps)
    verdict = "ok" if not failures else f"FAIL ({len(failures)} outside)"
    print(
        f"{title}: {len(gaps) - skipped} judged, relative gap median {median:.2e}, max {largest:.2e}"
        f"{f', {skipped} numerical zeros not judged' if skipped else ''} — {verdict}"
    )
    for g in failures[:8]:
        print(f"    {g.relative:.3e}  {g.name}  (reference norm {g.reference_norm:.3e})")
    return not failures


def check(
    gate: ct.Gate,
    weights: Path,
    images: int,
    epochs: int,
    model_options: dict[str, Any],
    *,
    flip: bool = False,
    border: bool = False,
) -> bool:
    """Both trainers on the same fixed batch from ``weights``; prints the comparison, True when it holds.
    ``flip``: every image flipped left-right; ``border``: the batch's instances moved across the borders."""
    with tempfile.TemporaryDirectory(prefix="lucid-step-parity-") as tmp:
        work = Path(tmp)
        source = ct._data_yaml(gate.recipe, ct.SHARED_DIR)
        if get_task(gate.recipe.task).image_level:
            if border:
                raise ValueError(f"{gate.name}: --border moves instances; an image-level task has none")
            ours_data = subset_class_folders(source, images, work / "ours")
            reference_data = subset_class_folders(source, images, work / "reference-data")
        else:
            border_task = gate.recipe.task if border else None
            ours_data = subset_dataset(source, images, work / "ours", border_task)
            reference_data = subset_dataset(source, images, work / "reference-data", border_task)
        augment = {**AUGMENT_OFF, "fliplr": 1.0 if flip else 0.0}
        reference_dir = run_reference(gate, weights, reference_data, epochs, work, augment)
        first = read_reference_checkpoint(reference_dir / "epoch0.pt")
        entry, reference_moments = reference_first_step(first)
        recipe = fixed_batch_recipe(gate, weights, ours_data, epochs, augment)
        recorder = run_ours(recipe, entry, model_options)
        total = float(torch.stack([m.double().norm() for m in reference_moments.values()]).norm())
        judged = {n for n, m in reference_moments.items() if float(m.double().norm()) > NEGLIGIBLE * total}
        setting = ", ".join(
            (["every image flipped"] if flip else []) + (["instances across the borders"] if border else [])
        )
        print(
            f"{gate.name}: from {weights.name}, {images} images, {epochs} epochs, one batch each, "
            f"{setting or 'augmentation off'}"
        )
        gradients = compare(recorder.first_step, reference_moments, judged)
        ok = report(f"first step ({_FIRST_STEP_STATE[entry]})", gradients, GRAD_RTOL, GRAD_ATOL * total)
        for epoch in range(epochs):
            reference = reference_ema(read_reference_checkpoint(reference_dir / f"epoch{epoch}.pt"))
            ours = {k: v.half().float() for k, v in recorder.ema[epoch].items()}
            ema_judged = {n for n in reference if n in judged or n not in reference_moments}  # buffers judged
            ok &= report(f"EMA after epoch {epoch}", compare(ours, reference, ema_judged), EMA_RTOL)
        return ok


def default_weights(gate: ct.Gate) -> Path:
    """A mid-run checkpoint of the gate's lowest recorded reference seed here, else the committed canary of the
    gate."""
    for seed in rr.recorded_seeds(gate):
        recorded = rr.seed_dir(gate, seed) / "weights" / f"epoch{gate.recipe.epochs // 2}.pt"
        if recorded.is_file():
            return recorded
    for name, owner in rr.CANARIES.items():
        if owner == gate.name:
            return rr.CANARY_DIR / name
    raise FileNotFoundError(f"{gate.name}: no recorded reference run under {rr.REF_DIR}; pass --weights")


def with_batch(gate: ct.Gate, images: int) -> ct.Gate:
    """``gate`` with a batch (and nominal batch) of ``images``: the fixed batch is the whole subset."""
    if images == gate.recipe.batch_size:
        return gate
    optimizer = {**gate.recipe.optimizer, "nominal_batch": images}
    return replace(gate, recipe=replace(gate.recipe, batch_size=images, optimizer=optimizer))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--task", default="all", help="a gate of check_trajectory.GATES, a task, or all (default)"
    )
    parser.add_argument("--weights", type=Path, help="a reference checkpoint to start from (one gate only)")
    parser.add_argument("--images", type=int, default=16, help="images in the fixed batch (default 16)")
    parser.add_argument("--epochs", type=int, help="epochs of one step each (default: the recipe's)")
    parser.add_argument("--loss", action="append", default=[], metavar="GAIN=VALUE", help="train ours broken")
    parser.add_argument(
        "--flip", action="store_true", help="flip every image left-right (fliplr=1, both sides)"
    )
    parser.add_argument(
        "--border", action="store_true", help="move every instance across a border, cut (detect, segment)"
    )
    args = parser.parse_args(argv)
    gates = ct.select_gates([args.task])
    if args.border:
        gates = [g for g in gates if g.recipe.task in ("detect", "segment")]
    if not gates:
        parser.error(f"--task {args.task} --border: no detect or segment gate")
    if args.weights and len(gates) > 1:
        parser.error(f"--weights needs one gate; --task {args.task} selects {len(gates)}")
    if args.weights and not args.weights.is_file():
        parser.error(f"--weights {args.weights}: no such file")
    if args.images < 1:
        parser.error(f"--images {args.images}: at least 1")
    if not rr.REFBENCH.is_file():
        print(f"{rr.REFBENCH} is not present: nothing to compare against", file=sys.stderr)
        return 2
    ct._quiet_training()
    options = ct.loss_options(args.loss)
    failed = []
    for gate in gates:
        gate = with_batch(gate, args.images)
        try:
            weights = args.weights or default_weights(gate)
            epochs = args.epochs or gate.recipe.epochs
            held = check(gate, weights, args.images, epochs, options, flip=args.flip, border=args.border)
        except (FileNotFoundError, ValueError) as exc:  # no recorded run, too few images: the user's to fix
            print(f"step parity: {exc}", file=sys.stderr)
            return 2
        if not held:
            failed.append(gate.name)
    print(
        f"step parity: {len(gates) - len(failed)} of {len(gates)} gates hold"
        + (f"; failed: {failed}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
