"""lucid-train: Lightning training, evaluation and the lucid-train / lucid-eval CLIs.

The public API is the names in ``__all__``, importable from the top level (deep module paths keep working)::

    from lucid_train import YOLO, YOLODataModule, YOLOLitModule, evaluate

    model = YOLO("yolo26n")                             # or lucid-core weights, or a reference .pt
    model.fit(data="data.yaml", epochs=10, imgsz=96)    # = lucid-train fit --data.root data.yaml ...
    print(model.val(data="data.yaml").map50_95)         # = lucid-eval --weights RUN/best --data data.yaml
    detections = model.predict("images/")               # = lucid-predict --weights RUN/best --source images/
    model.export("onnx")                                # = lucid-export RUN/best --format onnx

    # the Lightning pieces, for your own Trainer
    data = YOLODataModule(root="data.yaml", imgsz=96)
    module = YOLOLitModule(num_classes=data.num_classes, names=data.names, imgsz=data.imgsz)

Names are resolved on first use (PEP 562 module ``__getattr__``), so ``import lucid_train`` imports neither
Lightning nor any plotting library until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> (module, attribute); see the module docstring.
_EXPORTS: dict[str, tuple[str, str]] = {
    "YOLO": ("lucid_train.facade", "YOLO"),
    "evaluate": ("lucid_train.facade", "evaluate"),
    "YOLOLitModule": ("lucid_train.module", "YOLOLitModule"),
    "DetectionLitModule": ("lucid_train.module", "DetectionLitModule"),
    "YOLODataModule": ("lucid_train.datamodule", "YOLODataModule"),
    "DetectionDataModule": ("lucid_train.datamodule", "DetectionDataModule"),
    "SynthConfig": ("lucid_train.datamodule", "SynthConfig"),
    "OptimizerConfig": ("lucid_train.recipe", "OptimizerConfig"),
    "EMAConfig": ("lucid_train.recipe", "EMAConfig"),
    "LossConfig": ("lucid_train.recipe", "LossConfig"),
    "default_callbacks": ("lucid_train.callbacks", "default_callbacks"),
    "default_loggers": ("lucid_train.loggers", "default_loggers"),
    "evaluate_model": ("lucid_train.eval", "evaluate_model"),
    "EvalResult": ("lucid_train.eval", "EvalResult"),
    "CocoGroundTruth": ("lucid_train.eval", "CocoGroundTruth"),
    "TrainingSetupError": ("lucid_train.errors", "TrainingSetupError"),
}

__all__ = [
    "YOLO",
    "CocoGroundTruth",
    "DetectionDataModule",
    "DetectionLitModule",
    "EMAConfig",
    "EvalResult",
    "LossConfig",
    "OptimizerConfig",
    "SynthConfig",
    "TrainingSetupError",
    "YOLODataModule",
    "YOLOLitModule",
    "__version__",
    "default_callbacks",
    "default_loggers",
    "evaluate",
    "evaluate_model",
]

if TYPE_CHECKING:  # static view of the lazily resolved names
    from lucid_train.callbacks import default_callbacks
    from lucid_train.datamodule import DetectionDataModule, SynthConfig, YOLODataModule
    from lucid_train.errors import TrainingSetupError
    from lucid_train.eval import CocoGroundTruth, EvalResult, evaluate_model
    from lucid_train.facade import YOLO, evaluate
    from lucid_train.loggers import default_loggers
    from lucid_train.module import DetectionLitModule, YOLOLitModule
    from lucid_train.recipe import EMAConfig, LossConfig, OptimizerConfig


def __getattr__(name: str) -> Any:
    """Resolve a public name on first use (PEP 562) and cache it in the module namespace."""
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
