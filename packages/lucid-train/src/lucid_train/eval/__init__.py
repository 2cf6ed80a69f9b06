"""Official-protocol (COCO) evaluation: ground truth for any layout, the evaluator, `evaluate_model`, `lucid-eval`."""

from lucid_train.eval.coco_gt import COCO_KPT_SIGMAS, CocoGroundTruth, GroundTruthError, GtImage
from lucid_train.eval.evaluator import BACKENDS, IOU_TYPES, COCOEvaluator, EvalResult, IouTypeResult
from lucid_train.eval.runner import ModelScorer, decode_paths, evaluate_model

__all__ = [
    "BACKENDS",
    "COCO_KPT_SIGMAS",
    "IOU_TYPES",
    "COCOEvaluator",
    "CocoGroundTruth",
    "EvalResult",
    "GroundTruthError",
    "GtImage",
    "IouTypeResult",
    "ModelScorer",
    "decode_paths",
    "evaluate_model",
]
