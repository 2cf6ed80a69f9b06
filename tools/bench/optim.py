"""Benchmark: seconds per optimizer step of SGD vs MuSGD on the parameters of yolo26 n (detect, 80 classes).

Both optimizers get the recipe's parameter groups (``lucid_core.optim.build_param_groups``: three groups for SGD,
the eight-group MuSGD layout with the head's classification convs boosted) and the same fixed random gradients
(no forward/backward: only ``optimizer.step()`` is timed). Each optimizer takes ``--warmup`` untimed steps (the
first step also allocates the momentum buffers), then the median of ``--steps`` timed steps is printed, with the
MuSGD / SGD ratio. ``--ns-dtype`` chooses MuSGD's Newton–Schulz compute dtype (see ``lucid_core.optim.MuSGD``).
``--profile`` prints the top operators of one more MuSGD step (``torch.profiler``).

Run by hand (not by tests): ``OMP_NUM_THREADS=1 uv run --no-sync python tools/bench/optim.py [--threads 1]
[--ns-dtype auto|bfloat16|float32] [--profile]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def recipe_groups(model: nn.Module, optimizer: str) -> list[dict[str, Any]]:
    """The recipe's parameter groups (lr 0.01, momentum 0.9, weight decay 5e-4 at batch 16)."""
    from lucid_core.optim import build_param_groups

    boost: Callable[[str], bool] | None = None
    cls_branch_names = getattr(model, "cls_branch_parameter_names", None)
    if callable(cls_branch_names):
        boost = set(cls_branch_names()).__contains__
    return build_param_groups(
        model,
        optimizer=optimizer,  # type: ignore[arg-type]
        lr=0.01,
        momentum=0.9,
        weight_decay=5e-4,
        batch_size=16,
        boost=boost,
    )


def step_seconds(optimizer: torch.optim.Optimizer, warmup: int, steps: int) -> list[float]:
    """Wall time of ``steps`` calls of ``optimizer.step()`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        optimizer.step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    from lucid_core.models import build_model
    from lucid_core.optim import MuSGD

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per optimizer")
    parser.add_argument("--warmup", type=int, default=1, help="untimed first steps")
    parser.add_argument("--ns-dtype", default=None, help="MuSGD ns_dtype (default: MuSGD's own default)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--profile", action="store_true", help="profile one more MuSGD step")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build_model("yolo26", "detect", "n", num_classes=80)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    n_params = sum(p.numel() for p in params)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), yolo26n detect 80 classes, ")
    print(f"{len(params)} tensors / {n_params / 1e6:.2f} M parameters, {args.steps} timed steps")

    sgd = torch.optim.SGD(recipe_groups(model, "SGD"), lr=0.01, momentum=0.9, nesterov=True)
    sgd_median = statistics.median(step_seconds(sgd, args.warmup, args.steps))
    extra = {} if args.ns_dtype is None else {"ns_dtype": args.ns_dtype}
    musgd = MuSGD(recipe_groups(model, "MuSGD"), lr=0.01, momentum=0.9, nesterov=True, **extra)
    musgd_median = statistics.median(step_seconds(musgd, args.warmup, args.steps))
    label = f"MuSGD(ns_dtype={args.ns_dtype or 'default'})"
    print(f"SGD   step {sgd_median * 1e3:9.1f} ms (median)")
    print(f"{label} step {musgd_median * 1e3:9.1f} ms (median), ratio {musgd_median / sgd_median:7.1f}x SGD")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            musgd.step()
        print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
