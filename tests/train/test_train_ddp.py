"""Lightning DDP on 2 CPU processes (gloo): one shuffle on every rank, disjoint shards, per-rank augmentation.

The augmentation check looks at the SAME sample index on both ranks (not just at each rank's own first batch, which
differs anyway because the shards differ): inside each rank process the training dataset renders index 0 for
rank 0 and for rank 1 (restoring its own rank after). The two ranks' own renderings must differ, and each process's
rendering for the other rank must equal what the other process rendered - so the difference comes from the rank
key of the augmentation stream, not from process-level nondeterminism.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lucid_train_testing import make_shapes

SCRIPT = textwrap.dedent(
    """
    import hashlib, json, sys
    from pathlib import Path
    import lightning.pytorch as pl
    import torch
    sys.path.insert(0, {tests_dir!r})
    from lucid_train_testing import tiny_data, tiny_module, tiny_trainer

    out = Path({out!r})

    def sample_digest(dataset, index, rank):
        from lucid_data.collate import collate
        own = dataset.rank
        dataset.rank = rank
        try:
            batch = collate([dataset[index]])
        finally:
            dataset.rank = own
        digest = hashlib.sha256(batch["images"].numpy().tobytes())
        digest.update(batch["bboxes"].numpy().tobytes())
        return digest.hexdigest()

    class Record(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if batch_idx:
                return
            loader = trainer.train_dataloader
            sampler = loader.sampler
            digest = hashlib.sha256(batch["images"].cpu().numpy().tobytes()).hexdigest()
            dataset = loader.dataset
            record = {{
                "index0_by_rank": [sample_digest(dataset, 0, r) for r in range(trainer.world_size)],
                "index0_again": sample_digest(dataset, 0, dataset.rank),
                "rank": trainer.global_rank, "world": trainer.world_size,
                "permutation": sampler.permutation(), "shard": list(sampler),
                "dataset_rank": loader.dataset.rank, "images": digest,
                "ids": [m["image_id"] for m in batch["meta"]],
            }}
            (out / f"rank{{trainer.global_rank}}.json").write_text(json.dumps(record, default=str))

    if __name__ == "__main__":
        torch.set_num_threads(1)
        pl.seed_everything(0, verbose=False)
        data = tiny_data(Path({yaml!r}), batch_size=4, task={task!r})
        module = tiny_module(data, task={task!r}, task_options=data.task_options)
        trainer = tiny_trainer(out, max_epochs=1, callbacks=[Record()], strategy="ddp_spawn", devices=2,
                               limit_train_batches=1, limit_val_batches=0)
        if {task!r} == "segment":  # the segment objective ran on both ranks: its loss names were logged
            assert module.loss_names == ["box_loss", "seg_loss", "cls_loss", "l1_loss", "sem_loss"]
        trainer.fit(module, datamodule=data)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["detect", "segment"])
def test_ddp_two_gloo_processes_share_the_shuffle_and_differ_in_augmentation(
    task: str, tmp_path: Path
) -> None:
    from lucid_data.synth import synthesize

    yaml_path = synthesize(task, tmp_path / "shapes", n_train=16, n_val=2, imgsz=64, seed=0)
    script = tmp_path / "ddp_run.py"
    script.write_text(
        SCRIPT.format(tests_dir=str(Path(__file__).parent), out=str(tmp_path), yaml=str(yaml_path), task=task)
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["world"] == 2 for r in ranks)
    assert ranks[0]["permutation"] == ranks[1]["permutation"]  # identical shuffle on every rank
    assert set(ranks[0]["shard"]).isdisjoint(ranks[1]["shard"])  # each rank its own slice
    assert sorted(ranks[0]["shard"] + ranks[1]["shard"]) == list(range(16))
    assert [r["dataset_rank"] for r in ranks] == [0, 1]  # augmentation keyed by rank
    assert ranks[0]["images"] != ranks[1]["images"]
    # the same sample index is augmented differently on the two ranks ...
    own = [r["index0_by_rank"][r["rank"]] for r in ranks]
    assert own[0] != own[1]
    # ... deterministically per rank (again in the same process, and recomputed by the other process)
    assert all(r["index0_again"] == r["index0_by_rank"][r["rank"]] for r in ranks)
    assert ranks[0]["index0_by_rank"] == ranks[1]["index0_by_rank"]


SHARDED_VALIDATION_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import lightning.pytorch as pl
    import torch
    sys.path.insert(0, {tests_dir!r})
    from lucid_train_testing import tiny_data, tiny_trainer
    from lucid_train.module import DetectionLitModule

    out = Path({out!r})

    class Spy(DetectionLitModule):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.backward_values, self.returned = [], []

        def manual_backward(self, loss, *args, **kwargs):
            self.backward_values.append(float(loss.detach()))
            return super().manual_backward(loss, *args, **kwargs)

        def training_step(self, batch, batch_idx):
            total = super().training_step(batch, batch_idx)
            self.returned.append(float(total))
            return total

    class Record(pl.Callback):
        images = 0

        def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            self.images += len(batch["meta"])

        def on_fit_end(self, trainer, pl_module):  # runs in every spawned rank
            rank = trainer.global_rank
            record = {{"rank": rank, "world": trainer.world_size, "val_images": self.images,
                      "val_metrics": pl_module.val_metrics, "backward": pl_module.backward_values,
                      "returned": pl_module.returned}}
            (out / f"rank{{rank}}.json").write_text(json.dumps(record))
            if rank == 0:
                torch.save(pl_module.ema_model.state_dict(), out / "ema.pt")

    if __name__ == "__main__":
        torch.set_num_threads(1)
        pl.seed_everything(0, verbose=False)
        data = tiny_data(Path({yaml!r}), batch_size=2)
        module = Spy(family="yolo26", num_classes=data.num_classes, names=data.names, imgsz=data.imgsz)
        trainer = tiny_trainer(out, max_epochs=1, callbacks=[Record()], strategy="ddp_spawn", devices=2,
                               limit_train_batches=2)
        trainer.fit(module, datamodule=data)
    """
)


@pytest.mark.slow
def test_ddp_scales_the_loss_by_world_size_and_shards_validation_exactly(tmp_path: Path) -> None:
    """2 gloo processes: the back-propagated loss is world x the summed loss; each rank validates half the split;
    the gathered metric equals a 1-process validation of the same EMA weights exactly."""
    import lightning.pytorch as pl
    import torch
    from lucid_train_testing import tiny_data, tiny_module, tiny_trainer

    yaml_path = make_shapes(tmp_path / "shapes", n_train=8, n_val=8)
    script = tmp_path / "ddp_val.py"
    script.write_text(
        SHARDED_VALIDATION_SCRIPT.format(
            tests_dir=str(Path(__file__).parent), out=str(tmp_path), yaml=str(yaml_path)
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for record in ranks:
        assert record["world"] == 2 and record["backward"]
        assert all(b == 2 * r for b, r in zip(record["backward"], record["returned"], strict=True))
    # val batch = 2 x 2; 8 images = 2 rectangular batches: one per rank, half the split each
    assert [r["val_images"] for r in ranks] == [4, 4]
    assert ranks[0]["val_metrics"] == ranks[1]["val_metrics"]  # rank 0's score, shared with every rank
    assert {"metrics/mAP50-95", "metrics/e2e/mAP50-95"} <= set(ranks[0]["val_metrics"])

    torch.set_num_threads(1)
    data = tiny_data(yaml_path, batch_size=2)
    single = tiny_module(data)
    single.ema_model.load_state_dict(torch.load(tmp_path / "ema.pt", weights_only=True))
    pl.seed_everything(0, verbose=False)
    tiny_trainer(tmp_path / "single").validate(single, datamodule=data, verbose=False)
    assert single.val_metrics == ranks[0]["val_metrics"]
