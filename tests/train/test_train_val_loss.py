"""Validation losses (``val/<loss>``): logged every epoch, equal to the objective on the EMA model's validation
outputs, and without any effect on training (bit-identical weights with and without them)."""

from __future__ import annotations

import copy
import csv
import math
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lucid_train_testing import make_shapes, recorded_losses, state_hash, tiny_data, tiny_module, tiny_trainer

from lucid_train.callbacks import RunArtifacts
from lucid_train.callbacks.val_loss import ValidationLosses, raw_head_output


@pytest.fixture(scope="module")
def shapes_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shapes(tmp_path_factory.mktemp("shapes"), n_train=8, n_val=4)


def _fit(
    yaml_path: Path, run_dir: Path, *, validation_losses: bool, epochs: int = 2
) -> tuple[Any, pl.Trainer]:
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    data = tiny_data(yaml_path, batch_size=4)
    module = tiny_module(data)
    trainer = tiny_trainer(run_dir, max_epochs=epochs)
    for i, callback in enumerate(trainer.callbacks):  # type: ignore[attr-defined]
        if isinstance(callback, RunArtifacts):
            trainer.callbacks[i] = RunArtifacts(validation_plots=False, validation_losses=validation_losses)  # type: ignore[attr-defined]
    trainer.fit(module, datamodule=data)
    return module, trainer


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open(newline="") as stream:
        return list(csv.DictReader(stream))


def test_validation_losses_are_logged_every_epoch_and_leave_training_bit_identical(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    with_losses, trainer = _fit(shapes_yaml, tmp_path / "with", validation_losses=True)
    without, other = _fit(shapes_yaml, tmp_path / "without", validation_losses=False)

    # training is untouched: same per-step losses, same weights and buffers (BN statistics), same EMA
    assert recorded_losses(trainer) == recorded_losses(other)
    assert state_hash(with_losses.model) == state_hash(without.model)
    assert state_hash(with_losses.ema_model) == state_hash(without.ema_model)

    names = list(with_losses.loss_names)
    rows = _rows(tmp_path / "with")
    assert len(rows) == 2
    for row in rows:  # one value per loss item, every epoch, next to the training ones
        for name in names:
            assert f"train/{name}" in row
            assert math.isfinite(float(row[f"val/{name}"])) and float(row[f"val/{name}"]) >= 0
    assert not any(key.startswith("val/") for key in _rows(tmp_path / "without")[0])
    logged = {k for k in trainer.callback_metrics if k.startswith("val/")}
    assert logged == {f"val/{name}" for name in names}


def test_validation_losses_equal_the_objective_on_the_ema_models_validation_outputs(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    module, trainer = _fit(shapes_yaml, tmp_path / "run", validation_losses=True, epochs=1)
    callback = next(c for c in trainer.callbacks if isinstance(c, RunArtifacts)).val_losses  # type: ignore[attr-defined]
    assert isinstance(callback, ValidationLosses)

    # by hand: every val batch through a copy of the EMA model, its head in training mode (BN in eval mode)
    model = copy.deepcopy(module.ema_model).eval()
    model.head.training = True
    sums, batches = None, 0
    with torch.no_grad():
        for batch in trainer.datamodule.val_dataloader():  # type: ignore[attr-defined]
            _, items = module.criterion(model(batch["images"].float() / 255.0), batch)
            sums = items if sums is None else sums + items
            batches += 1
    assert sums is not None
    expected = (sums / batches).tolist()
    got = [callback.means[name] for name in module.loss_names]
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_raw_head_output_leaves_batchnorm_statistics_and_modes_alone() -> None:
    from lucid_core.models import build_model
    from lucid_core.outputs import TrainOutput

    torch.manual_seed(0)
    model = build_model(family="yolo26", task="detect", scale="n", num_classes=3).eval()
    feats: list[torch.Tensor] = []
    handle = model.head.register_forward_pre_hook(lambda m, args: feats.extend(args[0]))
    with torch.no_grad():
        model(torch.rand(2, 3, 64, 64))
    handle.remove()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = torch.random.get_rng_state()
    with torch.no_grad():
        output = raw_head_output(model.head, feats)
    assert isinstance(output, TrainOutput) and output.one2one is not None
    assert not model.head.training and not any(m.training for m in model.modules())
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


class _SeenAtFirstBatch(pl.Callback):
    """Whether ``labels.png`` is already in the run directory when the first training batch starts."""

    def __init__(self) -> None:
        self.seen: bool | None = None

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, idx: int
    ) -> None:
        if self.seen is None:
            self.seen = (Path(trainer.default_root_dir) / "labels.png").is_file()


def test_labels_png_of_the_training_split_is_written_when_fit_starts(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    pytest.importorskip("lucid_viz")
    from matplotlib.image import imread

    torch.set_num_threads(1)
    data = tiny_data(shapes_yaml, batch_size=4)
    probe = _SeenAtFirstBatch()
    trainer = tiny_trainer(
        tmp_path, max_epochs=1, callbacks=[probe], validation_plots=True, limit_train_batches=1
    )
    trainer.fit(tiny_module(data), datamodule=data)
    assert probe.seen is True
    image = imread(tmp_path / "labels.png")
    assert image.shape[0] > 200 and (image[..., :3] < 0.95).any(axis=-1).mean() > 0.01
    assert "labels.png" in (tmp_path / "summary.txt").read_text().splitlines()[1]
