"""GPU acceptance check of lucid-accel (issue 19): native vs accelerated 20-step yolo26 n fits, byte for byte.

For every flag alone and all flags together, a 20-step fit (batch 16, 640 px, bf16-mixed, MuSGD, the default
recipe) on synthetic batches is run natively and then accelerated, each in a fresh process. Compared: the loss
bytes of every step, sha256 of the model / optimizer-state / EMA state at the end; printed: the per-step time
(median of CUDA-event step times) and the whole-fit wall time of both, and their ratio. The default recipe's
momentum warm-up changes μ on every optimizer step of a 20-step fit, so ``capture_updates`` is also run with the
warm-up off (a native/accelerated pair of its own). A second native run shows the native path is deterministic.

Usage (``tools/gpu/check.sh`` runs ``all``)::

    python tools/gpu/accel_check.py all --out DIR            # every run in a fresh process, then the report
    python tools/gpu/accel_check.py run --name N --out DIR [--flag F ...] [--no-warmup]
    python tools/gpu/accel_check.py report --out DIR

``report`` exits 1 when any accelerated run differs from its native run or the combined flags are < 1.3× faster
per step (issue 19 acceptance).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FLAGS = ("capture_network", "capture_orthogonalization", "capture_updates", "fused_assignment")
#: ACCEL_CHECK_SMOKE=1: the same plumbing on the CPU at toy sizes (every flag falls back), to test this script
SMOKE = os.environ.get("ACCEL_CHECK_SMOKE") == "1"
STEPS = 3 if SMOKE else 20
BATCH = 2 if SMOKE else 16
IMGSZ = 64 if SMOKE else 640
NUM_CLASSES = 3
REQUIRED_COMBINED_SPEEDUP = 1.3
#: (run name, flags, warm-up off, native run it is compared with)
PLAN: list[tuple[str, tuple[str, ...], bool, str | None]] = [
    ("native", (), False, None),
    ("native_repeat", (), False, "native"),
    *[(flag, (flag,), False, "native") for flag in FLAGS],
    ("all", FLAGS, False, "native"),
    ("native_no_warmup", (), True, None),
    ("capture_updates_no_warmup", ("capture_updates",), True, "native_no_warmup"),
]


def synthetic_batches(seed: int = 0) -> list[dict[str, Any]]:
    """``STEPS`` fixed batches: uint8 images and 3–8 random boxes per image (normalised cxcywh), seeded."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(STEPS):
        counts = torch.randint(3, 9, (BATCH,), generator=gen)
        n = int(counts.sum())
        xy = torch.rand(n, 2, generator=gen) * 0.7 + 0.15
        wh = torch.rand(n, 2, generator=gen) * 0.25 + 0.02
        batches.append(
            {
                "images": torch.randint(0, 256, (BATCH, 3, IMGSZ, IMGSZ), dtype=torch.uint8, generator=gen),
                "batch_idx": torch.repeat_interleave(torch.arange(BATCH), counts).float(),
                "cls": torch.randint(0, NUM_CLASSES, (n, 1), generator=gen).float(),
                "bboxes": torch.cat((xy, wh), -1),
            }
        )
    return batches


def _digest(tensors: list[Any]) -> str:
    import torch

    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def run_one(name: str, flags: tuple[str, ...], no_warmup: bool, out: Path) -> dict[str, Any]:
    """One fit in this process; writes and returns ``out/<name>.json``."""
    import lightning.pytorch as pl
    import torch

    from lucid_train import module as module_mod

    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    lit_class = getattr(module_mod, "YOLOLitModule", None) or module_mod.DetectionLitModule
    optimizer: dict[str, Any] = {"name": "MuSGD"}
    if no_warmup:
        optimizer.update(warmup_epochs=0.0, warmup_min_iters=0)
    pl.seed_everything(0, workers=True, verbose=False)
    module = lit_class(
        family="yolo26",
        scale="n",
        num_classes=NUM_CLASSES,
        names={i: f"shape{i}" for i in range(NUM_CLASSES)},
        imgsz=IMGSZ,
        optimizer=optimizer,
        accel={flag: flag in flags for flag in FLAGS},
    )
    batches = synthetic_batches()

    class HostEvent:  # ACCEL_CHECK_SMOKE on the CPU: wall-clock stand-in for a CUDA event
        def __init__(self) -> None:
            self.t = time.perf_counter()

        def elapsed_time(self, end: HostEvent) -> float:
            return (end.t - self.t) * 1000.0

    def event() -> Any:
        if SMOKE:
            return HostEvent()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    class StepRecorder(pl.Callback):
        def __init__(self) -> None:
            self.events: list[tuple[Any, Any]] = []
            self.losses: list[str] = []

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            self.events.append((event(), None))

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            self.events[-1] = (self.events[-1][0], event())
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            self.losses.append(loss.detach().float().cpu().numpy().tobytes().hex())

    recorder = StepRecorder()
    trainer = pl.Trainer(
        accelerator="cpu" if SMOKE else "gpu",
        devices=1,
        precision="32-true" if SMOKE else "bf16-mixed",
        max_epochs=1,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic="warn",
        callbacks=[recorder],
        default_root_dir=str(out / f"{name}_run"),
    )
    loader = torch.utils.data.DataLoader(batches, batch_size=None, shuffle=False, num_workers=0)
    sync = (lambda: None) if SMOKE else torch.cuda.synchronize
    sync()
    wall = time.perf_counter()
    trainer.fit(module, train_dataloaders=loader)
    sync()
    wall = time.perf_counter() - wall
    step_ms = [start.elapsed_time(end) for start, end in recorder.events]
    optimizer_obj = trainer.optimizers[0]
    state = [
        v
        for p in module.model.parameters()
        for _, v in sorted(optimizer_obj.state[p].items())
        if torch.is_tensor(v)
    ]
    session = module._accel
    result: dict[str, Any] = {
        "name": name,
        "flags": list(flags),
        "no_warmup": no_warmup,
        "device": "cpu (smoke)" if SMOKE else torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "losses": recorder.losses,
        "hashes": {
            "model": _digest(list(module.model.state_dict().values())),
            "optimizer": _digest(state),
            "ema": _digest(list(module.ema_model.state_dict().values())),
        },
        "step_ms": step_ms,
        "median_step_ms": statistics.median(step_ms),
        "steady_median_step_ms": statistics.median(step_ms[3:] or step_ms),
        "fit_wall_s": wall,
        "fallbacks": dict(session.notices.reasons) if session is not None else {},
        "network_recordings": getattr(getattr(session, "network", None), "recorded", 0),
        "optimizer_replays": dict(getattr(getattr(session, "optimizer_replay", None), "replays", {}) or {}),
        "fused_assigners": getattr(session, "fused_assigners", 0),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1))
    return result


def report(out: Path) -> int:
    """Print the comparison table; 0 when every acceptance line holds."""
    names = {name for name, *_ in PLAN}
    runs = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json")) if p.stem in names}
    (out / "results.json").write_text(json.dumps(runs, indent=1))
    failures: list[str] = []
    print(
        f"device: {next(iter(runs.values()))['device'] if runs else '?'}; {STEPS} steps, batch {BATCH}, {IMGSZ} px"
    )
    header = f"{'run':28} {'vs':18} {'losses':>9} {'model':>6} {'optim':>6} {'ema':>6} "
    header += f"{'step ms':>9} {'ratio':>6} {'steady':>7} {'wall s':>7} {'ratio':>6}  notes"
    print(header)
    for name, _flags, _no_warmup, baseline in PLAN:
        run = runs.get(name)
        if run is None:
            print(f"{name:28} MISSING")
            failures.append(f"{name}: no result")
            continue
        notes = []
        if run["fallbacks"]:
            notes.append("fallbacks=" + json.dumps(run["fallbacks"]))
        if run["network_recordings"]:
            notes.append(f"graphs recorded={run['network_recordings']}")
        if any(run["optimizer_replays"].values()):
            notes.append(f"optimizer replays={run['optimizer_replays']}")
        if run["fused_assigners"]:
            notes.append(f"fused assigners={run['fused_assigners']}")
        if baseline is None:
            print(
                f"{name:28} {'-':18} {len(run['losses']):>9} {'':>6} {'':>6} {'':>6} "
                f"{run['median_step_ms']:>9.2f} {'':>6} {run['steady_median_step_ms']:>7.2f} "
                f"{run['fit_wall_s']:>7.2f} {'':>6}  {'; '.join(notes)}"
            )
            continue
        base = runs.get(baseline)
        if base is None:
            failures.append(f"{name}: baseline {baseline} missing")
            continue
        same_losses = run["losses"] == base["losses"]
        first_diff = next((i for i, (a, b) in enumerate(zip(run["losses"], base["losses"])) if a != b), None)
        same = {k: run["hashes"][k] == base["hashes"][k] for k in ("model", "optimizer", "ema")}
        ratio = base["median_step_ms"] / run["median_step_ms"]
        steady = base["steady_median_step_ms"] / run["steady_median_step_ms"]
        wall_ratio = base["fit_wall_s"] / run["fit_wall_s"]
        losses = "same" if same_losses else f"diff@{first_diff}"
        print(
            f"{name:28} {baseline:18} {losses:>9} {'same' if same['model'] else 'DIFF':>6} "
            f"{'same' if same['optimizer'] else 'DIFF':>6} {'same' if same['ema'] else 'DIFF':>6} "
            f"{run['median_step_ms']:>9.2f} {ratio:>5.2f}x {steady:>6.2f}x {run['fit_wall_s']:>7.2f} "
            f"{wall_ratio:>5.2f}x  {'; '.join(notes)}"
        )
        if not same_losses or not all(same.values()):
            failures.append(f"{name}: differs from {baseline} (losses {losses}, hashes {same})")
        if name == "all" and ratio < REQUIRED_COMBINED_SPEEDUP:
            failures.append(f"all: {ratio:.2f}x per step < {REQUIRED_COMBINED_SPEEDUP}x")
    for line in failures:
        print(f"FAIL {line}")
    print("PASS" if not failures else f"{len(failures)} acceptance line(s) failed")
    return 0 if not failures else 1


def run_all(out: Path, timeout_s: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for name, flags, no_warmup, _ in PLAN:
        cmd = [sys.executable, __file__, "run", "--name", name, "--out", str(out)]
        for flag in flags:
            cmd += ["--flag", flag]
        if no_warmup:
            cmd.append("--no-warmup")
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=os.environ.copy())
        print(f"[{name}] exit {proc.returncode} in {time.perf_counter() - started:.1f} s", flush=True)
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-6000:], sep="\n", flush=True)
    return report(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("--name", required=True)
    one.add_argument("--flag", action="append", default=[], choices=FLAGS)
    one.add_argument("--no-warmup", action="store_true")
    one.add_argument("--out", type=Path, required=True)
    for name in ("all", "report"):
        p = sub.add_parser(name)
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--timeout", type=int, default=120, help="seconds per run (all)")
    args = parser.parse_args(argv)
    if args.command == "run":
        run_one(args.name, tuple(args.flag), args.no_warmup, args.out)
        return 0
    if args.command == "report":
        return report(args.out)
    return run_all(args.out, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
