"""Training through ``YOLOLitModule`` changes no process-wide state (malloc policy, warning filters, torch threads):
only ``lucid-train``'s ``main()`` sets the command's process settings."""

from __future__ import annotations

from pathlib import Path

from process_state_testing import run_child

_FIT = """
import sys
from pathlib import Path
import lightning.pytorch as pl
from process_state_testing import record_mallopt, report, snapshot
from lucid_data.synth import synthesize
from lucid_train.callbacks import default_callbacks
from lucid_train.datamodule import YOLODataModule
from lucid_train.module import YOLOLitModule
record_mallopt()
root = Path(sys.argv[1])
data = YOLODataModule(root=str(synthesize("detect", root / "data", n_train=4, n_val=2, imgsz=64, seed=0)),
                      imgsz=64, batch_size=2, workers=0)
before = snapshot()
module = YOLOLitModule(num_classes=data.num_classes, names=data.names, imgsz=data.imgsz)
trainer = pl.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1, accelerator="cpu", logger=False,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     use_distributed_sampler=False, num_sanity_val_steps=0, default_root_dir=str(root / "run"),
                     callbacks=default_callbacks())
trainer.fit(module, datamodule=data)
report(before=before, after=snapshot(), metrics=sorted(module.val_metrics))
"""


def test_a_fit_through_the_module_changes_no_process_state(tmp_path: Path) -> None:
    result = run_child(_FIT, str(tmp_path), env={"LUCID_CACHE_DIR": str(tmp_path / "cache")})
    before, after = result["before"], result["after"]
    assert {key: (before[key], after[key]) for key in before if before[key] != after[key]} == {}
    assert after["mallopt calls"] == [] and after["malloc tuning decided"] is None
    assert "metrics/mAP50-95" in result["metrics"]
