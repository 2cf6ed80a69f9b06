"""The end of ``fit``: best's validation artefacts in the run directory, listed in summary.txt, logged to TensorBoard."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.loggers import TensorBoardLogger
from lucid_train_testing import make_shapes, tiny_data, tiny_module, tiny_trainer

pytest.importorskip("lucid_viz")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

FIGURES = ("confusion_matrix.png", "PR_curve.png", "F1_curve.png", "P_curve.png", "R_curve.png", "labels.png")


def test_fit_ends_with_the_validation_figures_beside_curves_png(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    data = tiny_data(make_shapes(tmp_path / "shapes", n_train=8, n_val=4), batch_size=4)
    run = tmp_path / "run"
    logger = TensorBoardLogger(str(run), name="tb")
    tiny_trainer(run, logger=logger, validation_plots=True).fit(tiny_module(data), datamodule=data)

    for name in ("curves.png", *FIGURES, "per_class.csv", "per_class.md"):
        assert (run / name).is_file() and (run / name).stat().st_size > 0, name
    header = (run / "per_class.csv").read_text().splitlines()[0]
    assert header == "class,images,instances,P,R,AP50,AP50-95"
    listed = (run / "summary.txt").read_text().splitlines()[1]
    assert listed.startswith("figures: ") and all(name in listed for name in ("curves.png", *FIGURES))

    events = event_accumulator.EventAccumulator(str(Path(logger.log_dir)), size_guidance={"images": 0})
    events.Reload()
    tags = set(events.Tags()["images"])
    assert {f"plots/{Path(name).stem}" for name in ("curves.png", *FIGURES)} <= tags
