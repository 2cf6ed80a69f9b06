"""In-training validation of detection: decode a val batch, map to original pixels, score with `COCOEvaluator`.

The steps are those of ``lucid_train.eval`` / ``lucid-eval``: the val dataset letterboxes with
``lucid_core.geometry.letterbox`` (``auto=False``, square ``imgsz``; its ``LetterboxInfo`` travels in
``batch["meta"]``), the eval-mode model's dense output is decoded by ``lucid_core.decode.postprocess`` (yolo26:
one-to-one top-k; others: NMS; val defaults conf 0.001, iou 0.7, max_det 300), boxes go back to original pixels with
``scale_boxes_back`` and are scored against ``CocoGroundTruth.from_source`` by ``COCOEvaluator`` (COCO protocol).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def default_decode(model: nn.Module, decode: str | None) -> str:
    """``topk`` for end-to-end models (yolo26 one-to-one branch), else ``nms``; an explicit choice wins."""
    if decode is not None:
        if decode not in ("topk", "nms"):
            raise ValueError(f"decode: expected 'topk', 'nms' or None, got {decode!r}")
        return decode
    return "topk" if bool(getattr(model, "end2end", False)) else "nms"


class BatchScorer:
    """Accumulates one validation pass batch by batch; :meth:`compute` returns the ``EvalResult``."""

    def __init__(
        self,
        source: Any,
        *,
        task: str,
        num_classes: int,
        conf: float = 0.001,
        iou: float = 0.7,
        max_det: int = 300,
        decode: str | None = None,
        ground_truth: Any = None,
    ) -> None:
        from lucid_train.eval import COCOEvaluator, CocoGroundTruth

        self.task = task
        self.num_classes = num_classes
        self.conf = conf
        self.iou = iou
        self.max_det = max_det
        self.decode = decode
        self.ground_truth = ground_truth if ground_truth is not None else CocoGroundTruth.from_source(source)
        self.evaluator = COCOEvaluator(self.ground_truth, iou_types=("bbox",))

    @torch.no_grad()
    def update(self, model: nn.Module, batch: dict[str, Any]) -> None:
        from lucid_core.decode import postprocess
        from lucid_core.geometry.letterbox import scale_boxes_back
        from lucid_core.results import Detections

        model.eval()
        images = batch["images"]
        x = images.float() / 255.0 if images.dtype == torch.uint8 else images.float()
        pred = model(x)
        proto = None
        if isinstance(pred, tuple):
            pred, proto = pred
        detections = postprocess(
            pred.float(),
            task=self.task,
            nc=self.num_classes,
            mode=default_decode(model, self.decode),
            conf=self.conf,
            iou=self.iou,
            max_det=self.max_det,
            proto=proto,
            input_hw=(int(x.shape[2]), int(x.shape[3])),
        )
        for det, meta in zip(detections, batch["meta"]):
            info = meta.get("letterbox")
            boxes = det.boxes.float().cpu()
            if info is not None:
                boxes = scale_boxes_back(boxes, info)
            self.evaluator.update(
                meta["image_id"],
                Detections(boxes=boxes, scores=det.scores.float().cpu(), labels=det.labels.cpu()),
            )

    def compute(self) -> Any:
        return self.evaluator.compute()
