"""Issue 7 acceptance: a trained shapes checkpoint scored by ``lucid-eval`` reproduces the mAP training logged.

A tiny shapes run (yolo26 n, 64 px, a few epochs) writes ``best.safetensors`` (the EMA model of the best epoch by
mAP50-95) and ``metrics.csv``; ``lucid-eval`` (in-process ``main([...])``) scores that checkpoint on the same val
split with the same batch size, and its mAP50-95 / mAP50 must equal the values in the metrics row of that epoch.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from lucid_train_testing import TINY_IMGSZ, tiny_data, tiny_module, tiny_trainer

from lucid_train.recipe import OptimizerConfig


@pytest.mark.slow
@pytest.mark.parametrize("task", ["detect", "segment"])
def test_lucid_eval_reproduces_the_validation_map_logged_by_training(task: str, tmp_path: Path) -> None:
    from lucid_core.tasks import TASKS, metric_key
    from lucid_data.synth import synthesize

    yaml_path = Path(synthesize(task, tmp_path / "shapes", n_train=16, n_val=8, imgsz=TINY_IMGSZ, seed=0))
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    batch_size = 8
    data = tiny_data(yaml_path, batch_size=batch_size, task=task)
    # a short run that already detects something: AdamW at a high rate, nominal batch = batch (a step per batch)
    optimizer = OptimizerConfig(
        name="AdamW", lr0=0.005, nominal_batch=batch_size, warmup_epochs=0.0, warmup_min_iters=4
    )
    module = tiny_module(data, optimizer=optimizer, task=task, task_options=data.task_options)
    run_dir = tmp_path / "run"
    trainer = tiny_trainer(run_dir, max_epochs=4)
    trainer.fit(module, datamodule=data)

    with (run_dir / "metrics.csv").open() as handle:
        rows = {int(r["epoch"]): r for r in csv.DictReader(handle)}
    best_epoch = json.loads((run_dir / "best.json").read_text())["extra"]["epoch"]
    logged = rows[int(best_epoch)]
    assert float(logged["metrics/mAP50-95"]) > 0  # a meaningful comparison, not 0 == 0

    from lucid_train.eval.cli import main

    report_path = tmp_path / "report.json"
    status = main(
        [
            "--weights",
            str(run_dir / "best.safetensors"),
            "--data",
            str(yaml_path),
            "--split",
            "val",
            "--imgsz",
            str(TINY_IMGSZ),
            "--batch",
            str(2 * batch_size),  # in-training validation: rect batches of twice the training batch
            "--output",
            str(report_path),
        ]
    )
    assert status == 0
    report = json.loads(report_path.read_text())
    assert report["num_images"] == 8
    for iou_type in TASKS[task].iou_types:  # box, and mask for segment
        scored = report["iou_types"][iou_type]
        for name in ("mAP50-95", "mAP50"):
            logged_value = float(logged[metric_key(iou_type, name)])
            assert scored[name] == pytest.approx(logged_value, rel=0, abs=1e-12), (iou_type, name)
