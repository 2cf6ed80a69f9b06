"""Validation losses: the task objective's loss items on the validation batches, logged as ``val/<item>``.

The reference's validator computes the same loss items as training on each validation batch, from the model it
scores (the EMA copy, in eval mode), and reports their mean over the batches of the epoch (docs/EVALUATION.md,
"Validation losses"). :class:`ValidationLosses` does the same without a second pass through the backbone and neck:

* a forward pre-hook on the scored model's head keeps the inputs of the first head call of every validation batch
  (the level features of the forward the primary decode path already runs);
* after the batch the head evaluates its training-mode outputs on them (:func:`raw_head_output`: both branches,
  prototypes; the head module's own ``training`` flag is set for that one call, every sub-module, BatchNorm
  included, stays in eval mode, so no running statistic moves), under the validation step's precision context;
* the module's objective (``pl_module.criterion``) scores them against the batch's targets in float32, outside
  autocast, as ``training_step`` does; the items are summed per batch and divided by the number of batches of
  the epoch, summed over the ranks first (each rank scores its own shard).

Nothing here draws random numbers or changes a parameter or buffer, so training is untouched
(``tests/train/test_train_val_loss.py`` checks bit-identical weights). ``means`` holds the last epoch's values
(``{"box_loss": ...}``); :class:`~lucid_train.callbacks.RunArtifacts` writes them into ``metrics.csv`` as
``val/<item>``, beside ``train/<item>``, and ``curves.png`` draws both in one panel per item.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from lucid_train.precision import autocast_off, float32_output

#: the prefix of the logged validation losses (``val/box_loss``, ...), beside training's ``train/``
VAL_PREFIX = "val/"


def scored_head(pl_module: pl.LightningModule) -> nn.Module | None:
    """The head of the model validation scores (the EMA copy, else the trained model); ``None`` without one."""
    model = getattr(pl_module, "ema_model", None)
    if model is None:
        model = getattr(pl_module, "model", None)
    head = getattr(model, "head", None)
    return head if isinstance(head, nn.Module) else None


def raw_head_output(head: nn.Module, *inputs: Any) -> Any:
    """The head's training-mode output (``TrainOutput``: both branches, prototypes; a classifier's logits) on its
    ``inputs`` (those of an eval-mode call), with every sub-module left in its own mode (eval during validation:
    BatchNorm uses, and keeps, its running statistics)."""
    was_training = head.training
    head.training = True  # the head module only; nn.Module.train() would switch its children too
    try:
        return head(*inputs)
    finally:
        head.training = was_training


class ValidationLosses(pl.Callback):
    """Loss items of every validation batch from the features the scored forward already computed (module
    docstring); their epoch means are logged as ``val/<item>`` and kept in :attr:`means`."""

    def __init__(self) -> None:
        self.means: dict[str, float] = {}
        self._handle: RemovableHandle | None = None
        self._armed = False
        self._inputs: tuple[Any, ...] | None = None
        self._sums: Tensor | None = None
        self._batches = 0

    # ------------------------------------------------------------------ the hook on the head
    def _keep_inputs(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if self._armed and args:
            self._inputs = args
            self._armed = False  # the first head call of the batch: the primary decode path's forward

    def _release(self) -> None:
        if self._handle is not None:
            self._handle.remove()
        self._handle, self._armed, self._inputs = None, False, None

    # ------------------------------------------------------------------ Lightning hooks
    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._release()
        self._sums, self._batches = None, 0
        head = scored_head(pl_module)
        if trainer.sanity_checking or head is None or getattr(pl_module, "criterion", None) is None:
            return
        self._handle = head.register_forward_pre_hook(self._keep_inputs)

    def on_validation_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._inputs, self._armed = None, self._handle is not None

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        inputs, self._inputs, self._armed = self._inputs, None, False
        head = scored_head(pl_module)
        if inputs is None or head is None:
            return
        criterion: Any = pl_module.criterion
        with torch.no_grad():
            with trainer.precision_plugin.val_step_context():
                output = raw_head_output(head, *inputs)
            with autocast_off(pl_module.device.type):
                _, items = criterion(float32_output(output), batch)
        items = items.detach().float()
        self._sums = items if self._sums is None else self._sums + items
        self._batches += 1

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        was_active = self._handle is not None
        self._release()
        if not was_active:
            return
        names = list(getattr(pl_module, "loss_names", []))
        sums = self._sums if self._sums is not None else torch.zeros(len(names), device=pl_module.device)
        count = torch.tensor(float(self._batches), device=sums.device)
        sums = trainer.strategy.reduce(sums, reduce_op="sum")  # every rank's batches (a no-op on one process)
        count = trainer.strategy.reduce(count, reduce_op="sum")
        if float(count) <= 0 or len(names) != int(sums.numel()):
            self.means = {}
            return
        self.means = {name: float(value) for name, value in zip(names, (sums / count).tolist())}
        for name, value in self.means.items():
            pl_module.log(
                f"{VAL_PREFIX}{name}", value, on_step=False, on_epoch=True, sync_dist=False, batch_size=1
            )

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self._release()
