"""Train/eval mode of the modules during fit: the trained model trains, the EMA copy stays in eval mode.

Lightning's fit-start notice "Found N module(s) in eval mode" does not count the EMA copy (it reports train mode
from `on_fit_start` to `on_train_start`, and no process-wide warning filter is installed); a trained module in eval
mode (BatchNorm on running statistics while training) must still warn, with its own count.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
from lucid_train_testing import make_shapes, tiny_data, tiny_module, tiny_trainer


class _StopAtTrainStart(Exception):
    pass


class _Stop(pl.Callback):
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        raise _StopAtTrainStart


@pytest.fixture(scope="module")
def shapes_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shapes(tmp_path_factory.mktemp("modes-shapes"), n_train=4, n_val=2)


def _eval_mode_notices(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "in eval mode at the start of training" in str(w.message)]


def test_every_trained_module_is_in_train_mode_inside_training_step(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    data = tiny_data(shapes_yaml, batch_size=2)
    module = tiny_module(data)
    seen: list[tuple[list[str], bool]] = []
    training_step = module.training_step

    def checked_step(batch: Any, batch_idx: int) -> Any:
        # every registered module except the EMA copy (the LightningModule itself included)
        trained = [n for n, m in module.named_modules() if not m.training and not n.startswith("ema_model")]
        seen.append((trained, all(not m.training for m in module.ema_model.modules())))
        return training_step(batch, batch_idx)

    module.training_step = checked_step
    trainer = tiny_trainer(tmp_path / "run", max_epochs=2, limit_train_batches=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, datamodule=data)
    assert len(seen) == 2  # one step per epoch; the second follows a validation pass (eval → train restored)
    assert [eval_modules for eval_modules, _ in seen] == [[], []]
    assert all(ema_in_eval for _, ema_in_eval in seen)
    assert _eval_mode_notices(caught) == []


def test_a_trained_module_left_in_eval_mode_still_warns(shapes_yaml: Path, tmp_path: Path) -> None:
    data = tiny_data(shapes_yaml, batch_size=2)
    module = tiny_module(data)
    module.model.eval()  # the bug the notice exists for
    expected = sum(1 for _ in module.model.modules())
    filters = list(warnings.filters)
    trainer = tiny_trainer(tmp_path / "run", max_epochs=1, callbacks=[_Stop()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(_StopAtTrainStart):
            trainer.fit(module, datamodule=data)
    notices = _eval_mode_notices(caught)
    assert len(notices) == 1 and f"Found {expected} module(s)" in notices[0]
    assert warnings.filters == filters  # fit added no process-wide filter
