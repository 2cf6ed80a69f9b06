"""lucid-core: YOLO geometry, blocks, model registry, heads, assigners, losses, decoders, optimizer math, checkpoints and predict.

The public API is the names in ``__all__``, importable from the top level (deep module paths keep working)::

    import lucid_core

    print(lucid_core.list_models()[:3])                      # registered (family, task, scale) keys
    model = lucid_core.build_model("yolo26", "detect", "n", num_classes=3)
    lucid_core.save_model(model, "runs/demo/model", names=["a", "b", "c"], imgsz=640)
    loaded = lucid_core.load("runs/demo/model")               # .safetensors + .json, or a reference .pt
    detections = lucid_core.predict(loaded.model, "image.jpg")  # list[Detections], original-image pixels
    lucid_core.export_onnx(model, "runs/demo/model.onnx", imgsz=640)

Names are resolved on first use (PEP 562 module ``__getattr__``), so ``import lucid_core`` stays cheap: it imports
neither torch nor any submodule until a name is used. ``lucid_core.predict`` is the function
:func:`lucid_core.inference.predict`; its module is :mod:`lucid_core.inference`. ``load_checkpoint``,
``load_model`` and ``load_weights`` are deprecated (they warn) in favour of ``load``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> (module, attribute); see the module docstring.
_EXPORTS: dict[str, tuple[str, str]] = {
    "Checkpoint": ("lucid_core.checkpoint", "Checkpoint"),
    "CheckpointError": ("lucid_core.errors", "CheckpointError"),
    "Detections": ("lucid_core.results", "Detections"),
    "ModelConfig": ("lucid_core.models", "ModelConfig"),
    "ModelKey": ("lucid_core.models", "ModelKey"),
    "Results": ("lucid_core.results", "Results"),
    "YOLOModel": ("lucid_core.models", "YOLOModel"),
    "build_model": ("lucid_core.models", "build_model"),
    "export_onnx": ("lucid_core.interop", "export_onnx"),
    "import_checkpoint": ("lucid_core.interop", "import_checkpoint"),
    "list_models": ("lucid_core.models", "list_models"),
    "load": ("lucid_core.checkpoint", "load"),
    "load_checkpoint": ("lucid_core.checkpoint", "load_checkpoint"),
    "load_model": ("lucid_core.checkpoint", "load_model"),
    "load_weights": ("lucid_core.checkpoint", "load_weights"),
    "model_info": ("lucid_core.info", "model_info"),
    "predict": ("lucid_core.inference", "predict"),
    "save_model": ("lucid_core.checkpoint", "save_model"),
}

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "Detections",
    "ModelConfig",
    "ModelKey",
    "Results",
    "YOLOModel",
    "__version__",
    "build_model",
    "export_onnx",
    "import_checkpoint",
    "list_models",
    "load",
    "load_checkpoint",
    "load_model",
    "load_weights",
    "model_info",
    "predict",
    "save_model",
]

if TYPE_CHECKING:  # static view of the lazily resolved names
    from lucid_core.checkpoint import (
        Checkpoint,
        load,
        load_checkpoint,
        load_model,
        load_weights,
        save_model,
    )
    from lucid_core.errors import CheckpointError
    from lucid_core.inference import predict
    from lucid_core.info import model_info
    from lucid_core.interop import export_onnx, import_checkpoint
    from lucid_core.models import ModelConfig, ModelKey, YOLOModel, build_model, list_models
    from lucid_core.results import Detections, Results


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
