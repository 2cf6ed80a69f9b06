"""`YOLOLitModule`: a lucid-core YOLO model (any task) + its task objective trained with the reference recipe under Lightning.

Optimisation is manual (Lightning's documented manual-optimisation mode, no custom loop) because the recipe needs,
per batch iteration ``ni = batch + epoch · batches_per_epoch`` (issue 6 "Recipe defaults"):

* the warm-up/decay learning rate and momentum of every parameter group (``lucid_core.optim.lr_momentum_at``);
* gradient accumulation to the nominal batch 64, with the accumulation count itself ramped from 1 during warm-up;
* global-norm gradient clipping at 10.0 before every optimizer step, on the true (unscaled) gradients: the clip runs
  in :meth:`DetectionLitModule.on_before_optimizer_step`, which Lightning calls after the fp16 GradScaler's
  ``unscale_`` and before its ``step`` (issue 12: clipping still-scaled gradients shrank every update by the scale);
* under DDP the summed loss is multiplied by the world size before backward (DDP then averages the gradients, so
  they equal the reference's); validation is sharded over the ranks and the per-image results are gathered to
  rank 0 before scoring (:meth:`DetectionLitModule.on_validation_epoch_end`);
* an EMA update after every optimizer step (weights and buffers);
* the objective and BatchNorm in float32 under mixed precision (:mod:`lucid_train.precision`).

An optimizer step is also taken on the last batch of every epoch, so a checkpoint written at the end of an epoch
never holds half-accumulated gradients and a resumed run continues bit-for-bit (documented in docs/TRAINING.md).
Validation scores the EMA model in eval mode with :mod:`lucid_train.eval` - the same code as ``lucid-eval``.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, is_dataclass, replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn

from lucid_train.accel import accel_flags, attach_accel, train_forward
from lucid_train.errors import NonFiniteLossError, TrainingSetupError
from lucid_train.memory_format import resolve_channels_last
from lucid_train.precision import autocast_off, float32_output, keep_batchnorm_float32
from lucid_train.recipe import (
    EMAConfig,
    LossConfig,
    OptimizerConfig,
    ResolvedOptimizer,
    planned_optimizer_steps,
    resolve_optimizer,
)


def _plain(value: Any) -> Any:
    """Dataclasses → dicts, recursively (checkpoints stay loadable with ``torch.load(weights_only=True)``)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _as_config(value: Any, cls: type[Any]) -> Any:
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls(**value)
    raise TypeError(f"expected {cls.__name__} or a mapping, got {type(value).__name__}")


def rng_state() -> dict[str, Any]:
    """Every RNG the training touches (python, numpy legacy global, torch CPU, CUDA if present), weights_only-safe."""
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [
            np_name,
            torch.from_numpy(np.asarray(np_keys).copy()),
            int(np_pos),
            int(np_has_gauss),
            float(np_gauss),
        ],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, gauss_value = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss_value))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class YOLOLitModule(pl.LightningModule):
    """A YOLO model of any task (``lucid_core.models.build_model``) trained with the reference recipe.

    Args:
        family: model family (``yolo26``, ``yolo11``, ``yolov8``).
        task: ``detect``, ``segment``, ``pose`` or ``obb`` (a row of :data:`lucid_core.tasks.TASKS`, which gives
            the objective, the logged loss names, the scored IoU types and the fitness). A detect model may train
            on a segment/pose/obb dataset (the boxes of its instances).
        task_options: the dataset's task parameters, linked from the data module by ``lucid-train``
            (``kpt_shape``, ``kpt_sigmas``, ``flip_idx`` for pose; ``overlap_mask``, ``mask_ratio`` for segment).
            Model options of the task (``kpt_shape``) build the head; the others reach the objective/evaluation.
        scale: ``n``, ``s``, ``m``, ``l`` or ``x``.
        num_classes: number of classes; linked from the data module by ``lucid-train``.
        names: class names (index → name); linked from the data module by ``lucid-train``.
        imgsz: training/validation image size (linked from the data module); stored in exported weights.
        weights: optional lucid-core weights (``.safetensors`` + JSON) to start from; the class count must match.
        optimizer: optimiser, schedule, warm-up, accumulation and clipping (:class:`OptimizerConfig`).
        ema: weight EMA (:class:`EMAConfig`).
        loss: loss gains (:class:`LossConfig`).
        accel: opt-in lucid-accel fast paths (:class:`lucid_train.accel.AccelFlags`; ``--accel.*``), all off.
        val_conf: confidence threshold of validation decoding (reference val default 0.001).
        val_iou: NMS IoU of validation decoding (reference val default 0.7).
        max_det: detections kept per image in validation (300).
        val_decode: the decode path whose metrics are ``metrics/mAP50-95`` and so drive ``best``: ``"nms"``
            (default; for yolo26 the one-to-many branch + multi-label NMS, the reference's validation) or
            ``"topk"`` (yolo26's NMS-free one-to-one branch). An end-to-end model is scored on both every epoch;
            the other path is logged as ``metrics/e2e/*`` (top-k) or ``metrics/nms/*`` (NMS).
        compile: ``torch.compile`` the network for the training forward (issue 18; the objective stays eager).
        channels_last: train the network in channels-last (NHWC) memory format (issue 18; the EMA copy that
            validation scores stays contiguous). ``None`` (default) resolves in ``setup("fit")`` by
            :func:`resolve_channels_last`: on when the model trains on the CPU without ``--model.compile`` (the
            faster CPU step, measured by ``tools/bench/train.py --step``), off elsewhere; ``true``/``false`` force
            it. The resolved layout is printed with the optimizer line.
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
        from lucid_core.tasks import TASKS

        if task not in TASKS:
            raise TrainingSetupError(f"model.task: expected one of {', '.join(TASKS)}, got {task!r}")
        self.task_spec = TASKS[task]
        self.task_options: dict[str, Any] = dict(task_options or {})
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.family = family
        self.task = task
        self.scale = scale
        self.num_classes = int(num_classes)
        self.names = {int(k): str(v) for k, v in (names or {}).items()} or {
            i: str(i) for i in range(self.num_classes)
        }
        self.imgsz = int(imgsz)
        self.optimizer_config: OptimizerConfig = _as_config(optimizer, OptimizerConfig)
        self.ema_config: EMAConfig = _as_config(ema, EMAConfig)
        self.loss_config: LossConfig = _as_config(loss, LossConfig)
        self.accel = accel_flags(accel)
        self._accel: Any = None  # the attached lucid_accel.AccelSession (fit start), when a flag is on
        self.val_conf = val_conf
        self.val_iou = val_iou
        self.max_det = max_det
        if val_decode not in ("nms", "topk"):
            raise TrainingSetupError(
                f"model.val_decode: expected 'nms' (one-to-many branch + NMS, the reference's validation) or "
                f"'topk' (yolo26's one-to-one branch), got {val_decode!r}"
            )
        self.val_decode = val_decode
        #: the decode path of predict_step: None = NMS (yolo26: one-to-many + NMS, the reference default).
        self.decode: str | None = None
        #: issue 18 CPU/GPU step options (``--model.compile``, default off; ``--model.channels_last``, default
        #: resolved per device): see :meth:`prepare_fast_paths`.
        self.compile_network = bool(compile)
        #: the user's ``--model.channels_last`` (None = by device); ``channels_last`` is what it resolved to.
        self.channels_last_option = None if channels_last is None else bool(channels_last)
        self.channels_last = bool(channels_last)
        # the compiled network is kept out of the module tree (no duplicate state_dict keys)
        self.__dict__["_compiled_network"] = None

        self.model = self._build_model(weights)
        if val_decode == "topk" and not getattr(self.model, "end2end", False):
            raise TrainingSetupError(
                f"model.val_decode: 'topk' needs an end-to-end model (yolo26); {family} has the NMS path only. "
                "Use --model.val_decode nms."
            )
        self.criterion = self._build_loss()
        # lucid_core's ModelEMA; its copy is also registered as a submodule so Lightning moves and checkpoints it.
        from lucid_core.optim import ModelEMA

        self.ema = ModelEMA(
            self.model,
            decay=self.ema_config.decay if self.ema_config.enabled else 0.0,
            tau=self.ema_config.tau,
        )
        self.ema_model = self.ema.ema
        self.resolved: ResolvedOptimizer | None = None
        self.last_opt_step = -1
        self.accumulate = 1
        self._epoch_item_sums: Tensor | None = None
        self._epoch_item_count = 0
        self.train_epoch_items: dict[str, float] = {}
        self.val_metrics: dict[str, float] = {}
        self._evaluator: Any = None
        self._closed_epoch = -1
        self._gt: Any = None

    # ------------------------------------------------------------------ construction
    def _build_model(self, weights: str | None) -> nn.Module:
        """A fresh model, or ``weights`` to fine-tune from (issue 13, "Fine-tuning").

        ``weights``: a lucid checkpoint (``best`` / ``.safetensors`` / ``.json``) or a reference ``.pt``, converted
        on the fly by the restricted unpickler (nothing in it is executed). The network is the weights' family
        and scale (``model.family``/``model.scale`` follow them); head layers whose shape depends on the class
        count are re-initialised with a printed note. The model is in training mode.
        """
        if weights:
            from lucid_core.checkpoint import CheckpointError, load_for_training
            from lucid_core.interop import CheckpointImportError, RefusedGlobalError

            path = Path(weights)
            if "://" in weights:
                raise TrainingSetupError(
                    f"model.weights: {weights} is a URL; expected a local file (download it yourself and pass "
                    "the path: nothing is fetched or unpickled from the network)."
                )
            if not any(p.exists() for p in (path, path.with_suffix(".json"), Path(f"{weights}.json"))):
                raise TrainingSetupError(
                    f"model.weights: {weights} does not exist; expected lucid-core weights (a .safetensors file "
                    "with its .json config, as written by best.safetensors in a run directory) or a reference "
                    ".pt checkpoint."
                )
            try:
                start = load_for_training(
                    path,
                    num_classes=self.num_classes,
                    task=self.task,
                    kpt_shape=getattr(self, "task_options", {}).get("kpt_shape"),
                )
            except (CheckpointError, CheckpointImportError, RefusedGlobalError, FileNotFoundError) as exc:
                raise TrainingSetupError(f"model.weights {weights}: {exc}") from exc
            self._refuse_other_keypoint_layout(weights, start.source_config)
            config = start.model.config
            for name in ("family", "scale"):
                value = getattr(config, name)
                if getattr(self, name) != value:
                    start.notes.append(f"model.{name} {value} from the weights (was {getattr(self, name)})")
                setattr(self, name, value)
                self.hparams[name] = value
            for note in start.notes:
                rank_zero_info(f"lucid-train: fine-tuning: {note}")
            return start.model
        from lucid_core.models import build_model

        model_options = {k: v for k, v in self.task_options.items() if k in self.task_spec.option_names()}
        if "kpt_shape" in model_options:
            model_options["kpt_shape"] = tuple(int(v) for v in model_options["kpt_shape"])
        return build_model(
            family=self.family,
            task=self.task,
            scale=self.scale,
            num_classes=self.num_classes,
            **model_options,
        )

    def _refuse_other_keypoint_layout(self, weights: str, source_config: dict[str, Any]) -> None:
        """Pose weights fine-tune only onto the same ``kpt_shape`` (issue 16, "Fine-tuning": the head is
        re-initialised only where the class count differs; a keypoint layout that differs is an error)."""
        stored = source_config.get("kpt_shape")
        wanted = self.task_options.get("kpt_shape")
        if self.task != "pose" or source_config.get("task") != "pose" or not stored or not wanted:
            return
        stored_shape, wanted_shape = [int(v) for v in stored], [int(v) for v in wanted]
        if stored_shape != wanted_shape:
            raise TrainingSetupError(
                f"model.weights {weights}: the weights are a pose model with kpt_shape {stored_shape} but the "
                f"dataset's kpt_shape is {wanted_shape}; fine-tuning keeps the keypoint head, so it needs a "
                f"dataset with the same keypoints ({stored_shape[0]} keypoints of {stored_shape[1]} values). "
                "Train from scratch (omit --model.weights) for another keypoint layout."
            )

    def objective_options(self) -> dict[str, Any]:
        """Task options that reach the objective (``sigmas`` for pose, ``overlap_mask`` for segment)."""
        options: dict[str, Any] = {}
        if self.task == "pose":
            options["sigmas"] = self.keypoint_sigmas()
        if self.task == "segment" and "overlap_mask" in self.task_options:
            options["overlap_mask"] = bool(self.task_options["overlap_mask"])
        return options

    def _build_loss(self, epochs: int = 100) -> Any:
        """The task's objective from the task table (:func:`lucid_core.loss.build_objective`): one-to-many, or
        YOLO26's end-to-end combination whose o2m/o2o schedule spans ``epochs``."""
        from lucid_core.loss import build_objective

        cfg = self.loss_config
        objective = build_objective(
            self.model,
            gains=cfg.gains(),
            epochs=epochs,
            assigner={"topk": cfg.topk, "alpha": cfg.alpha, "beta": cfg.beta},
            **self.objective_options(),
        )
        self._loss_names: tuple[str, ...] = tuple(objective.loss_names)
        return objective

    def setup(self, stage: str) -> None:
        """Rebuild the objective with the run's epoch count (the yolo26 branch-weight schedule depends on it),
        serve this process's tensors from a never-trimmed heap (``lucid_core.allocator``: a training step's
        activations stop page-faulting; a no-op off glibc, or when the user set their own malloc options), and
        resolve the trained network's memory format for the strategy's device (:meth:`prepare_memory_format`)."""
        from lucid_core.allocator import tune_glibc_malloc

        tune_glibc_malloc()
        if stage == "fit":
            self.prepare_memory_format(self.trainer.strategy.root_device.type)
        if stage == "fit" and self.trainer.max_epochs and self.trainer.max_epochs > 0:
            self.criterion = self._build_loss(int(self.trainer.max_epochs))

    @property
    def loss_names(self) -> list[str]:
        """The task objective's logged loss names (fixed when the objective is built)."""
        return list(self._loss_names)

    # ------------------------------------------------------------------ optimiser
    def _global_batch_size(self) -> int:
        dm = getattr(self.trainer, "datamodule", None)
        batch = int(getattr(dm, "batch_size", 16))
        return batch * max(int(self.trainer.world_size), 1)

    def _batches_per_epoch(self) -> int:
        nb = self.trainer.num_training_batches
        if isinstance(nb, int | float) and math.isfinite(nb) and nb > 0:
            return int(nb)
        dm = getattr(self.trainer, "datamodule", None)
        return max(len(dm.train_dataloader()) if dm is not None else 1, 1)

    def _train_images(self) -> int:
        """Training images N of ``optimizer=auto``'s count (the datamodule's train dataset; else batches × batch)."""
        dm = getattr(self.trainer, "datamodule", None)
        dataset = getattr(dm, "train_dataset", None) if dm is not None else None
        if dataset is not None:
            return len(dataset)
        return self._batches_per_epoch() * self._global_batch_size()  # pragma: no cover - no datamodule

    def configure_optimizers(self) -> torch.optim.Optimizer:
        from lucid_core import optim as core_optim

        batch = self._global_batch_size()
        epochs = int(self.trainer.max_epochs or 1)
        iterations = planned_optimizer_steps(
            self._train_images(), batch, self.optimizer_config.nominal_batch, max(epochs, 0)
        )
        resolved = resolve_optimizer(
            self.optimizer_config,
            family=self.family,
            num_classes=self.num_classes,
            batch_size=batch,
            iterations=iterations,
        )
        self.resolved = replace(
            resolved,
            precision=str(self.trainer.precision),
            memory_format="channels_last" if self.channels_last else "contiguous",
        )
        self.accumulate = self.resolved.accumulate
        rank_zero_info(self.resolved.describe())
        boost = None  # MuSGD trains the head's classification convs with lr x 3 (fixture README layout)
        if hasattr(self.model, "cls_branch_parameter_names"):
            boost = set(self.model.cls_branch_parameter_names()).__contains__  # type: ignore[operator]
        groups = core_optim.build_param_groups(
            self.model,
            optimizer=self.resolved.name,
            lr=self.resolved.lr0,
            momentum=self.resolved.momentum,
            weight_decay=self.resolved.weight_decay,
            batch_size=batch,
            nominal_batch=self.optimizer_config.nominal_batch,
            boost=boost,
        )
        name = self.resolved.name
        if name == "SGD":
            return torch.optim.SGD(
                groups,
                lr=self.resolved.lr0,
                momentum=self.resolved.momentum,
                nesterov=self.optimizer_config.nesterov,
            )
        if name == "AdamW":
            return torch.optim.AdamW(
                groups, lr=self.resolved.lr0, betas=(self.resolved.momentum, 0.999), weight_decay=0.0
            )
        return core_optim.MuSGD(
            groups,
            lr=self.resolved.lr0,
            momentum=self.resolved.momentum,
            nesterov=self.optimizer_config.nesterov,
        )

    def _apply_schedule(self, optimizer: torch.optim.Optimizer, iteration: int, epoch: int, nb: int) -> None:
        """Set lr and momentum of every group for batch iteration ``iteration`` (warm-up, then linear decay)."""
        from lucid_core.optim import WarmupSchedule, apply_lr_momentum, lr_momentum_at

        assert self.resolved is not None
        cfg = self.optimizer_config
        schedule = WarmupSchedule(
            epochs=int(self.trainer.max_epochs or 1),
            iters_per_epoch=nb,
            lrf=cfg.lrf,
            momentum=self.resolved.momentum,
            warmup_epochs=cfg.warmup_epochs,
            warmup_bias_lr=self.resolved.warmup_bias_lr,
            warmup_momentum=cfg.warmup_momentum,
            min_warmup_iters=cfg.warmup_min_iters,
        )
        apply_lr_momentum(optimizer, lr_momentum_at(iteration, epoch, optimizer.param_groups, schedule))

    def _warmup_iterations(self, nb: int) -> int:
        from lucid_core.optim import warmup_iterations

        cfg = self.optimizer_config
        return warmup_iterations(
            nb, cfg.warmup_epochs, epochs=int(self.trainer.max_epochs or 1), min_iters=cfg.warmup_min_iters
        )

    def _accumulate_at(self, iteration: int, nb: int) -> int:
        """Accumulation count at ``iteration``: ramped 1 → nominal/batch during warm-up (reference behaviour)."""
        nw = self._warmup_iterations(nb)
        if iteration < nw:
            target = self.optimizer_config.nominal_batch / self._global_batch_size()
            return max(1, round(float(np.interp(iteration, [0, nw], [1, target]))))
        return self.accumulate

    # ------------------------------------------------------------------ training
    def on_fit_start(self) -> None:
        self._expect_ema_eval_mode_notice()
        if self.trainer.precision in ("bf16-mixed", "16-mixed", "bf16", "16"):
            keep_batchnorm_float32(self.model)
            keep_batchnorm_float32(self.ema_model)
        self._accel = attach_accel(self, self.accel)
        self.prepare_fast_paths()

    def prepare_memory_format(self, device_type: str | None = None) -> bool:
        """Resolve ``--model.channels_last`` for ``device_type`` (default: this module's device;
        :func:`resolve_channels_last`) and put the trained network's 4-D weights in that memory format; returns
        whether it is channels-last. ``setup("fit")`` calls it with the strategy's device, before Lightning moves
        the model, wraps it for DDP (whose gradient buckets take the parameters' strides then) and builds the
        optimizer. In place (``param.data``): parameter identities do not change.

        The EMA copy stays contiguous: validation scores it, and a contiguous network is what ``lucid-train
        validate`` and ``lucid-eval`` load, so the in-training metric equals theirs to the bit (the EMA update is
        element-wise: its values do not depend on either layout)."""
        self.channels_last = resolve_channels_last(
            self.channels_last_option, device_type or self.device.type, compile=self.compile_network
        )
        self.model.to(memory_format=torch.channels_last if self.channels_last else torch.contiguous_format)
        self.__dict__["_memory_format_ready"] = True
        return self.channels_last

    def prepare_fast_paths(self) -> None:
        """The step options at fit start: the memory format (when ``setup`` has not resolved it, e.g. a module
        driven without a trainer) and ``compile``, the training forward through ``torch.compile`` of the network
        (the objective, optimizer and EMA stay eager). Both compute the same losses as the contiguous eager step
        up to float rounding (tested to 1e-5 relative, ``tests/train/test_train_compile.py``). Compilation is
        skipped, with a note, when a lucid-accel session drives the forward."""
        if not self.__dict__.get("_memory_format_ready"):
            self.prepare_memory_format()
        if self.compile_network and self.__dict__.get("_compiled_network") is None:
            if self._accel is not None:
                rank_zero_info("lucid-train: --model.compile ignored: a --accel.* session drives the forward")
            else:
                self.__dict__["_compiled_network"] = torch.compile(self.model)

    def _train_forward(self, images: Tensor) -> Any:
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        compiled = self.__dict__.get("_compiled_network")
        return compiled(images) if compiled is not None else train_forward(self, images)

    def _expect_ema_eval_mode_notice(self) -> None:
        """Silence Lightning's fit-start "module(s) in eval mode" notice for exactly the EMA copy's modules.

        The EMA copy (``ema_model``) is registered as a submodule so Lightning moves it to the device and
        checkpoints it, and it is in eval mode by design: it is never trained, only averaged and scored. The filter
        matches only the count of the EMA copy's modules, so a module of the trained model left in eval mode
        (BatchNorm would then use running statistics while training) changes the count and still warns.
        """
        import warnings

        from lightning.fabric.utilities.warnings import PossibleUserWarning

        count = sum(1 for module in self.ema_model.modules() if not module.training)
        warnings.filterwarnings(
            "ignore",
            message=rf"Found {count} module\(s\) in eval mode at the start of training\.",
            category=PossibleUserWarning,
        )

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
        nb = self._batches_per_epoch()
        epoch = int(self.current_epoch)
        iteration = batch_idx + nb * epoch

        output = self._train_forward(self._images(batch))
        with torch.autocast(device_type=self.device.type, enabled=False):
            total, items = self.criterion(float32_output(output), batch)
        items = items.detach().float()
        if not bool(torch.isfinite(total)) or not bool(torch.isfinite(items).all()):
            paths = [str(m.get("path", m.get("image_id", "?"))) for m in batch.get("meta", [])]
            raise NonFiniteLossError(
                step=int(self.global_step),
                epoch=epoch,
                batch_index=batch_idx,
                items=dict(zip(self.loss_names, items.tolist())),
                paths=paths,
            )
        self.manual_backward(self.backward_loss(total))

        if iteration - self.last_opt_step >= self._accumulate_at(iteration, nb) or batch_idx == nb - 1:
            # Lightning runs training_step (so this manual step) under the precision's autocast; the optimizer's own
            # matrix products (MuSGD's Newton-Schulz) and the EMA must not be cast, as in the reference, whose
            # optimizer step runs outside autocast
            with autocast_off(self.device.type):
                self._apply_schedule(optimizer.optimizer, iteration, epoch, nb)
                optimizer.step()  # runs on_before_optimizer_step (the clip) after the AMP scaler's unscale_
                optimizer.zero_grad(set_to_none=True)
                self._update_ema()
            self.last_opt_step = iteration

        self._epoch_item_sums = items if self._epoch_item_sums is None else self._epoch_item_sums + items
        self._epoch_item_count += 1
        for name, value in zip(self.loss_names, items):
            self.log(f"train/{name}", value, prog_bar=True, on_step=True, on_epoch=False, batch_size=1)
        return torch.as_tensor(total).detach()

    def backward_loss(self, total: Tensor) -> Tensor:
        """The loss that is back-propagated: the summed loss × world size (reference DDP convention, issue 12).

        DDP averages gradients over the ranks; scaling by the world size first makes the averaged gradient the sum
        over every rank's images, as in the reference (identity on one process).
        """
        world = max(int(self.trainer.world_size), 1)
        return total * world if world > 1 else total

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Clip the global gradient norm to ``grad_clip_norm`` on unscaled gradients, in every precision.

        Lightning calls this hook inside ``optimizer.step()``: for ``16-mixed`` after ``GradScaler.unscale_`` (which
        it performs once per step) and before ``scaler.step``, for other precisions right before the step. So the
        clip always sees the true gradients and nothing is unscaled twice. A step the scaler skips (non-finite
        gradients) is still counted as an optimizer step, and the EMA still updates, as in the reference.
        """
        clip = float(self.optimizer_config.grad_clip_norm)
        if clip > 0:
            self.clip_gradients(optimizer, gradient_clip_val=clip, gradient_clip_algorithm="norm")

    @property
    def ema_updates(self) -> int:
        return int(self.ema.updates)

    def _update_ema(self) -> float:
        """EMA of every float parameter and buffer after each optimizer step: d = decay · (1 − exp(−updates/tau))."""
        return float(self.ema.update(self.model))

    def on_train_epoch_start(self) -> None:
        self._epoch_item_sums = None
        self._epoch_item_count = 0

    def close_epoch(self) -> None:
        """End-of-epoch state (mean loss items; the loss schedule's ``step_epoch``), once per epoch.

        Called by :class:`~lucid_train.callbacks.RunArtifacts` before it writes ``last.ckpt`` (callbacks run
        before the module's own ``on_train_epoch_end``), and by that hook otherwise.
        """
        epoch = int(self.current_epoch)
        if self._closed_epoch == epoch:
            return
        self._closed_epoch = epoch
        if self._epoch_item_sums is not None and self._epoch_item_count:
            means = (self._epoch_item_sums / self._epoch_item_count).tolist()
            self.train_epoch_items = dict(zip(self.loss_names, means))
        if hasattr(self.criterion, "step_epoch"):
            self.criterion.step_epoch()

    def on_train_epoch_end(self) -> None:
        self.close_epoch()

    # ------------------------------------------------------------------ validation (EMA, eval mode)
    def eval_model(self) -> nn.Module:
        """The model validation scores: the EMA copy (in eval mode)."""
        return self.ema_model.eval()

    def _ground_truth(self) -> Any:
        """COCO ground truth of the val split, built once (the same as ``evaluate_model`` builds it)."""
        if self._gt is None:
            from lucid_train.eval import CocoGroundTruth

            self._gt = CocoGroundTruth.from_source(self.trainer.datamodule.val_source())  # type: ignore[attr-defined]
        return self._gt

    def validation_paths(self) -> list[str]:
        """Decode paths scored every validation: ``val_decode`` first (it drives ``best``), then for an end-to-end
        model (yolo26) the other branch (reference: one-to-many + NMS by default, one-to-one = ``nms=False``)."""
        if getattr(self.ema_model, "end2end", False):
            return [self.val_decode, "topk" if self.val_decode == "nms" else "nms"]
        return ["nms"]

    def _broadcast_ema_from_rank0(self) -> None:
        """Give every rank rank 0's EMA weights and buffers before a sharded validation.

        DDP keeps the trained parameters identical, but BatchNorm running statistics are updated by each rank's own
        batches (DDP re-broadcasts them only at the next forward), so each rank's EMA buffers drift apart at float
        rounding level. Scoring every shard with rank 0's EMA (the one checkpointed) makes the gathered metric that
        of a single process scoring those weights, exactly.
        """
        import torch.distributed as dist

        if int(self.trainer.world_size) <= 1 or not (dist.is_available() and dist.is_initialized()):
            return
        with torch.no_grad():
            for tensor in self.ema_model.state_dict().values():
                dist.broadcast(tensor, src=0)

    def on_validation_epoch_start(self) -> None:
        from lucid_train.eval.runner import ModelScorer

        self._broadcast_ema_from_rank0()
        self._evaluator = ModelScorer(
            self._ground_truth(),
            task=self.task,
            num_classes=self.num_classes,
            decode=self.validation_paths(),
            conf=self.val_conf,
            iou=self.val_iou,
            max_det=self.max_det,
            multi_label=True,  # the reference validator keeps a box for every class above conf
            kpt_sigmas=self.keypoint_sigmas(),
        )

    def keypoint_sigmas(self) -> list[float] | None:
        """Pose: the OKS sigmas of the objective, which the keypoint metric uses too (the dataset YAML's
        ``kpt_sigmas``, else COCO's for 17 keypoints, else 1/K; fixture README "pose_loss_*.pt" step 5)."""
        if self.task != "pose":
            return None
        from lucid_core.loss.terms.pose import resolve_keypoint_sigmas

        kpt_shape = tuple(getattr(self.model.head, "kpt_shape", (17, 3)))
        return [float(v) for v in resolve_keypoint_sigmas(kpt_shape, self.task_options.get("kpt_sigmas"))]

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        model = self.eval_model()
        with torch.no_grad():
            self._evaluator.update(model, batch)

    @staticmethod
    def _metric_prefix(path: str, primary: bool) -> str:
        if primary:
            return "metrics/"
        return "metrics/e2e/" if path == "topk" else "metrics/nms/"

    def _task_metrics(self, result: Any, prefix: str) -> dict[str, float]:
        """mAP50 and mAP50-95 of every IoU type of the task (task table): box keys ``{prefix}mAP50(-95)``, the
        task's own under ``{prefix}mask/``, ``{prefix}pose/`` (``lucid_core.tasks.metric_key``)."""
        from lucid_core.tasks import metric_key

        metrics: dict[str, float] = {}
        for iou_type, scores in result.per_type.items():
            for name, value in (("mAP50", scores.map50), ("mAP50-95", scores.map50_95)):
                key = metric_key(iou_type, name)
                metrics[prefix + key[len("metrics/") :]] = float(value)
        return metrics

    def on_validation_epoch_end(self) -> None:
        """Gather the ranks' per-image results to rank 0, score there, and share the metrics with every rank.

        ``metrics/mAP50(-95)`` are the ``val_decode`` path's (``best`` is chosen on ``metrics/mAP50-95``); the other
        path of an end-to-end model is logged beside them (``metrics/e2e/*`` for top-k, ``metrics/nms/*``).
        """
        scorer, self._evaluator = self._evaluator, None
        metrics: dict[str, float] | None = None
        if scorer.gather(dst=0):
            result = scorer.compute()
            metrics = self._task_metrics(result, "metrics/")
            for path, other in result.other_decodes.items():
                metrics.update(self._task_metrics(other, self._metric_prefix(path, primary=False)))
            metrics["metrics/fitness"] = self.task_spec.fitness(metrics)
        if int(self.trainer.world_size) > 1:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                shared = [metrics]
                dist.broadcast_object_list(shared, src=0)
                metrics = shared[0]
        assert metrics is not None
        self.val_metrics = metrics
        for key, value in self.val_metrics.items():
            self.log(key, value, prog_bar="/e2e/" not in key and "/nms/" not in key, sync_dist=False)

    def test_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        self.validation_step(batch, batch_idx)

    def on_test_epoch_start(self) -> None:
        self.on_validation_epoch_start()

    def on_test_epoch_end(self) -> None:
        self.on_validation_epoch_end()

    @torch.no_grad()
    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> Any:
        """Detections of one batch (``batch["images"]``, uint8 or float) in network-input pixels, on the CPU.

        The EMA model in eval mode, decoded as ``lucid-predict`` decodes (``lucid_core.decode.postprocess`` with
        the predict defaults conf 0.25, iou 0.7 and ``max_det``; ``decode`` None = NMS for every family (yolo26
        one-to-many + NMS, the reference default). Needs no ground truth: any image batch can be predicted.
        """
        from lucid_core.decode.postprocess import DEFAULT_IOU, PREDICT_CONF, postprocess
        from lucid_train.eval.runner import _BranchSelector, decode_paths

        model = self.eval_model()
        path = decode_paths(model, self.decode)[0]
        images = self._images({"images": batch["images"].to(self.device)})
        with _BranchSelector(model, path):
            output = model(images)
        output = tuple(t.float() for t in output) if isinstance(output, tuple) else output.float()
        detections = postprocess(
            output,
            task=self.task,
            nc=self.num_classes,
            mode=path,
            conf=PREDICT_CONF,
            iou=DEFAULT_IOU,
            max_det=self.max_det,
            kpt_shape=getattr(model, "kpt_shape", None),
            input_hw=(int(images.shape[2]), int(images.shape[3])),
        )
        return [d.to("cpu") for d in detections]

    # ------------------------------------------------------------------ checkpoint state
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["hyper_parameters"] = _plain(dict(checkpoint.get("hyper_parameters", {})))
        state: dict[str, Any] = {
            "ema_updates": self.ema.updates,
            "last_opt_step": self.last_opt_step,
            "rng": rng_state(),
            "resolved_optimizer": self.resolved.as_dict() if self.resolved else None,
        }
        if hasattr(self.criterion, "state_dict"):
            state["loss"] = self.criterion.state_dict()
        checkpoint["lucid"] = state

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("lucid", {})
        self.ema.updates = int(state.get("ema_updates", 0))
        self.last_opt_step = int(state.get("last_opt_step", -1))
        if "loss" in state and hasattr(self.criterion, "load_state_dict"):
            self.criterion.load_state_dict(state["loss"])
        if "rng" in state:
            set_rng_state(state["rng"])

    def export_ema(self, path: Path) -> None:
        """Write the EMA model in the lucid-core format (safetensors + JSON) at ``path``."""
        from lucid_core.checkpoint import save_model

        save_model(
            self.ema_model, path, names=self.names, imgsz=self.imgsz, extra={"epoch": int(self.current_epoch)}
        )

    def resolved_summary(self) -> str:
        return json.dumps(self.resolved.as_dict() if self.resolved else {}, indent=2)


#: the historical name of :class:`YOLOLitModule` (detection was its first task); the same class.
DetectionLitModule = YOLOLitModule
