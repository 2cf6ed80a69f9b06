"""Official-protocol evaluation: ground truth for any layout, the evaluator, `evaluate_model`, and the typed entry
points of ``lucid-eval`` (`evaluate_checkpoint`, DOTA Task-1 `score_dota`), and classification accuracy."""

from lucid_train.eval.accuracy import AccuracyResult, AccuracyScorer, evaluate_accuracy
from lucid_train.eval.cli import EvalInputError, evaluate_checkpoint
from lucid_train.eval.coco_gt import COCO_KPT_SIGMAS, CocoGroundTruth, GroundTruthError, GtImage
from lucid_train.eval.dota import DotaScoring, evaluate_dota, score_dota
from lucid_train.eval.evaluator import BACKENDS, IOU_TYPES, COCOEvaluator, EvalResult, IouTypeResult
from lucid_train.eval.runner import ModelScorer, decode_paths, evaluate_model

__all__ = [
    "BACKENDS",
    "COCO_KPT_SIGMAS",
    "IOU_TYPES",
    "AccuracyResult",
    "AccuracyScorer",
    "COCOEvaluator",
    "CocoGroundTruth",
    "DotaScoring",
    "EvalInputError",
    "EvalResult",
    "GroundTruthError",
    "GtImage",
    "IouTypeResult",
    "ModelScorer",
    "decode_paths",
    "evaluate_accuracy",
    "evaluate_checkpoint",
    "evaluate_dota",
    "evaluate_model",
    "score_dota",
]
