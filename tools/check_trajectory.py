"""Trajectory gate (level 4 of the reproduction protocol): our per-epoch validation curves against the reference's.

**Distributional gate** (the default, ``make goldens``): each :data:`GATES` entry is a recipe (the embedded default
run's, for detect yolo26n/yolo11n, segment, obb, pose and classify) whose reference seed distribution was recorded black box
and scored by our evaluator (``tools/record_reference.py``, ``tools/fidelity/<gate>.json``). Ours trains over N
seeds (``--seeds``, 3 in ``make goldens``, 5 for a release) on the real lucid-train code path and is scored the
same way (in-training validation's protocol). Per gated curve and epoch, from the first epoch where the
reference's relative seed spread is ≤ :data:`SPREAD_BOUND`: ours' seed mean ≥ the reference's minus
:data:`SE_FACTOR` standard errors of the difference, and at the last epoch ≥ :data:`FINAL_RATIO` × the reference's
(:func:`compare_distributions`; docs/TRAINING.md, "Distributional gate"). Every gate prints its per-epoch table
(both means, both spreads, the limit, the verdict); ``--task all|detect|segment|obb|pose|classify|<gate>`` picks gates,
``--runs-dir DIR`` keeps and reuses each seed's scored rows, ``--loss box=3.75`` trains a deliberately broken
recipe, ``--self-check`` trains nothing and reports how often the rule fails the reference against itself.
Usage: ``uv run --no-sync python tools/check_trajectory.py [--task T] [--seeds N] [--threads N]``.

**Recorded curves** (``--only NAME``): one seed of ours against one recorded reference run.

Each entry of :data:`RECIPES` names a reference trajectory under ``../shared/trajectories`` (read its README: a band
is valid only for the exact recipe and regime it was recorded under), the dataset, and the recipe to train with the
real lucid-train code path (``DetectionLitModule`` + ``DetectionDataModule`` under a Lightning ``Trainer``; nothing is
written outside a temporary directory). After every epoch the EMA weights are scored exactly as the reference's were
(``lucid_train.eval.evaluate_model`` = ``lucid-eval``: COCO protocol, square letterbox at the recorded image size,
``decode="both"`` for yolo26), and every curve of the entry is compared epoch by epoch:

* from ``band.from_epoch`` on, ours ≥ ``band.each`` × the reference (0.85 for the shapes recipe);
* at the last epoch, ours ≥ ``band.final`` × the reference (0.95);
* where the band is absolute (``band.abs_each``/``band.abs_mean``, the pose fine-tune): from
  ``band.from_epoch`` on, ``|ours − reference| ≤ abs_each`` at every epoch, and the mean of ``|ours − reference|``
  over those epochs ``≤ abs_mean`` (a fine-tune that over-fits more slowly or not at all misses both ways);
* no non-finite training loss (the epoch means of the objective's loss items are recorded in every row).

The per-epoch table (reference, ours and the ratio for each curve, plus training's own in-loop validation figures)
is printed; the exit status is 1 when a value is outside its band, 0 otherwise; an entry whose shared files are
absent is skipped. ``make goldens`` runs it after ``tools/check_goldens.py``; it trains for minutes on a CPU, so its
test is ``slow``.

Adding a recipe (e.g. the pose fine-tune ``coco8pose_yolo11n_finetune.json``): one more
:class:`TrajectoryRecipe` with its data, model (``weights`` for a fine-tune), training settings and ``curves`` — each
curve names the key path of the reference value inside an ``epochs[e]`` record (``["nms", "mAP50-95"]`` or
``["keypoints_mAP50-95"]``) and the decode path / IoU type of our score.

Usage: ``uv run --no-sync python tools/check_trajectory.py [--only NAME] [--threads N] [--json]``. Environment:
``LUCID_SHARED_DIR`` (default ``../shared`` next to the checkout).

One seed is one draw: on the shapes recipe the final ratio moves by several hundredths from seed to seed (the seed
table of docs/TRAINING.md). ``--seed N`` (repeatable) trains other seeds; with several, each seed's table and a
per-seed summary are printed and the exit status is the band check of the seed-mean curve. ``--contiguous`` trains
the NCHW step (the CPU default is channels-last), ``--compile`` the opt-in compiled one, so a path can be
compared with the default over the same seeds. ``make goldens`` runs the recipe's own seed on the default path.

``--checkpoints DIR`` (repeatable, with one ``--only``) scores a finished run instead of training one: the
checkpoint of every epoch, ``epoch<e>.pt`` (a reference checkpoint, as the reference's trainer names them with
``save_period=1``; read by the restricted unpickler, EMA weights) or ``epoch<e>.safetensors``, scored exactly as
the trajectory file's epochs and ours are, then the same band check. It is how the reference's own run under
another seed, or on another machine class, is held against the recorded curve (docs/TRAINING.md).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import random
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("LUCID_SHARED_DIR", REPO_ROOT.parent / "shared"))


@dataclass(frozen=True)
class Curve:
    """One compared curve: the reference value at ``reference_key`` in each epoch record vs our score."""

    label: str
    reference_key: tuple[str, ...]
    decode: str = "nms"
    iou_type: str = "bbox"
    #: ``mAP50-95``/``mAP50``; ``top1``/``top5`` for an image-level task (``evaluate_accuracy``'s result fields)
    metric: str = "mAP50-95"
    #: the distributional gate judges this curve (False: printed only)
    gated: bool = True


@dataclass(frozen=True)
class Band:
    """``ours >= each × reference`` from epoch ``from_epoch`` on, and ``>= final × reference`` at the last epoch."""

    from_epoch: int = 1
    each: float = 0.85
    final: float = 0.95
    #: absolute band: ``|ours - reference| <= abs_each`` at every epoch from ``from_epoch`` (None = not checked)
    abs_each: float | None = None
    #: absolute band: mean ``|ours - reference|`` over the epochs from ``from_epoch`` ``<= abs_mean`` (None = no)
    abs_mean: float | None = None


@dataclass(frozen=True)
class TrajectoryRecipe:
    """A reference trajectory and the exact recipe it was recorded under (see ../shared/trajectories/README.md)."""

    name: str
    trajectory: str  # relative to the shared directory
    data: str  # data YAML, relative to the shared directory
    family: str
    scale: str
    epochs: int
    batch_size: int
    imgsz: int
    optimizer: dict[str, Any]
    curves: tuple[Curve, ...]
    task: str = "detect"
    #: weights to fine-tune from, relative to the shared directory (None = random init)
    weights: str | None = None
    augment: dict[str, Any] = field(default_factory=dict)
    workers: int = 1
    threads: int = 2
    seed: int = 0
    score_imgsz: int | None = None  # image size of the scoring (default: imgsz)
    #: scoring protocol: False/False = square letterbox, one label per box (how the recorded curves were scored);
    #: True/True = in-training validation's (rectangular batches, a box per class above conf)
    score_rect: bool = False
    score_multi_label: bool = False
    band: Band = Band()


RECIPES: tuple[TrajectoryRecipe, ...] = (
    TrajectoryRecipe(
        name="shapes_yolo26n_adamw",
        trajectory="trajectories/shapes_yolo26n_adamw.json",
        data="data/shapes-l4/data.yaml",
        family="yolo26",
        scale="n",
        epochs=10,
        batch_size=16,
        imgsz=96,
        # the embedded default run's settings (lucid_train/configs/shapes_default.yaml), as the README records
        optimizer={"name": "AdamW", "lr0": 0.004, "momentum": 0.9, "nominal_batch": 16, "warmup_epochs": 1.0},
        augment={"close_mosaic": 3},
        curves=(
            Curve("topk mAP50-95", ("topk", "mAP50-95"), decode="topk"),
            Curve("nms mAP50-95", ("nms", "mAP50-95"), decode="nms"),
        ),
    ),
    TrajectoryRecipe(
        # fine-tune the imported YOLO11n-pose on coco8-pose (README: the reference over-fits the 4
        # training images; a faithful recipe follows its keypoint curve down). Everything not listed is the
        # reference default the file's `recipe.everything_else` names: 3 warm-up epochs (bias lr 0.1, momentum
        # 0.8; 2 batches per epoch, so 6 warm-up iterations: the reference has had no 100-iteration floor since 8.4.103,
        # lucid_core.optim.schedule), close_mosaic 10
        # > epochs (mosaic closed from epoch 0), HSV/flip (flip_idx from the YAML)/affine defaults, pose 12, kobj 1.
        name="coco8pose_yolo11n_finetune",
        trajectory="trajectories/coco8pose_yolo11n_finetune.json",
        data="data/coco8-pose/coco8-pose.yaml",
        family="yolo11",
        scale="n",
        task="pose",
        weights="weights/yolo11n-pose.pt",
        epochs=8,
        batch_size=2,
        imgsz=640,
        optimizer={"name": "SGD", "lr0": 0.002, "momentum": 0.937, "nominal_batch": 2},
        augment={"close_mosaic": 10},
        workers=0,
        curves=(
            Curve("box mAP50-95", ("bbox_mAP50-95",), decode="nms", iou_type="bbox"),
            Curve("pose mAP50-95", ("keypoints_mAP50-95",), decode="nms", iou_type="keypoints"),
        ),
        # the fine-tune's acceptance: within 0.08 of the reference at every epoch, within 0.04 on average
        band=Band(from_epoch=0, each=0.0, final=0.0, abs_each=0.08, abs_mean=0.04),
    ),
)


# ---------------------------------------------------------------------------------------------- distributional gate
FIDELITY_DIR = REPO_ROOT / "tools" / "fidelity"
#: synthesized datasets of the gate (``synth:<task>``), shared with tools/record_reference.py's reference runs
SYNTH_DATA_DIR = REPO_ROOT / "runs" / "fidelity" / "data"
#: ``lucid-data synth`` settings of the embedded default dataset (lucid_train/configs/shapes_default.yaml)
SYNTH_SETTINGS: dict[str, int] = {"n_train": 1000, "n_val": 100, "imgsz": 96, "num_classes": 3, "seed": 0}
#: the gate judges every epoch from the first where the reference's own relative seed spread (sample std / mean)
#: is at most this
SPREAD_BOUND = 0.10
#: how many standard errors of the difference of the two seed means ours may sit below the reference's mean
SE_FACTOR = 2.0
#: the final epoch's seed mean must reach this fraction of the reference's
FINAL_RATIO = 0.97
#: our seeds per gate in ``make goldens`` (a release check trains 5: docs/TRAINING.md)
GATE_SEEDS = 3


@dataclass(frozen=True)
class Gate:
    """A recipe held against the reference's seed distribution, ``tools/fidelity/<name>.json``.

    ``recipe`` trains and scores ours (and scores the reference's checkpoints: tools/record_reference.py);
    ``reference_model`` is the model YAML the reference's ``train()`` was given."""

    recipe: TrajectoryRecipe
    reference_model: str

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def distribution(self) -> Path:
        return FIDELITY_DIR / f"{self.name}.json"


def _shapes_gate(name: str, family: str, task: str, data: str, curves: tuple[Curve, ...], model: str) -> Gate:
    """The embedded default run's recipe (shapes_default.yaml) for ``task``, scored by in-training validation's
    protocol."""
    recipe = TrajectoryRecipe(
        name=name,
        trajectory="",
        data=data,
        family=family,
        scale="n",
        task=task,
        epochs=10,
        batch_size=16,
        imgsz=96,
        optimizer={"name": "AdamW", "lr0": 0.004, "momentum": 0.9, "nominal_batch": 16, "warmup_epochs": 1.0},
        augment={"close_mosaic": 3},
        curves=curves,
        score_rect=True,
        score_multi_label=True,
    )
    return Gate(recipe, model)


def _classify_gate(name: str, family: str, model: str) -> Gate:
    """The embedded default run of classification (lucid_train/configs/classify_default.yaml: synthetic 1000/100
    images of 3 classes at 64 px, 10 epochs, batch 16, nominal batch 16, AdamW at auto's lr0 for 3 classes, 1
    warm-up epoch), scored by top-1 accuracy (``evaluate_accuracy``: centre crop at imgsz). Top-5 is printed, not
    gated: with 3 classes it is 1.0 for every model."""
    recipe = TrajectoryRecipe(
        name=name,
        trajectory="",
        data="synth:classify",
        family=family,
        scale="n",
        task="classify",
        epochs=10,
        batch_size=16,
        imgsz=64,
        # lr0 = round(0.002 * 5 / (4 + 3), 6): what classify_default.yaml's AdamW resolves to (lucid_core.optim)
        optimizer={
            "name": "AdamW",
            "lr0": 0.001429,
            "momentum": 0.9,
            "nominal_batch": 16,
            "warmup_epochs": 1.0,
        },
        curves=(Curve("top1 acc", (), metric="top1"), Curve("top5 acc", (), metric="top5", gated=False)),
    )
    return Gate(recipe, model)


def _both(iou_type: str, gated: bool = True) -> tuple[Curve, ...]:
    """The one-to-many + NMS path (in-training validation's primary) and the one-to-one top-k path of yolo26."""
    what = {"bbox": "box", "segm": "mask", "keypoints": "pose", "rotated": "obb"}[iou_type]
    return tuple(
        Curve(f"{decode} {what} mAP50-95", (), decode=decode, iou_type=iou_type, gated=gated)
        for decode in ("nms", "topk")
    )


GATES: tuple[Gate, ...] = (
    _shapes_gate(
        "shapes_yolo26n_detect", "yolo26", "detect", "data/shapes-l4/data.yaml", _both("bbox"), "yolo26n.yaml"
    ),
    _shapes_gate(
        "shapes_yolo26n_segment",
        "yolo26",
        "segment",
        "data/shapes-seg/data.yaml",
        _both("segm") + _both("bbox", gated=False),
        "yolo26n-seg.yaml",
    ),
    _shapes_gate("shapes_yolo26n_obb", "yolo26", "obb", "synth:obb", _both("rotated"), "yolo26n-obb.yaml"),
    _shapes_gate(
        "shapes_yolo26n_pose",
        "yolo26",
        "pose",
        "synth:pose",
        _both("keypoints") + _both("bbox", gated=False),
        "yolo26n-pose.yaml",
    ),
    _shapes_gate(
        "shapes_yolo11n_detect",
        "yolo11",
        "detect",
        "data/shapes-l4/data.yaml",
        _both("bbox")[:1],
        "yolo11n.yaml",
    ),
    _classify_gate("shapes_yolo26n_classify", "yolo26", "yolo26n-cls.yaml"),
)


def select_gates(names: list[str]) -> list[Gate]:
    """The gates named by ``names``: ``all``, a gate's name, or a task (every gate of that task)."""
    chosen = [g for g in GATES if "all" in names or g.name in names or g.recipe.task in names]
    unknown = [n for n in names if n != "all" and not any(n in (g.name, g.recipe.task) for g in GATES)]
    if unknown:
        raise SystemExit(
            f"trajectory: unknown --task {', '.join(unknown)} (known: all, "
            f"{', '.join(sorted({g.recipe.task for g in GATES}))}, {', '.join(g.name for g in GATES)})"
        )
    return chosen


def synth_dataset(task: str, root: Path = SYNTH_DATA_DIR, imgsz: int = SYNTH_SETTINGS["imgsz"]) -> Path:
    """The gate's synthetic ``task`` dataset under ``root`` (``shapes-<task>``, :data:`SYNTH_SETTINGS` at ``imgsz``,
    the recipe's image size as the embedded default synthesizes it): its data YAML, or for an image-level task
    (classify) its folder-per-class root. Synthesized on first use into a temporary sibling and renamed into place
    (an interrupted synthesis leaves nothing)."""
    from lucid_core.tasks import get_task
    from lucid_data.synth import synthesize

    folder = root / f"shapes-{task}"
    image_level = get_task(task).image_level
    made = folder / "train" if image_level else folder / "data.yaml"
    if not made.exists():
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root, prefix=f".shapes-{task}-") as tmp:
            synthesize(task, Path(tmp) / "out", **{**SYNTH_SETTINGS, "imgsz": imgsz})
            (Path(tmp) / "out").rename(folder)
    return folder if image_level else folder / "data.yaml"


def load_distribution(gate: Gate, path: Path | None = None) -> dict[str, Any]:
    """The reference's recorded seed distribution of ``gate`` (tools/record_reference.py score)."""
    path = path or gate.distribution
    if not path.is_file():
        raise TrajectorySkipped(f"{path} is not present (tools/record_reference.py record/score {gate.name})")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    runs = data.get("runs")
    if not isinstance(runs, dict) or not runs:
        raise SystemExit(f"{path}: no runs")
    for seed, rows in runs.items():
        if len(rows) != gate.recipe.epochs:
            raise SystemExit(f"{path}: seed {seed} has {len(rows)} epochs, expected {gate.recipe.epochs}")
    return data


def _mean_sd(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


@dataclass(frozen=True)
class GateFailure:
    """One failed check of one curve: ``check`` names the cell ("epoch 7", "final epoch", "spread"), ``message``
    gives the figures; ``str()`` is the line the gate prints."""

    curve: str
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.curve}: {self.message}"


@dataclass(frozen=True)
class EpochVerdict:
    """One epoch of one curve: both seed means and spreads, the lower limit for ours, and the verdict."""

    epoch: int
    ref_mean: float
    ref_sd: float
    ours_mean: float
    ours_sd: float
    limit: float  # ref_mean - SE_FACTOR * SE of the difference (nan before the judged epochs)
    verdict: str  # "ok", "LOW", "-" (not judged: the reference's spread is above SPREAD_BOUND), "info"


def curve_stats(curve: Curve, runs: list[list[dict[str, Any]]]) -> list[tuple[float, float]]:
    """Per epoch, the seed mean and sample SD of ``curve`` over ``runs`` (one row list per seed)."""
    return [_mean_sd([float(rows[e][curve.label]) for rows in runs]) for e in range(len(runs[0]))]


def first_judged_epoch(stats: Sequence[tuple[float, ...]], spread_bound: float = SPREAD_BOUND) -> int:
    """The first epoch whose reference relative spread (``stats[e]`` = (mean, sd, …)) is at most ``spread_bound``;
    ``len(stats)`` when there is none."""
    return next((e for e, (mean, sd, *_) in enumerate(stats) if sd <= spread_bound * mean), len(stats))


def compare_distributions(
    curve: Curve,
    reference: list[list[dict[str, Any]]],
    ours: list[list[dict[str, Any]]],
    spread_bound: float = SPREAD_BOUND,
    se_factor: float = SE_FACTOR,
    final_ratio: float = FINAL_RATIO,
    judge_from: int | None = None,
) -> tuple[list[EpochVerdict], list[GateFailure]]:
    """Per epoch, ours' seed mean against the reference's (``reference``/``ours``: one row list per seed).

    Judged epochs: from the first epoch where the reference's relative spread (sd / mean) is at most
    ``spread_bound`` to the last (a later epoch with a wider spread is judged with its wider SE). There ours' mean
    must be ``>= ref mean - se_factor * sqrt(sd_ours²/n_ours + sd_ref²/n_ref)``
    (one seed of ours: its sd is taken as the reference's), and at the last epoch ``>= final_ratio × ref mean``.
    ``judge_from`` fixes the first judged epoch instead (:func:`reference_self_check`: the full distribution's).
    Returns the per-epoch verdicts and one :class:`GateFailure` per failed check."""
    epochs = len(reference[0])
    if any(len(rows) != epochs for rows in [*reference, *ours]):
        raise ValueError(f"{curve.label}: runs scored different numbers of epochs")
    stats = [(*r, *o) for r, o in zip(curve_stats(curve, reference), curve_stats(curve, ours), strict=True)]
    first = judge_from if judge_from is not None else first_judged_epoch(stats, spread_bound)
    verdicts, failures = [], []
    n_ref, n_ours = len(reference), len(ours)
    for e, (ref_mean, ref_sd, ours_mean, ours_sd) in enumerate(stats):
        sd_ours = ours_sd if n_ours > 1 else ref_sd
        limit = ref_mean - se_factor * math.sqrt(sd_ours**2 / n_ours + ref_sd**2 / n_ref)
        judged = e >= first
        verdict = "info" if not curve.gated else "-" if not judged else "ok" if ours_mean >= limit else "LOW"
        if verdict == "LOW":
            failures.append(
                GateFailure(
                    curve.label,
                    f"epoch {e}",
                    f"epoch {e} seed mean {ours_mean:.4f} < {limit:.4f} = reference mean {ref_mean:.4f} - "
                    f"{se_factor:g} SE of the difference",
                )
            )
        if curve.gated and e == epochs - 1 and ours_mean < final_ratio * ref_mean:
            verdict = "LOW" if verdict == "ok" else verdict
            failures.append(
                GateFailure(
                    curve.label,
                    "final epoch",
                    f"final epoch seed mean {ours_mean:.4f} < {final_ratio} x reference mean {ref_mean:.4f}",
                )
            )
        verdicts.append(
            EpochVerdict(e, ref_mean, ref_sd, ours_mean, ours_sd, limit if judged else float("nan"), verdict)
        )
    if curve.gated and first == epochs:
        failures.append(
            GateFailure(
                curve.label,
                "spread",
                f"the reference's relative seed spread exceeds {spread_bound} at every epoch",
            )
        )
    return verdicts, failures


@dataclass(frozen=True)
class SelfCheck:
    """The gate's rule applied to the reference against itself (:func:`reference_self_check`)."""

    gate: str
    n_ours: int
    n_reference: int  # seeds left on the reference's side of each split
    splits: int
    failed: int  # splits with at least one failed check
    #: check (the failure line up to its figures) -> how many splits it failed in
    cells: dict[str, int]
    shift: float = 0.0  # the ours side lowered by this fraction (0: the false-fail rate)

    @property
    def rate(self) -> float:
        return self.failed / self.splits if self.splits else 0.0


def _scaled(rows: list[dict[str, Any]], factor: float, curves: Sequence[Curve]) -> list[dict[str, Any]]:
    """``rows`` with every curve's value multiplied by ``factor``."""
    labels = {c.label for c in curves}
    return [{k: float(v) * factor if k in labels else v for k, v in row.items()} for row in rows]


def reference_self_check(
    gate: Gate,
    data: dict[str, Any],
    n_ours: int = GATE_SEEDS,
    max_splits: int = 400,
    seed: int = 0,
    shift: float = 0.0,
) -> SelfCheck:
    """How often the gate fails the reference itself: every split of its recorded seeds into ``n_ours`` seeds in
    the role of ours and the rest as the reference (a random ``max_splits`` of them when there are more), judged by
    :func:`compare_distributions` from the epochs the full distribution judges. Both sides are then the same
    training, so each failure is a false alarm. ``shift`` lowers the ours side by that fraction at every epoch: the
    rate is then how often the gate catches a curve that much lower (its power)."""
    seeds = sorted(data["runs"], key=int)
    if not 0 < n_ours < len(seeds) - 1:
        raise ValueError(
            f"{gate.name}: {len(seeds)} reference seeds cannot be split into {n_ours} and the rest"
        )
    everyone = [data["runs"][s] for s in seeds]
    judge_from = {c.label: first_judged_epoch(curve_stats(c, everyone)) for c in gate.recipe.curves}
    splits = list(itertools.combinations(seeds, n_ours))
    if len(splits) > max_splits:
        splits = random.Random(seed).sample(splits, max_splits)
    failed, cells = 0, {}
    for chosen in splits:
        ours = [_scaled(data["runs"][s], 1.0 - shift, gate.recipe.curves) for s in chosen]
        reference = [data["runs"][s] for s in seeds if s not in chosen]
        found = [
            failure
            for c in gate.recipe.curves
            for failure in compare_distributions(c, reference, ours, judge_from=judge_from[c.label])[1]
        ]
        failed += bool(found)
        for failure in found:
            cell = f"{failure.curve}: {failure.check}"
            cells[cell] = cells.get(cell, 0) + 1
    return SelfCheck(gate.name, n_ours, len(seeds) - n_ours, len(splits), failed, cells, shift)


def format_self_check(check: SelfCheck, top: int = 4) -> str:
    """One line per gate: the false-fail rate and the checks that fail most often."""
    worst = sorted(check.cells.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    most = "; ".join(f"{name} {count / check.splits:.1%}" for name, count in worst) or "none"
    return (
        f"{check.gate}: {check.splits} splits of the reference's seeds, {check.n_ours} as ours"
        f"{f' lowered {check.shift:.0%}' if check.shift else ''} against {check.n_reference}: the gate fails "
        f"{check.failed} ({check.rate:.1%}); most often: {most}"
    )


def format_gate_table(curve: Curve, verdicts: list[EpochVerdict], n_ref: int, n_ours: int) -> str:
    """The per-epoch table of one curve: both seed means and spreads (sample sd), ours' lower limit, verdict."""
    lines = [
        f"  {curve.label} (reference {n_ref} seeds, ours {n_ours})",
        "  epoch | ref mean | ref sd | ours mean | ours sd | ours/ref | limit | verdict",
    ]
    for v in verdicts:
        ratio = f"{v.ours_mean / v.ref_mean:.3f}" if v.ref_mean else "inf"
        limit = "" if math.isnan(v.limit) else f"{v.limit:.4f}"
        lines.append(
            f"  {v.epoch} | {v.ref_mean:.4f} | {v.ref_sd:.4f} | {v.ours_mean:.4f} | {v.ours_sd:.4f} | {ratio} | "
            f"{limit} | {v.verdict}"
        )
    return "\n".join(lines)


#: the code a training run depends on: a cached seed trained by other sources is trained again
TRAINING_SOURCES = (
    "packages/lucid-core/src",
    "packages/lucid-data/src",
    "packages/lucid-accel/src",
    "packages/lucid-train/src",
)


def sources_digest(entries: Iterable[str], root: Path = REPO_ROOT) -> str:
    """A short hash of every ``.py`` file (relative path and bytes) under ``entries`` (folders or files of
    ``root``)."""
    digest = hashlib.sha256()
    for entry in entries:
        path = root / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:12]


def _recipe_digest(recipe: TrajectoryRecipe, model_options: dict[str, Any] | None = None) -> str:
    """A short digest of the recipe's settings and model options: cached rows of another recipe are never reused."""
    text = repr((recipe, sorted((model_options or {}).items())))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def our_runs(
    gate: Gate,
    seeds: list[int],
    threads: int | None = None,
    runs_dir: Path | None = None,
    model_options: dict[str, Any] | None = None,
) -> dict[int, list[dict[str, Any]]]:
    """Train and score ours for every seed; with ``runs_dir``, a seed's rows are kept in
    ``runs_dir/<gate>/seed<s>.json`` with the recipe's digest and :data:`TRAINING_SOURCES`' digest, and reused by a
    later call only when both match (rows trained by other code are trained again)."""
    from lucid_core.atomic import atomic_write_json

    runs = {}
    code = sources_digest(TRAINING_SOURCES) if runs_dir else ""
    for seed in seeds:
        recipe = replace(gate.recipe, seed=seed)
        cached = runs_dir / gate.name / f"seed{seed}.json" if runs_dir else None
        if cached is not None and cached.is_file():
            saved = json.loads(cached.read_text(encoding="utf-8"))
            if saved.get("recipe_digest") == _recipe_digest(recipe, model_options):
                if saved.get("sources_digest") == code:
                    print(f"  {gate.name} seed {seed}: rows from {cached}")
                    runs[seed] = saved["rows"]
                    continue
                print(f"  {gate.name} seed {seed}: {cached} was trained by other sources; training again")
        start = time.perf_counter()
        rows = train_and_score(recipe, threads=threads, model_options=model_options)
        print(f"  {gate.name} seed {seed}: trained and scored in {time.perf_counter() - start:.0f} s")
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            payload = {
                "recipe_digest": _recipe_digest(recipe, model_options),
                "sources_digest": code,
                "rows": rows,
            }
            atomic_write_json(cached, payload, indent=1)  # an interrupted run leaves no half-written seed
        runs[seed] = rows
    return runs


def run_gate(
    gate: Gate,
    seeds: list[int],
    threads: int | None = None,
    runs_dir: Path | None = None,
    distribution: Path | None = None,
    model_options: dict[str, Any] | None = None,
    measured: dict[str, Any] | None = None,
) -> list[str]:
    """One gate: ours over ``seeds`` against the recorded distribution; prints the per-curve tables and returns
    the failures (one line each, prefixed with the gate's name). Our rows go to ``measured[gate]`` (seed -> rows)."""
    data = load_distribution(gate, distribution)
    reference = [data["runs"][k] for k in sorted(data["runs"], key=int)]
    ours = our_runs(gate, seeds, threads=threads, runs_dir=runs_dir, model_options=model_options)
    if measured is not None:
        measured[gate.name] = ours
    failures = []
    for seed, rows in ours.items():
        bad = [r["epoch"] for r in rows for v in r.get("losses", {}).values() if not math.isfinite(float(v))]
        if bad:
            failures.append(f"seed {seed}: non-finite training loss at epochs {sorted(set(bad))}")
    ref_seeds = sorted(int(k) for k in data["runs"])
    print(
        f"{gate.name}: ours seeds {seeds} vs the reference's {ref_seeds} ({(distribution or gate.distribution).name})"
    )
    for curve in gate.recipe.curves:
        verdicts, found = compare_distributions(curve, reference, list(ours.values()))
        print(format_gate_table(curve, verdicts, len(reference), len(ours)))
        failures += [str(failure) for failure in found]
    print(f"{'FAIL' if failures else 'ok':<4} {gate.name}")
    if failures and len(reference) > len(ours) + 1:
        # a red gate, priced: how often the same rule fails the reference against itself
        chance = reference_self_check(gate, data, len(ours))
        print(
            f"     the rule fails the reference against itself in {chance.rate:.1%} of {len(ours)}-seed draws"
        )
    return [f"{gate.name}: {line}" for line in failures]


class TrajectorySkipped(Exception):
    """The recipe's shared files are not present; reported as SKIP, not as a failure."""


class CheckpointsError(Exception):
    """A ``--checkpoints`` directory or file that cannot be scored; ``main`` prints it as one line, exit status 2."""


def reference_value(record: dict[str, Any], key: tuple[str, ...]) -> float:
    """The value at ``key`` (a path of dict keys) inside one epoch record of the trajectory file."""
    value: Any = record
    for part in key:
        if not isinstance(value, dict) or part not in value:
            raise SystemExit(
                f"trajectory epoch {record.get('epoch')}: no key {'/'.join(key)} (missing {part!r})"
            )
        value = value[part]
    return float(value)


def load_trajectory(recipe: TrajectoryRecipe, shared: Path = SHARED_DIR) -> dict[str, Any]:
    path = shared / recipe.trajectory
    if not path.is_file():
        raise TrajectorySkipped(f"{path} is not present")
    trajectory: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    epochs = trajectory.get("epochs")
    if not isinstance(epochs, list) or len(epochs) != recipe.epochs:
        raise SystemExit(
            f"{path}: expected {recipe.epochs} epoch records for recipe {recipe.name}, got "
            f"{len(epochs) if isinstance(epochs, list) else type(epochs).__name__}"
        )
    return trajectory


def _our_value(result: Any, curve: Curve) -> float:
    """``curve``'s metric from an ``EvalResult`` of ``decode="both"`` (primary path, or one in other_decodes)."""
    chosen = result if result.decode == curve.decode else result.other_decodes.get(curve.decode)
    if chosen is None:
        raise SystemExit(f"curve {curve.label}: decode path {curve.decode!r} was not scored")
    per_type = chosen.per_type[curve.iou_type]
    return float(per_type.map50_95 if curve.metric == "mAP50-95" else per_type.map50)


def _data_yaml(recipe: TrajectoryRecipe, shared: Path) -> Path:
    if recipe.data.startswith("synth:"):
        return synth_dataset(recipe.data.removeprefix("synth:"), imgsz=recipe.imgsz)
    data_yaml = shared / recipe.data  # a data YAML, or an image-level task's class-folder root
    if not data_yaml.exists():
        raise TrajectorySkipped(f"{data_yaml} is not present")
    return data_yaml


def score_model(recipe: TrajectoryRecipe, model: Any, val_source: Any) -> dict[str, float]:
    """Every curve of ``recipe`` for ``model``, scored exactly as the reference's epochs were (the README's
    ``lucid-eval --imgsz <score size> --decode both``). An image-level task (``Task.image_level``: classify) is
    scored by ``evaluate_accuracy`` at the score size (centre crop), its curves' ``metric`` ``top1``/``top5``."""
    from lucid_core.tasks import get_task
    from lucid_train.eval import evaluate_accuracy, evaluate_model

    if get_task(recipe.task).image_level:
        accuracy = evaluate_accuracy(
            model, val_source, imgsz=recipe.score_imgsz or recipe.imgsz, batch_size=32
        )
        return {curve.label: float(getattr(accuracy, curve.metric)) for curve in recipe.curves}
    result = evaluate_model(
        model,
        val_source,
        imgsz=recipe.score_imgsz or recipe.imgsz,
        decode="both" if any(c.decode == "topk" for c in recipe.curves) else "nms",
        batch_size=32,
        # a recorded curve was scored by lucid-eval's earlier default (square letterbox, one label per box); the
        # distributional gate scores both sides with in-training validation's protocol (recipe.score_*)
        rect=recipe.score_rect,
        multi_label=recipe.score_multi_label,
    )
    return {curve.label: _our_value(result, curve) for curve in recipe.curves}


def _print_epoch(recipe: TrajectoryRecipe, row: dict[str, Any]) -> None:
    print(f"  epoch {row['epoch']}: " + ", ".join(f"{c.label} {row[c.label]:.4f}" for c in recipe.curves))


def epoch_checkpoints(recipe: TrajectoryRecipe, directory: Path) -> list[Path]:
    """The checkpoint of every epoch of ``recipe`` in ``directory``: ``epoch<e>.pt`` (a reference checkpoint, as its
    trainer's ``save_period=1`` names them, 0-based) or ``epoch<e>.safetensors`` (lucid-core's format), for
    e = 0 .. epochs-1. All are looked up before anything is scored; the first missing one is named."""
    if not directory.is_dir():
        raise CheckpointsError(f"--checkpoints {directory}: not a directory")
    paths = []
    for epoch in range(recipe.epochs):
        found = [
            p
            for p in (directory / f"epoch{epoch}.pt", directory / f"epoch{epoch}.safetensors")
            if p.is_file()
        ]
        if len(found) != 1:
            what = "both" if found else "neither"
            raise CheckpointsError(
                f"--checkpoints {directory}: {what} of epoch{epoch}.pt (reference) and epoch{epoch}.safetensors "
                f"(lucid-core) for epoch {epoch} of {recipe.name}'s {recipe.epochs}"
            )
        paths.append(found[0])
    return paths


def validation_source(recipe: TrajectoryRecipe, shared: Path = SHARED_DIR) -> Any:
    """The validation source every scorer of ``recipe`` reads (the recipe's data, imgsz and batch, no workers)."""
    from lucid_train.datamodule import DetectionDataModule

    return DetectionDataModule(
        root=str(_data_yaml(recipe, shared)),
        imgsz=recipe.imgsz,
        batch_size=recipe.batch_size,
        workers=0,
        task=recipe.task,
    ).val_source()


def score_checkpoints(
    recipe: TrajectoryRecipe, directory: Path, shared: Path = SHARED_DIR, threads: int | None = None
) -> list[dict[str, Any]]:
    """Score a finished run's per-epoch checkpoints (ours, or the reference's own under another seed or on another
    machine) exactly as :func:`train_and_score` scores our epochs; the rows carry no training figures.

    A reference ``.pt`` is read by the restricted unpickler (``lucid_core.interop``: nothing in it is executed),
    its EMA weights when present, as the trajectory file's epochs were."""
    import torch

    from lucid_core import load
    from lucid_core.interop.reference import import_checkpoint

    paths = epoch_checkpoints(recipe, directory)
    torch.set_num_threads(int(threads or recipe.threads))
    val_source = validation_source(recipe, shared)
    rows: list[dict[str, Any]] = []
    for epoch, path in enumerate(paths):
        kind = "reference" if path.suffix == ".pt" else "lucid-core"
        try:  # a user's file: whatever stops it loading is reported with its name, not as a traceback
            model = import_checkpoint(path)[0] if path.suffix == ".pt" else load(path).model
        except Exception as exc:
            raise CheckpointsError(
                f"--checkpoints {path}: not readable as a {kind} checkpoint ({type(exc).__name__}: {exc})"
            ) from exc
        try:
            scores = score_model(recipe, model.eval(), val_source)
        except ValueError as exc:  # the evaluator's refusal, e.g. a one-decode model under a yolo26 recipe
            raise CheckpointsError(f"--checkpoints {path}: does not fit recipe {recipe.name}: {exc}") from exc
        row = {"epoch": epoch, "in_training": {}, "losses": {}, **scores}
        rows.append(row)
        _print_epoch(recipe, row)
    return rows


def recipe_modules(
    recipe: TrajectoryRecipe,
    data_yaml: Path,
    shared: Path = SHARED_DIR,
    *,
    workers: int | None = None,
    model_options: dict[str, Any] | None = None,
) -> tuple[Any, Any]:
    """The data module and Lightning module of ``recipe`` on ``data_yaml`` (:func:`train_and_score` trains them;
    ``workers`` overrides the recipe's), built in that order: the module's random initialisation follows the
    caller's seed."""
    from lucid_data.augment.pipeline import AugmentConfig
    from lucid_train.datamodule import DetectionDataModule
    from lucid_train.module import DetectionLitModule
    from lucid_train.recipe import OptimizerConfig

    datamodule = DetectionDataModule(
        root=str(data_yaml),
        imgsz=recipe.imgsz,
        batch_size=recipe.batch_size,
        workers=recipe.workers if workers is None else workers,
        seed=recipe.seed,
        augment=AugmentConfig(**recipe.augment),
        task=recipe.task,
    )
    module = DetectionLitModule(
        family=recipe.family,
        task=recipe.task,
        scale=recipe.scale,
        num_classes=datamodule.num_classes,
        names=datamodule.names,
        imgsz=datamodule.imgsz,
        weights=str(shared / recipe.weights) if recipe.weights else None,
        optimizer=OptimizerConfig(**recipe.optimizer),
        task_options=datamodule.task_options,  # pose: kpt_shape/flip_idx/kpt_sigmas of the YAML (lucid-train)
        **(model_options or {}),
    )
    return datamodule, module


def train_and_score(
    recipe: TrajectoryRecipe,
    shared: Path = SHARED_DIR,
    threads: int | None = None,
    model_options: dict[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
) -> list[dict[str, Any]]:
    """Train the recipe; per epoch: our value of every curve and training's own validation metrics.
    ``callbacks`` are extra Lightning callbacks (e.g. an instrument reading the optimiser or the EMA).

    ``model_options`` are extra ``DetectionLitModule`` arguments outside the recipe, e.g. the step paths of issue
    18 (``{"channels_last": False}``: the contiguous step the CPU default replaced; ``{"compile": True}``), to ask
    whether a path trains like the default."""
    import lightning.pytorch as pl
    import torch

    from lucid_train.callbacks import EpochStateCallback
    from lucid_train.loggers import drop_lightning_tips

    drop_lightning_tips()  # the same quiet log as lucid-train's own runs

    data_yaml = _data_yaml(recipe, shared)
    rows: list[dict[str, Any]] = []

    class ScoreEachEpoch(pl.Callback):
        def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
            scores = score_model(recipe, pl_module.ema_model, datamodule.val_source())
            pl_module.close_epoch()  # idempotent per epoch: the epoch's mean loss items (train_epoch_items)
            row = {
                "epoch": int(trainer.current_epoch),
                "in_training": dict(pl_module.val_metrics),
                "losses": dict(pl_module.train_epoch_items),
                **scores,
            }
            rows.append(row)
            _print_epoch(recipe, row)

    with tempfile.TemporaryDirectory(prefix=f"lucid-trajectory-{recipe.name}-") as tmp:
        torch.set_num_threads(int(threads or recipe.threads))
        pl.seed_everything(recipe.seed, verbose=False)
        datamodule, module = recipe_modules(recipe, data_yaml, shared, model_options=model_options)
        trainer = pl.Trainer(
            max_epochs=recipe.epochs,
            accelerator="cpu",
            devices=1,
            precision="32-true",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            use_distributed_sampler=False,
            num_sanity_val_steps=0,
            default_root_dir=str(Path(tmp) / "run"),
            callbacks=[EpochStateCallback(), ScoreEachEpoch(), *callbacks],
        )
        trainer.fit(module, datamodule=datamodule)
    return rows


def check_rows(recipe: TrajectoryRecipe, trajectory: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """Failures (one line each) of our per-epoch ``rows`` against the reference under ``recipe.band``."""
    failures = []
    if len(rows) != recipe.epochs:
        failures.append(f"{recipe.name}: scored {len(rows)} epochs, expected {recipe.epochs}")
    last = recipe.epochs - 1
    band = recipe.band
    deviations: dict[str, list[float]] = {curve.label: [] for curve in recipe.curves}
    for row in rows:
        epoch = int(row["epoch"])
        record = trajectory["epochs"][epoch]
        bad = {k: v for k, v in row.get("losses", {}).items() if not math.isfinite(float(v))}
        if bad:
            failures.append(f"{recipe.name}: epoch {epoch} non-finite training loss {bad}")
        for curve in recipe.curves:
            ref = reference_value(record, curve.reference_key)
            ours = float(row[curve.label])
            need = []
            if epoch >= recipe.band.from_epoch:
                need.append((recipe.band.each, "each epoch"))
            if epoch == last:
                need.append((recipe.band.final, "final epoch"))
            for factor, what in need:
                if ours < factor * ref:
                    failures.append(
                        f"{recipe.name}: epoch {epoch} {curve.label} = {ours:.4f} < {factor} x reference {ref:.4f} "
                        f"({what} band; ratio {ours / ref if ref else float('inf'):.3f})"
                    )
            if epoch >= band.from_epoch:
                deviations[curve.label].append(abs(ours - ref))
                if band.abs_each is not None and abs(ours - ref) > band.abs_each:
                    failures.append(
                        f"{recipe.name}: epoch {epoch} {curve.label} = {ours:.4f}, reference {ref:.4f}: "
                        f"|difference| {abs(ours - ref):.4f} > {band.abs_each} (each epoch absolute band)"
                    )
    if band.abs_mean is not None:
        for label, values in deviations.items():
            mean = sum(values) / len(values) if values else 0.0
            if mean > band.abs_mean:
                failures.append(
                    f"{recipe.name}: {label} mean |difference| over epochs {band.from_epoch}..{last} = "
                    f"{mean:.4f} > {band.abs_mean} (mean absolute band)"
                )
    return failures


def format_table(
    recipe: TrajectoryRecipe, trajectory: dict[str, Any], rows: list[dict[str, Any]], who: str = "ours"
) -> str:
    """The per-epoch table: reference, ours (``who``: ``run`` for a scored run's checkpoints) and ratio per curve,
    then training's own validation figures."""
    header = ["epoch"]
    for curve in recipe.curves:
        header += [f"ref {curve.label}", f"{who} {curve.label}", "ratio"]
        header += ["ours-ref"] if recipe.band.abs_each is not None else []
    extra_keys = sorted({k for row in rows for k in row["in_training"] if k.endswith("mAP50-95")})
    header += [f"in-loop {k.removeprefix('metrics/')}" for k in extra_keys]
    lines = [" | ".join(header)]
    for row in rows:
        record = trajectory["epochs"][int(row["epoch"])]
        cells = [str(row["epoch"])]
        for curve in recipe.curves:
            ref = reference_value(record, curve.reference_key)
            ours = float(row[curve.label])
            cells += [f"{ref:.4f}", f"{ours:.4f}", f"{ours / ref:.3f}" if ref else "inf"]
            cells += [f"{ours - ref:+.4f}"] if recipe.band.abs_each is not None else []
        cells += [f"{float(row['in_training'].get(k, float('nan'))):.4f}" for k in extra_keys]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def mean_rows(recipe: TrajectoryRecipe, runs: dict[Any, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The seed-mean curve: per epoch, the mean over ``runs`` (seed or run label -> rows) of every curve, loss item and
    in-training figure. Every run must have scored the same epochs (a run that stopped early is an error)."""
    if not runs:
        raise ValueError("mean_rows: no runs")
    epochs = {seed: [int(row["epoch"]) for row in rows] for seed, rows in runs.items()}
    first = next(iter(epochs.values()))
    uneven = {seed: e for seed, e in epochs.items() if e != first}
    if uneven:
        raise ValueError(f"mean_rows: seeds scored different epochs: {epochs}")

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    rows = []
    for index, epoch in enumerate(first):
        group = [rows_[index] for rows_ in runs.values()]
        row: dict[str, Any] = {"epoch": epoch}
        for curve in recipe.curves:
            row[curve.label] = mean([float(r[curve.label]) for r in group])
        for part in ("in_training", "losses"):
            keys = set.intersection(*(set(r.get(part, {})) for r in group))
            row[part] = {k: mean([float(r[part][k]) for r in group]) for k in sorted(keys)}
        rows.append(row)
    return rows


def format_seed_summary(
    recipe: TrajectoryRecipe,
    trajectory: dict[str, Any],
    runs: dict[Any, list[dict[str, Any]]],
    kind: str = "seed",
) -> str:
    """One line per seed: its final-epoch ratio per curve, its lowest ratio from ``band.from_epoch`` on, and
    whether that seed alone is inside the band; then the same for the seed-mean curve."""
    header = [kind]
    for curve in recipe.curves:
        header += [f"final {curve.label}", "lowest (epoch)"]
    header += ["band"]
    lines = [" | ".join(header)]
    for seed, rows in [*runs.items(), ("mean", mean_rows(recipe, runs))]:
        cells = [str(seed)]
        for curve in recipe.curves:
            ratios = []
            for row in rows:
                ref = reference_value(trajectory["epochs"][int(row["epoch"])], curve.reference_key)
                ratios.append((float(row[curve.label]) / ref if ref else float("inf"), int(row["epoch"])))
            final = ratios[-1][0] if ratios else float("nan")
            checked = [r for r in ratios if r[1] >= recipe.band.from_epoch] or [(float("nan"), -1)]
            lowest = min(checked)
            cells += [f"{final:.3f}", f"{lowest[0]:.3f} ({lowest[1]})"]
        cells.append("FAIL" if check_rows(recipe, trajectory, rows) else "ok")
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def loss_options(items: list[str]) -> dict[str, Any]:
    """``DetectionLitModule`` arguments of ``--loss GAIN=VALUE`` items (a deliberately broken recipe); ``{}`` for
    none."""
    return {"loss": {k: float(v) for k, _, v in (item.partition("=") for item in items)}} if items else {}


def _model_options(args: argparse.Namespace) -> dict[str, Any]:
    """``DetectionLitModule`` arguments outside the recipe: step paths, and ``--loss`` gains (a broken recipe)."""
    options: dict[str, Any] = {} if args.channels_last is None else {"channels_last": args.channels_last}
    options.update({"compile": True} if args.compile else {})
    options.update(loss_options(args.loss))
    return options


def _quiet_training() -> None:
    """Lightning's notes that say nothing about a CPU trajectory run (this script's process only)."""
    warnings.filterwarnings("ignore", message=r".*overridden `transfer_batch_to_device`.*")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")


def self_check_main(gates: list[Gate], n_ours: int, shift: float = 0.0) -> int:
    """``--self-check``: :func:`reference_self_check` of every selected gate, and the chance that all of them pass
    when each is an independent draw; trains nothing, exit status 0 (2 when a gate has too few seeds)."""
    all_pass = 1.0
    for gate in gates:
        try:
            check = reference_self_check(gate, load_distribution(gate), n_ours, shift=shift)
        except TrajectorySkipped as exc:
            print(f"SKIP {gate.name}: {exc}")
            continue
        except ValueError as exc:
            print(f"trajectory: {exc}", file=sys.stderr)
            return 2
        print(format_self_check(check))
        all_pass *= 1.0 - check.rate
    lowered = f" lowered {shift:.0%}" if shift else ""
    print(f"every gate passes the reference{lowered} against itself in {all_pass:.1%} of independent draws")
    return 0


def gate_main(args: argparse.Namespace) -> int:
    """The distributional gate over the selected gates: per-curve tables, exit status 1 on any failure."""
    gates = select_gates(args.task or ["all"])
    seeds = list(dict.fromkeys(args.seed)) if args.seed else list(range(args.seeds))
    if not seeds:
        print("trajectory: --seeds must be at least 1", file=sys.stderr)
        return 2
    if args.self_check:
        return self_check_main(gates, len(seeds), args.shift)
    _quiet_training()
    import torch

    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    failures: list[str] = []
    measured: dict[str, Any] = {}
    for gate in gates:
        try:
            failures += run_gate(
                gate,
                seeds,
                threads=args.threads,
                runs_dir=args.runs_dir,
                model_options=_model_options(args),
                measured=measured,
            )
        except TrajectorySkipped as exc:
            print(f"SKIP {gate.name}: {exc}")
    for line in failures:
        print(f"trajectory: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(measured))
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", action="append", default=None, help="run only this recipe (repeatable)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: the recipe's)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the measured rows as one JSON line (per recipe; with several seeds, per seed)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        action="append",
        default=None,
        help="train with this seed instead of the recipe's (repeatable; with several, the exit status is the "
        "seed-mean curve's band check and a per-seed summary is printed)",
    )
    layout = parser.add_mutually_exclusive_group()
    layout.add_argument(
        "--channels-last",
        action="store_const",
        const=True,
        dest="channels_last",
        help="train with --model.channels_last true (the CPU default; this forces it under --compile too)",
    )
    layout.add_argument(
        "--contiguous",
        action="store_const",
        const=False,
        dest="channels_last",
        help="train with --model.channels_last false (the contiguous NCHW step, the CPU default before channels-last)",
    )
    parser.add_argument(
        "--compile", action="store_true", help="train with --model.compile (the opt-in compiled path)"
    )
    parser.add_argument(
        "--loss",
        action="append",
        default=None,
        metavar="GAIN=VALUE",
        help="train with this loss gain (lucid_train.recipe.LossConfig, e.g. box=3.75: a deliberately broken recipe "
        "the gate must fail); repeatable",
    )
    parser.add_argument(
        "--checkpoints",
        type=Path,
        action="append",
        default=None,
        metavar="DIR",
        help="score a finished run instead of training: DIR holds epoch<e>.pt (reference checkpoints, e.g. the "
        "reference's own run under another seed or on this machine) or epoch<e>.safetensors for every epoch; "
        "repeatable (several runs: per-run tables, a summary and the exit status of the run-mean curve); needs "
        "one --only recipe",
    )
    parser.add_argument(
        "--task",
        action="append",
        default=None,
        help="distributional gate (the default, all gates): ours over --seeds seeds against the reference's "
        "recorded seed distribution (tools/fidelity/); 'all', a task (detect, segment, obb, pose, classify) or a "
        "gate name; "
        "repeatable",
    )
    parser.add_argument(
        "--seeds", type=int, default=GATE_SEEDS, help=f"gate: our seeds 0..N-1 (default {GATE_SEEDS})"
    )
    parser.add_argument(
        "--self-check",
        action="store_true",
        help="gate: train nothing; apply the rule to the reference against itself (its seeds split into --seeds "
        "as ours and the rest) and print how often each gate fails",
    )
    parser.add_argument(
        "--shift",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="--self-check: lower the side in the role of ours by this fraction at every epoch (how often the gate "
        "catches a curve that much lower)",
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=None,
        help="gate: keep each seed's scored rows under DIR/<gate>/seed<s>.json and reuse them (same recipe only)",
    )
    args = parser.parse_args(argv)
    if args.shift and not args.self_check:
        parser.error(
            "--shift lowers the side in the role of ours in --self-check; it does not apply to training"
        )
    if args.self_check and (args.only or args.checkpoints):
        parser.error("--self-check judges the distributional gate (--task), not a recorded curve (--only)")
    if args.task is not None and (args.only or args.checkpoints):
        parser.error(
            "--task (the distributional gate) and --only/--checkpoints (a recorded curve) exclude each other"
        )
    if not args.only and not args.checkpoints:
        return gate_main(args)
    if args.checkpoints:
        training_flags = [
            flag
            for flag, given in (
                ("--seed", args.seed),
                ("--compile", args.compile),
                ("--channels-last/--contiguous", args.channels_last is not None),
                ("--loss", args.loss),
            )
            if given
        ]
        if training_flags:
            parser.error(
                f"--checkpoints scores finished runs; {', '.join(training_flags)} only applies to training"
            )
        if not args.only or len(set(args.only)) != 1:
            parser.error("--checkpoints needs exactly one --only recipe (the runs' recipe)")
        chosen = [r for r in RECIPES if r.name in args.only]
        try:  # every directory is complete before minutes go into scoring the first
            for directory in args.checkpoints:
                for recipe in chosen:
                    epoch_checkpoints(recipe, directory)
        except CheckpointsError as exc:
            print(f"trajectory: {exc}", file=sys.stderr)
            return 2
    model_options = _model_options(args)
    _quiet_training()
    import torch

    # the float rounding of a run is a function of the kernels PyTorch dispatches to (AVX2 vs AVX-512 x86 paths
    # give different curves; two AVX-512 machines gave identical ones): say which, next to the results
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    recipes = [r for r in RECIPES if not args.only or r.name in args.only]
    if not recipes:
        print(f"trajectory: no recipe selected (known: {[r.name for r in RECIPES]})", file=sys.stderr)
        return 1
    failures: list[str] = []
    measured: dict[str, Any] = {}
    for base in recipes:
        runs: dict[Any, list[dict[str, Any]]] = {}
        labels: list[Any]  # checkpoint directories or seeds
        if args.checkpoints:
            # a repeated directory is one run, not two
            labels = [str(d) for d in dict.fromkeys(args.checkpoints)]
            kind = "run"
        else:
            labels = list(dict.fromkeys(args.seed or [base.seed]))  # a repeated seed is one run, not two
            kind = "seed"
        try:
            trajectory = load_trajectory(base)
            for label in labels:
                recipe = base if args.checkpoints else replace(base, seed=label)
                start = time.perf_counter()
                if args.checkpoints:
                    try:
                        rows = score_checkpoints(recipe, Path(label), threads=args.threads)
                    except CheckpointsError as exc:
                        print(f"trajectory: {exc}", file=sys.stderr)
                        return 2
                else:
                    rows = train_and_score(recipe, threads=args.threads, model_options=model_options)
                runs[label] = rows
                problems = check_rows(recipe, trajectory, rows)
                print(format_table(recipe, trajectory, rows, who="run" if args.checkpoints else "ours"))
                status = "FAIL" if problems else "ok"
                print(
                    f"{status:<4} {recipe.name} {kind} {label}: {len(rows)} epochs in "
                    f"{time.perf_counter() - start:.0f} s"
                )
                if len(labels) == 1:
                    failures += problems
                else:
                    print("\n".join(f"  {kind} {label}: {line}" for line in problems))
        except TrajectorySkipped as exc:
            print(f"SKIP {base.name}: {exc}")
            continue
        measured[base.name] = runs if len(runs) > 1 else next(iter(runs.values()))
        if len(runs) > 1:
            print(
                f"{base.name}: {len(runs)} {kind}s, ratio {'run' if args.checkpoints else 'ours'} / reference"
            )
            print(format_seed_summary(base, trajectory, runs, kind))
            failures += [
                f"{kind} mean: {line}" for line in check_rows(base, trajectory, mean_rows(base, runs))
            ]
    for line in failures:
        print(f"trajectory: {line}", file=sys.stderr)
    if failures and not args.checkpoints and len(set(args.seed or [None])) == 1:
        print(
            "trajectory: one training seed is one draw (docs/TRAINING.md, 'Trajectory gate'); "
            "--seed A --seed B ... judges the seed-mean curve",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(measured))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
