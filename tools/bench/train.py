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
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch


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
    args = parser.parse_args()
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
