"""Benchmark: images/s of the complete CPU training step vs forward-only of the same model, at 320 and 640.

The training step is the real one: ``lucid_train.module.DetectionLitModule.training_step`` driven by a Lightning
``Trainer`` over ``lucid_train.datamodule.DetectionDataModule`` on a synthetic shapes set (``lucid_data.synth``) -
data loading and augmentation (mosaic, random affine, HSV, flips; ``--workers`` 0 = in the training process, so
its cost is counted), forward, loss (``E2EDetectionLoss`` for yolo26), backward, gradient clipping, optimizer step
and the EMA update (``--optimizer`` SGD, MuSGD or AdamW with the recipe's parameter groups; accumulation 1 so every
batch takes an optimizer step and an EMA update). A callback timestamps the end of every batch; images/s is
``batch × (steps − warmup) / (t_end − t_warmup)``, so the data loading between batches is inside the measurement.

Forward-only is the same network (the module's ``model``, same weights) in eval mode under
``torch.inference_mode`` on a batch of the same size, median of ``--runs`` calls after one untimed call. The
printed ratio is forward-only images/s over training images/s (how many times a training image costs an
inference image).

Run by hand (not by tests): ``uv run --no-sync python tools/bench/train.py [--threads 2] [--sizes 320 640]
[--optimizer MuSGD|SGD|AdamW]`` (default MuSGD, what ``optimizer=auto`` picks for a full-length yolo26 run).

``--step`` (issue 18) times instead the bare CPU training step the reference's ``train_step`` workload times, on
the same inputs: per family (``--families``, default yolo26 yolo11; scale n, detect, 80 classes) a fixed random
batch of ``--batch`` images at ``--sizes``, 7 boxes per image (the workload's generator recipe), then forward,
our objective, backward and SGD nesterov (lr 0.01, momentum 0.937), the median of ``--steps`` steps excluding the
first. ``--profile`` splits the median into forward / loss / backward / optimizer and adds the EMA update the
real step also pays; the contiguous (NCHW) eager step (``--model.channels_last false``) is always timed beside the
channels-last one lucid-train runs on the CPU by default (``lucid_train.memory_format``), and ``--compile`` adds
that variant (contiguous, as ``--model.compile`` trains), each with the first step's loss relative to the contiguous
one. ``--vs-reference`` then runs
``../shared/refbench/run.sh train_step`` with the same family, batch, size, steps and ``--threads`` and prints
both figures and the ratio ours/reference of the step time (lower is better):
``uv run --no-sync python tools/bench/train.py --step --threads 2 --sizes 640 --vs-reference [--pairs 3]``
(``--pairs N``: ours and the reference N times in turn, then the median ratio and its range: single pairs on a
shared machine drift by tens of percent between the two halves). With ``--vs-reference``, the peak
RSS of this process (every variant) is printed beside the largest reference run's (measured from outside,
``_reference.run_measured``).

``--fit-rss`` runs a real ``lucid-train fit`` on ``../shared/data/coco8`` (1 epoch, ``--batch``, 2 workers) and
prints its peak RSS (the largest single process); the reference's fit is not a refbench workload.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import (
    SHARED_DIR,
    add_reference_flag,
    peak_rss_mib,
    print_pair,
    print_peak_rss,
    run_measured,
    run_reference,
)

REFERENCE_BOXES_PER_IMAGE = 7  # ../shared/refbench/README.md, train_step


class BatchClock(pl.Callback):
    """``time.perf_counter()`` at the end of every training batch."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, idx: int
    ) -> None:
        self.times.append(time.perf_counter())


def train_images_per_second(
    data_yaml: Path,
    imgsz: int,
    batch: int,
    steps: int,
    warmup: int,
    workers: int,
    optimizer: str,
    run_dir: Path,
) -> tuple[float, Any]:
    """Images/s of ``steps`` real training steps (the first ``warmup`` untimed); returns it and the module."""
    from lucid_train.callbacks import EpochStateCallback
    from lucid_train.datamodule import DetectionDataModule
    from lucid_train.module import DetectionLitModule
    from lucid_train.recipe import OptimizerConfig

    pl.seed_everything(0, verbose=False)
    data = DetectionDataModule(root=str(data_yaml), imgsz=imgsz, batch_size=batch, workers=workers)
    module = DetectionLitModule(
        family="yolo26",
        scale="n",
        num_classes=data.num_classes,
        names=data.names,
        imgsz=imgsz,
        optimizer=OptimizerConfig(name=optimizer, nominal_batch=batch),  # type: ignore[arg-type]
    )
    clock = BatchClock()
    trainer = pl.Trainer(
        max_epochs=1,
        limit_train_batches=steps,
        limit_val_batches=0,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        num_sanity_val_steps=0,
        default_root_dir=str(run_dir),
        callbacks=[EpochStateCallback(), clock],  # no run directory: nothing is written
    )
    trainer.fit(module, datamodule=data)
    if module.ema_updates != steps:
        raise RuntimeError(f"expected one optimizer step and EMA update per batch, got {module.ema_updates}")
    timed = clock.times[warmup - 1 :]
    return batch * (len(timed) - 1) / (timed[-1] - timed[0]), module


def forward_images_per_second(model: torch.nn.Module, imgsz: int, batch: int, runs: int) -> float:
    """Images/s of eval-mode forwards (median of ``runs`` after one untimed call) on a random batch."""
    x = torch.rand(batch, 3, imgsz, imgsz)
    model.eval()
    times = []
    with torch.inference_mode():
        model(x)
        for _ in range(runs):
            start = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - start)
    return batch / statistics.median(times)


def reference_batch(batch: int, imgsz: int, num_classes: int = 80) -> dict[str, torch.Tensor]:
    """The train_step workload's fixed batch recipe (README): uniform images, 7 boxes per image with centres in
    [0.2, 0.8] and sizes in [0.05, 0.35] (normalised), random classes; generator seed 0."""
    g = torch.Generator().manual_seed(0)
    n = batch * REFERENCE_BOXES_PER_IMAGE
    images = torch.rand(batch, 3, imgsz, imgsz, generator=g)
    return {
        "images": images,
        "batch_idx": torch.arange(batch).repeat_interleave(REFERENCE_BOXES_PER_IMAGE).float(),
        "cls": torch.randint(0, num_classes, (n, 1), generator=g).float(),
        "bboxes": torch.cat(
            [torch.rand(n, 2, generator=g) * 0.6 + 0.2, torch.rand(n, 2, generator=g) * 0.3 + 0.05], 1
        ),
    }


def core_step(
    family: str,
    batch: int,
    imgsz: int,
    steps: int,
    *,
    compile_network: bool = False,
    channels_last: bool = False,
    profile: bool = False,
) -> tuple[float, float, dict[str, float]]:
    """Median seconds of one training step (first excluded), the first step's loss, and per-stage medians."""
    from lucid_core.models import build_model
    from lucid_core.optim import ModelEMA
    from lucid_core.tasks import build_objective

    torch.manual_seed(0)
    model = build_model(family, "detect", "n", num_classes=80).train()
    objective = build_objective(model)
    data = reference_batch(batch, imgsz)
    images = data["images"]
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    network: Any = torch.compile(model) if compile_network else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    ema = ModelEMA(model) if profile else None
    times: list[float] = []
    stages: dict[str, list[float]] = {k: [] for k in ("forward", "loss", "backward", "optimizer", "ema")}
    first_loss = float("nan")
    for step in range(steps):
        t0 = time.perf_counter()
        output = network(images)
        t1 = time.perf_counter()
        total, _ = objective(output, data)
        t2 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        t3 = time.perf_counter()
        optimizer.step()
        t4 = time.perf_counter()
        if ema is not None:
            ema.update(model)
        t5 = time.perf_counter()
        if step == 0:
            first_loss = float(total.detach())
        else:
            times.append(t4 - t0)
            for key, dt in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                stages[key].append(dt)
    medians = {k: statistics.median(v) for k, v in stages.items() if v and (k != "ema" or profile)}
    return statistics.median(times), first_loss, medians


def _time_variants(
    args: argparse.Namespace, family: str, imgsz: int, variants: list[tuple[str, bool, bool]]
) -> dict[str, float]:
    """Seconds per step of each variant (printed with its first loss relative to the first variant's, the
    contiguous eager step, and its stages)."""
    eager_loss = None
    ours = {}
    for name, compiled, channels_last in variants:
        seconds, loss, stages = core_step(
            family,
            args.batch,
            imgsz,
            args.steps,
            compile_network=compiled,
            channels_last=channels_last,
            profile=args.profile,
        )
        eager_loss = loss if eager_loss is None else eager_loss
        ours[name] = seconds
        split = "  ".join(f"{k} {1e3 * v:.0f} ms" for k, v in stages.items()) if args.profile else ""
        print(
            f"{family}n bs{args.batch}@{imgsz} {name:13s} {seconds:.3f} s/step  first loss {loss:.6f} "
            f"(rel. to contiguous {abs(loss - eager_loss) / max(abs(eager_loss), 1e-12):.1e})  {split}"
        )
    return ours


def step_main(args: argparse.Namespace) -> None:
    from lucid_core.allocator import tune_glibc_malloc

    # the malloc policy lucid-train's modules set for the training process (the reference keeps glibc's defaults)
    tuned = tune_glibc_malloc()
    # the contiguous eager step (--model.channels_last false) and the channels-last one (lucid-train's CPU
    # default since issue 18), always both
    variants = [("contiguous", False, False), ("channels_last", False, True)]
    if args.compile:
        variants.append(("compile", True, False))
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), detect 80 classes, batch {args.batch}, "
        f"{REFERENCE_BOXES_PER_IMAGE} boxes/image, SGD nesterov, median of {args.steps - 1} steps (first excluded), "
        f"glibc malloc {'tuned as lucid-train does' if tuned else 'untuned (not glibc, or MALLOC_* set)'}"
    )
    references = []
    rounds = max(args.pairs, 1) if args.vs_reference else 1
    for family in args.families:
        for imgsz in args.sizes:
            ratios: dict[str, list[float]] = {}
            for _ in range(rounds):  # ours, then the reference, again: a drifting machine shows in the spread
                ours = _time_variants(args, family, imgsz, variants)
                if not args.vs_reference:
                    continue
                ref = run_reference(
                    "train_step",
                    "--family",
                    f"{family}n",
                    "--batch",
                    args.batch,
                    "--imgsz",
                    imgsz,
                    "--steps",
                    args.steps,
                    threads=torch.get_num_threads(),
                )
                references.append(ref)
                for name, seconds in ours.items():
                    flag = {
                        "channels_last": "the CPU default",
                        "contiguous": "--model.channels_last false",
                        "compile": "--model.compile",
                    }
                    label = f"{name} ({flag[name]})"
                    ratio = print_pair(
                        f"train_step {family}n bs{args.batch}@{imgsz} {label}", seconds, ref, "s/step"
                    )
                    if ratio is not None:
                        ratios.setdefault(name, []).append(ratio)
            if rounds > 1 and ratios:
                summary = ", ".join(
                    f"{name} {statistics.median(r):.2f}x (range {min(r):.2f}-{max(r):.2f})"
                    for name, r in ratios.items()
                )
                print(
                    f"train_step {family}n bs{args.batch}@{imgsz}: median ours/reference of {rounds} pairs: {summary}"
                )
    # the workloads print no memory figure (../shared/refbench/README.md): the reference's is its run's peak (run_measured)
    label = "peak RSS, train_step (ours: this process, every variant; reference: its largest run)"
    if args.vs_reference:
        print_peak_rss(label, peak_rss_mib(), references)
    else:
        print(f"peak RSS of this benchmark process (ours only): {peak_rss_mib():.0f} MiB")


def fit_rss_main(args: argparse.Namespace) -> None:
    """``--fit-rss``: peak RSS of a real ``lucid-train fit`` on coco8 (1 epoch, ``--workers`` workers), from
    outside (`run_measured`: the largest single process, the trainer or a worker). The reference's fit is not a refbench
    workload, so only its train_step and data peaks can stand beside ours (their benchmarks print them)."""
    import os
    import sys

    data = SHARED_DIR / "data" / "coco8" / "coco8.yaml"
    if not data.is_file():
        print(f"fit RSS: skipped ({data} not found)")
        return
    with tempfile.TemporaryDirectory(prefix="lucid-bench-fit-") as tmp:
        command = [
            sys.executable,
            "-m",
            "lucid_train.cli",
            "fit",
            f"--data.root={data}",
            "--data.imgsz=640",
            f"--data.batch_size={args.batch}",
            f"--data.workers={max(args.workers, 2)}",
            "--trainer.max_epochs=1",
            f"--trainer.default_root_dir={tmp}",
        ]
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads or 2)}
        done = run_measured(command, env=env, timeout=1800)
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-3:]
            raise SystemExit(f"fit RSS: lucid-train fit failed ({done.returncode}): {' | '.join(tail)}")
        print(
            f"peak RSS, lucid-train fit coco8 1 epoch bs{args.batch}@640, {max(args.workers, 2)} workers "
            f"(largest process): {done.peak_rss_mib:.0f} MiB"
        )


def main() -> None:
    import logging
    import warnings

    from lucid_data.synth import synthesize

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[320, 640])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8, help="training steps per size (incl. warm-up)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps")
    parser.add_argument("--runs", type=int, default=5, help="timed forward-only calls")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--optimizer", choices=("SGD", "MuSGD", "AdamW"), default="MuSGD")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument(
        "--step", action="store_true", help="the bare step of the reference's train_step workload"
    )
    parser.add_argument(
        "--families", nargs="+", default=["yolo26", "yolo11"], help="--step: families (scale n)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="--step: forward/loss/backward/optimizer/EMA split"
    )
    parser.add_argument(
        "--compile", action="store_true", help="--step: also time torch.compile of the network"
    )
    parser.add_argument(
        "--channels-last",
        action="store_true",
        help="--step: accepted for old command lines (always timed now)",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=1,
        help="--step --vs-reference: time ours and the reference this many times in turn; print the median ratio",
    )
    parser.add_argument(
        "--fit-rss", action="store_true", help="peak RSS of a 1-epoch lucid-train fit on ../shared coco8"
    )
    add_reference_flag(parser)
    args = parser.parse_args()
    if args.fit_rss:
        fit_rss_main(args)
        return
    if args.step:
        if args.threads:
            torch.set_num_threads(args.threads)
        step_main(args)
        return
    if args.steps < args.warmup + 2:
        parser.error("--steps must exceed --warmup by at least 2")
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode.*")
    warnings.filterwarnings("ignore", message=r".*overridden `transfer_batch_to_device`.*")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), yolo26n detect 3 classes, batch "
        f"{args.batch}, {args.optimizer}, workers {args.workers}, {args.steps - args.warmup} timed steps"
    )
    with tempfile.TemporaryDirectory(prefix="lucid-bench-train-") as tmp:
        for imgsz in args.sizes:
            yaml_path = synthesize(
                "detect", Path(tmp) / f"shapes{imgsz}", n_train=args.batch * args.steps, n_val=1, imgsz=imgsz
            )
            train_ips, module = train_images_per_second(
                Path(yaml_path),
                imgsz,
                args.batch,
                args.steps,
                args.warmup,
                args.workers,
                args.optimizer,
                Path(tmp) / f"run{imgsz}",
            )
            forward_ips = forward_images_per_second(module.model, imgsz, args.batch, args.runs)
            print(
                f"imgsz {imgsz}: train step {train_ips:7.2f} img/s, forward-only {forward_ips:7.2f} img/s, "
                f"ratio {forward_ips / train_ips:5.2f}x"
            )


if __name__ == "__main__":
    main()
