"""The recipe's flag groups (``--optimizer.*``, ``--ema.*``, ``--loss.*``) and their conversions.

Every field is a constructor argument of :class:`~lucid_train.module.YOLOLitModule` and therefore a ``lucid-train``
flag (``--optimizer.lr0 0.02``, ``--ema.decay 0.9998``, ``--loss.box 7.5``). The optimizer group and the
``optimizer=auto`` rule live in :mod:`lucid_core.optim.recipe` (re-exported here); defaults and their sources are
listed in ``docs/TRAINING.md``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from torch import nn

from lucid_core.optim import ModelEMA, scaled_weight_decay
from lucid_core.optim import gradient_accumulation as accumulate_steps
from lucid_core.optim.recipe import (
    AUTO_ITERATION_THRESHOLD,
    AUTO_LONG_LR0,
    AUTO_LONG_OPTIMIZER,
    AUTO_MOMENTUM,
    AUTO_WARMUP_BIAS_LR,
    SGD_LR0,
    SGD_MOMENTUM,
    OptimizerConfig,
    OptimizerName,
    ResolvedOptimizer,
    planned_optimizer_steps,
    resolve_optimizer,
)

__all__ = [
    "AUTO_ITERATION_THRESHOLD",
    "AUTO_LONG_LR0",
    "AUTO_LONG_OPTIMIZER",
    "AUTO_MOMENTUM",
    "AUTO_WARMUP_BIAS_LR",
    "SGD_LR0",
    "SGD_MOMENTUM",
    "EMAConfig",
    "LossConfig",
    "OptimizerConfig",
    "OptimizerName",
    "ResolvedOptimizer",
    "accumulate_steps",
    "as_config",
    "plain",
    "planned_optimizer_steps",
    "resolve_optimizer",
    "scaled_weight_decay",
]


@dataclass
class EMAConfig:
    """Exponential moving average of weights and buffers: ``d = decay · (1 − exp(−updates / tau))``."""

    enabled: bool = True
    decay: float = 0.9999
    tau: float = 2000.0

    def ema_of(self, model: nn.Module) -> ModelEMA:
        """The EMA copy of ``model`` these settings describe (``enabled`` false: decay 0, the copy follows it)."""
        return ModelEMA(model, decay=self.decay if self.enabled else 0.0, tau=self.tau)


@dataclass
class LossConfig:
    """Loss gains and assigner constants (reference defaults, ``shared/fixtures/README.md`` ``hyp`` records).

    ``box``/``cls``/``dfl`` apply to every task (the segment mask and semantic terms use the box gain, fixture
    README S4/S5); ``pose``/``kobj``/``rle`` only to pose, ``angle`` only to obb.
    """

    box: float = 7.5
    cls: float = 0.5
    dfl: float = 1.5
    pose: float = 12.0
    kobj: float = 1.0
    rle: float = 1.0
    angle: float = 1.0
    topk: int = 10
    alpha: float = 0.5
    beta: float = 6.0

    def gains(self) -> dict[str, float]:
        """Every gain by name, as the task objectives take them."""
        names = ("box", "cls", "dfl", "pose", "kobj", "rle", "angle")
        return {name: float(getattr(self, name)) for name in names}


def as_config(value: Any, cls: type[Any]) -> Any:
    """``value`` as a ``cls`` instance: ``None`` → the defaults, a mapping → ``cls(**value)``, an instance as is."""
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls(**value)
    raise TypeError(f"expected {cls.__name__} or a mapping, got {type(value).__name__}")


def plain(value: Any) -> Any:
    """Dataclasses → dicts, recursively (checkpoints stay loadable with ``torch.load(weights_only=True)``)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: plain(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
