"""Model registry and the ``YOLOModel`` class; families yolo26 (default), yolo11 and yolov8 are registered."""

from lucid_core.models.config import ModelConfig
from lucid_core.models.family import FamilySpec
from lucid_core.models.registry import ModelKey, build_model, get_family, list_models, register_family
from lucid_core.models.yolo import YOLOModel
from lucid_core.models.yolo11 import YOLO11
from lucid_core.models.yolo26 import YOLO26
from lucid_core.models.yolov8 import YOLOV8
from lucid_core.outputs import BranchOutput, TrainOutput

for _spec in (YOLO26, YOLO11, YOLOV8):
    register_family(_spec, replace=True)

__all__ = [
    "BranchOutput",
    "FamilySpec",
    "ModelConfig",
    "ModelKey",
    "TrainOutput",
    "YOLOModel",
    "build_model",
    "get_family",
    "list_models",
    "register_family",
]
