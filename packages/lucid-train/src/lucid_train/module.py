"""`YOLOLitModule`: a YOLO model of any task trained with the reference recipe under Lightning.

Manual optimisation: ``training_step`` runs forward, objective and backward, and
:class:`lucid_core.optim.TrainingRecipe` decides when the optimizer steps and runs the step. Validation scores the
EMA copy (:mod:`lucid_train.eval`). The flow and its parts: docs/INTERFACES.md, "Training flow".
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn

from lucid_core.checkpoint import save_model
from lucid_core.optim import Iteration, TrainingRecipe
from lucid_core.results import Detections
from lucid_train.accel import accel_flags, attach_accel, train_forward
from lucid_train.distributed import broadcast_object
from lucid_train.eval import CocoGroundTruth
from lucid_train.loss_items import EpochLosses, check_finite
from lucid_train.memory_format import FastPaths
from lucid_train.model_setup import class_names, start_model, task_of, training_objective
from lucid_train.precision import autocast_off, float32_output, is_mixed, keep_batchnorm_float32
from lucid_train.prediction import predict_batch
from lucid_train.recipe import EMAConfig, LossConfig, OptimizerConfig, ResolvedOptimizer, as_config, plain
from lucid_train.scoring import EpochScorer, check_val_decode, epoch_metrics, validation_scorer
from lucid_train.trainer_facts import batches_per_epoch, global_batch_size, train_images


class YOLOLitModule(pl.LightningModule):
    """A YOLO model of any task (``lucid_core.models.build_model``) trained with the reference recipe.

    Args:
        family: model family (``yolo26``, ``yolo11``, ``yolov8``).
        task: a registered task (``detect``, ``segment``, ``pose``, ``obb``: :func:`lucid_core.tasks.get_task`).
            A detect model may train on a segment/pose/obb dataset (the boxes of its instances).
        scale: ``n``, ``s``, ``m``, ``l`` or ``x``.
        num_classes: number of classes; linked from the data module by ``lucid-train``.
        names: class names (index → name); linked from the data module by ``lucid-train``.
        imgsz: training/validation image size (linked from the data module); stored in exported weights.
        weights: optional weights to fine-tune from: lucid-core weights (``.safetensors`` + JSON) or a reference ``.pt``.
        optimizer: optimiser, schedule, warm-up, accumulation and clipping (:class:`OptimizerConfig`).
        ema: weight EMA (:class:`EMAConfig`).
        loss: loss gains (:class:`LossConfig`).
        accel: opt-in lucid-accel fast paths (:class:`lucid_train.accel.AccelFlags`; ``--accel.*``), all off.
        val_conf: confidence threshold of validation decoding (reference val default 0.001).
        val_iou: NMS IoU of validation decoding (reference val default 0.7).
        max_det: detections kept per image in validation (300).
        val_decode: the decode path whose metrics drive ``best``: ``"nms"`` (default; yolo26: one-to-many + NMS,
            the reference's validation) or ``"topk"`` (yolo26's one-to-one branch); an end-to-end model's other
            path is logged too, as ``metrics/e2e/*`` (top-k) or ``metrics/nms/*``.
        task_options: the dataset's task parameters, linked from the data module (pose ``kpt_shape``,
            ``kpt_sigmas``, ``flip_idx``; segment ``overlap_mask``, ``mask_ratio``): the head's and the objective's.
        compile: ``torch.compile`` the network for the training forward (the objective stays eager).
        channels_last: train the network channels-last (NHWC); ``None`` (default): on when training on the CPU
            without ``--model.compile`` (resolved when the fit is set up). The EMA copy stays contiguous.
    """

    def __init__(
        self,
        family: str = "yolo26",
        task: str = "detect",
        scale: str = "n",
        num_classes: int = 80,
        names: dict[int, str] | None = None,
        imgsz: int = 640,
        weights: str | None = None,
        optimizer: OptimizerConfig | None = None,
        ema: EMAConfig | None = None,
        loss: LossConfig | None = None,
        accel: dict[str, bool] | None = None,
        val_conf: float = 0.001,
        val_iou: float = 0.7,
        max_det: int = 300,
        val_decode: str = "nms",
        task_options: dict[str, Any] | None = None,
        compile: bool = False,
        channels_last: bool | None = None,
    ) -> None:
        super().__init__()
        self.task_spec = task_of(task)
        self.task_options: dict[str, Any] = dict(task_options or {})
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.family, self.task, self.scale = family, task, scale
        self.num_classes = int(num_classes)
        self.names = class_names(names, self.num_classes)
        self.imgsz = int(imgsz)
        self.optimizer_config: OptimizerConfig = as_config(optimizer, OptimizerConfig)
        self.ema_config: EMAConfig = as_config(ema, EMAConfig)
        self.loss_config: LossConfig = as_config(loss, LossConfig)
        self.accel = accel_flags(accel)
        self._accel: Any = None  # the attached lucid_accel.AccelSession (fit start), when a flag is on
        self.val_conf, self.val_iou, self.max_det = val_conf, val_iou, max_det
        self.val_decode = check_val_decode(val_decode)
        self.decode: str | None = None  # predict_step's decode path (None: NMS)
        self.fast_paths = FastPaths(channels_last, compile)
        self.model = start_model(weights, self.task_spec, family, scale, self.num_classes, self.task_options)
        if weights:  # fine-tuning keeps the weights' family and scale
            self.family, self.scale = self.model.config.family, self.model.config.scale
            self.hparams.update(family=self.family, scale=self.scale)
        check_val_decode(val_decode, self.model, family)
        self.criterion = training_objective(self.model, self.task_spec, self.loss_config, self.task_options)
        self.loss_names: list[str] = list(
            self.criterion.loss_names
        )  # the logged loss names (fixed by the task)
        # the EMA copy is also a submodule, so Lightning moves and checkpoints it (``ema_model.*``)
        self.ema = self.ema_config.ema_of(self.model)
        self.ema_model: nn.Module = self.ema.ema
        self.recipe = TrainingRecipe(self.optimizer_config)
        self.resolved: ResolvedOptimizer | None = None  # set by configure_optimizers
        self.epoch_losses = EpochLosses()
        self.train_epoch_items: dict[str, float] = {}
        self.val_metrics: dict[str, float] = {}
        self._evaluator: EpochScorer | None = None
        self._gt: CocoGroundTruth | None = None

    def setup(self, stage: str) -> None:
        """Fit: the trained network's memory format for the strategy's device (before DDP wraps it and the
        optimizer is built), and the objective rebuilt for the run's epoch count."""
        if stage == "fit":
            self.fast_paths.set_layout(self.model, self.trainer.strategy.root_device.type)
        if stage == "fit" and self.trainer.max_epochs and self.trainer.max_epochs > 0:
            epochs = int(self.trainer.max_epochs)
            self.criterion = training_objective(
                self.model, self.task_spec, self.loss_config, self.task_options, epochs=epochs
            )

    # ------------------------------------------------------------------ optimiser
    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The recipe's optimizer, planned for this run (``optimizer=auto`` resolved and printed)."""
        self.resolved = self.recipe.plan(
            images=train_images(self.trainer),
            batch_size=global_batch_size(self.trainer),
            epochs=int(self.trainer.max_epochs or 1),
            num_classes=self.num_classes,
            family=self.family,
            precision=str(self.trainer.precision),
            memory_format="channels_last" if self.fast_paths.channels_last else "contiguous",
        )
        rank_zero_info(self.resolved.describe())
        return self.recipe.optimizer(self.model)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Clip to ``grad_clip_norm``. Lightning calls this inside ``optimizer.step()``: after the AMP scaler's
        ``unscale_`` and before its ``step``, so the clip sees the true gradients in every precision."""
        self.recipe.clip(optimizer)

    # ------------------------------------------------------------------ training
    def on_fit_start(self) -> None:
        # the EMA copy reports train mode until training starts: Lightning's notice then counts trained modules only
        self.ema_model.train()
        if is_mixed(self.trainer.precision):
            keep_batchnorm_float32(self.model)
            keep_batchnorm_float32(self.ema_model)
        self._accel = attach_accel(self, self.accel)
        self.fast_paths.prepare(self.model, self.device.type, accel=self._accel is not None)

    def on_train_start(self) -> None:
        self.ema_model.eval()

    def forward(self, images: Tensor) -> Any:
        return self.model(images)

    @staticmethod
    def _images(batch: dict[str, Any]) -> Tensor:
        images = batch["images"]
        x: Tensor = images.float() / 255.0 if images.dtype == torch.uint8 else images.float()
        return x

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> Tensor:
        optimizer = self.optimizers()
        assert isinstance(optimizer, pl.core.optimizer.LightningOptimizer)
        at = Iteration(int(self.current_epoch), batch_idx, batches_per_epoch(self.trainer))
        output = self.fast_paths(self._images(batch), partial(train_forward, self))
        with torch.autocast(device_type=self.device.type, enabled=False):
            total, items = self.criterion(float32_output(output), batch)
        items = items.detach().float()
        step, names = int(self.global_step), self.loss_names
        check_finite(total, items, names, batch, step=step, epoch=at.epoch, batch_index=batch_idx)
        self.manual_backward(self.backward_loss(total))
        if self.recipe.should_step(at):
            # Lightning runs training_step under the precision's autocast; the optimizer step (MuSGD's matrix
            # products), the clip and the EMA run outside it, as the reference's optimizer step does
            with autocast_off(self.device.type):
                self.recipe.step(optimizer.optimizer, at, ema=self.ema, model=self.model, step=optimizer.step)
        self.epoch_losses.add(items)
        for name, value in zip(names, items):
            self.log(f"train/{name}", value, prog_bar=True, on_step=True, on_epoch=False, batch_size=1)
        return torch.as_tensor(total).detach()

    def backward_loss(self, total: Tensor) -> Tensor:
        """The back-propagated loss: × world size, so DDP's averaged gradient sums every rank's, as the reference's."""
        world = max(int(self.trainer.world_size), 1)
        return total * world if world > 1 else total

    @property
    def ema_updates(self) -> int:
        return int(self.ema.updates)

    def on_train_epoch_start(self) -> None:
        self.epoch_losses.start()

    def close_epoch(self) -> None:
        """Once per epoch: the mean loss items and the objective's ``step_epoch``. Called by
        :class:`~lucid_train.callbacks.RunArtifacts` before it writes ``last.ckpt``, else by ``on_train_epoch_end``."""
        if not self.epoch_losses.close(int(self.current_epoch)):
            return
        means = self.epoch_losses.means(self.loss_names)
        if means is not None:
            self.train_epoch_items = means
        if hasattr(self.criterion, "step_epoch"):
            self.criterion.step_epoch()

    def on_train_epoch_end(self) -> None:
        self.close_epoch()

    # ------------------------------------------------------------------ validation (EMA, eval mode)
    def eval_model(self) -> nn.Module:
        """The model validation scores: the EMA copy (in eval mode)."""
        return self.ema_model.eval()

    def on_validation_epoch_start(self) -> None:
        """The epoch's scorer (:func:`lucid_train.scoring.validation_scorer`: COCO mAP over the val split's ground
        truth, built once; top-1/top-5 accuracy for an image-level task)."""
        self._gt, self._evaluator = validation_scorer(self, self._gt)

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        assert self._evaluator is not None
        model = self.eval_model()
        with torch.no_grad():
            self._evaluator.update(model, batch)

    def on_validation_epoch_end(self) -> None:
        """Gather the ranks' per-image results to rank 0, score there (:func:`lucid_train.scoring.epoch_metrics`),
        and share the metrics with every rank."""
        scorer, self._evaluator = self._evaluator, None
        assert scorer is not None
        metrics = epoch_metrics(scorer.compute(), self.task_spec) if scorer.gather(dst=0) else None
        metrics = broadcast_object(metrics, self.trainer.world_size)
        assert metrics is not None
        self.val_metrics = metrics
        for key, value in metrics.items():
            self.log(key, value, prog_bar="/e2e/" not in key and "/nms/" not in key, sync_dist=False)

    # testing scores the test split exactly as validation scores the val split
    test_step = validation_step
    on_test_epoch_start = on_validation_epoch_start
    on_test_epoch_end = on_validation_epoch_end

    @torch.no_grad()
    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[Detections]:
        """Detections of ``batch["images"]`` (uint8 or float) by the EMA model, in network-input pixels, on the CPU
        (:func:`lucid_train.prediction.predict_batch`; ``decode`` None = NMS). Needs no ground truth."""
        model = self.eval_model()
        images = self._images({"images": batch["images"].to(self.device)})
        return predict_batch(model, images, self.task, self.num_classes, self.max_det, self.decode)

    # ------------------------------------------------------------------ checkpoint state
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["hyper_parameters"] = plain(dict(checkpoint.get("hyper_parameters", {})))
        state = checkpoint.setdefault("lucid", {})
        state["last_opt_step"] = self.recipe.last_opt_step
        state["resolved_optimizer"] = self.resolved.as_dict() if self.resolved else None
        if hasattr(self.criterion, "state_dict"):
            state["loss"] = self.criterion.state_dict()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("lucid", {})
        self.recipe.last_opt_step = int(state.get("last_opt_step", -1))
        if "loss" in state and hasattr(self.criterion, "load_state_dict"):
            self.criterion.load_state_dict(state["loss"])

    def export_ema(self, path: Path) -> None:
        """Write the EMA model in the lucid-core format (safetensors + JSON) at ``path``."""
        extra = {"epoch": int(self.current_epoch)}
        save_model(self.ema_model, path, names=self.names, imgsz=self.imgsz, extra=extra)


#: the historical name of :class:`YOLOLitModule` (detection was its first task); the same class.
DetectionLitModule = YOLOLitModule
