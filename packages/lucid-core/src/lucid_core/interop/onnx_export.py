"""ONNX export of a :class:`~lucid_core.models.YOLOModel` for all tasks, end-to-end (no NMS node) for YOLO26.

Graph outputs (input ``images``: ``(B, 3, H, W)`` float32 RGB in [0, 1], batch dimension dynamic by default):

- YOLOv8 / YOLO11 (NMS families): ``output0`` is the dense eval tensor ``(B, 4 + nc + extra, A)`` of
  docs/INTERFACES.md ("Eval mode"); NMS is left to the consumer (:func:`lucid_core.postprocess`).
- YOLO26 (end-to-end): the one-to-one branch is decoded *inside* the graph with ``TopK`` and no suppression
  (each anchor keeps its best class and the ``max_det`` best anchors are returned before the confidence
  threshold, which the consumer applies): ``output0`` is ``(B, max_det, 6 + extra)`` sorted by descending score, rows
  ``x1, y1, x2, y2, score, class`` then the task extras (pose: K×D decoded keypoints; segment: nm mask
  coefficients). OBB rows are ``cx, cy, w, h, score, class, θ`` (radians). ``max_det`` is capped at A.
- Segment models add ``proto`` ``(B, nm, H/4, W/4)``.

Exported with the TorchScript-based ``torch.onnx.export(..., dynamo=False)`` (no ``onnx`` import is needed in
lucid_core); the file is written atomically (temporary file + ``os.replace``).
"""

from __future__ import annotations

import copy
import os
import uuid
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from lucid_core.models import YOLOModel
from lucid_core.nn.fuse import fuse_model
from lucid_core.tasks import get_task

DEFAULT_OPSET = 17
DEFAULT_MAX_DET = 300
INPUT_NAME = "images"


def topk_detections(dense: Tensor, *, num_classes: int, task: str, max_det: int) -> Tensor:
    """One-to-one decode of a dense ``(B, 4 + nc + extra, A)`` tensor into ``(B, k, 6 + extra)``, k = min(max_det, A).

    Each anchor keeps its best class; the k highest-scoring anchors are returned in descending score order.
    """
    columns = dense.transpose(1, 2)  # (B, A, rows)
    k = min(max_det, int(columns.shape[1]))
    scores, labels = columns[..., 4 : 4 + num_classes].max(-1)  # (B, A)
    top_scores, top_idx = scores.topk(k, dim=1, largest=True, sorted=True)
    picked = columns.gather(1, top_idx.unsqueeze(-1).expand(-1, -1, columns.shape[-1]))
    top_labels = labels.gather(1, top_idx).to(picked.dtype)
    box = picked[..., :4]
    if not get_task(task).rotated:  # centre/size -> corners (rotated boxes keep centre, size and angle)
        half = box[..., 2:4] / 2
        box = torch.cat((box[..., :2] - half, box[..., :2] + half), -1)
    return torch.cat(
        (box, top_scores.unsqueeze(-1), top_labels.unsqueeze(-1), picked[..., 4 + num_classes :]), -1
    )


class ExportModule(nn.Module):
    """What the ONNX graph computes: the model in eval mode, plus the in-graph top-k for end-to-end models."""

    def __init__(self, model: YOLOModel, max_det: int = DEFAULT_MAX_DET, *, fuse: bool = True) -> None:
        super().__init__()
        if max_det < 1:
            raise ValueError(f"max_det must be >= 1, got {max_det}")
        self.model = copy.deepcopy(model).float().eval()
        self.end2end = bool(model.end2end)
        if self.end2end and not self.model.head.deployed and fuse:
            self.model.to_deployed()  # the deployed form: one-to-many branch and training-only parts dropped
        if fuse:  # inference form: every Conv+BN folded into one conv (same outputs within float rounding)
            fuse_model(self.model)
        self.max_det = max_det
        self.task = model.task
        self.num_classes = model.num_classes

    def forward(self, images: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        out = self.model(images)
        dense, proto = out if isinstance(out, tuple) else (out, None)
        if not isinstance(dense, Tensor):
            raise TypeError(f"export: the model returned {type(dense).__name__} in eval mode")
        if self.end2end:
            dense = topk_detections(dense, num_classes=self.num_classes, task=self.task, max_det=self.max_det)
        return (dense, proto) if proto is not None else dense


def _input_hw(imgsz: int | tuple[int, int], stride: int) -> tuple[int, int]:
    hw = (imgsz, imgsz) if isinstance(imgsz, int) else (int(imgsz[0]), int(imgsz[1]))
    if any(v <= 0 or v % stride for v in hw):
        raise ValueError(
            f"export_onnx: imgsz {imgsz!r} must be positive multiples of the largest stride {stride}"
        )
    return hw


def export_onnx(
    model: YOLOModel,
    path: str | os.PathLike[str],
    imgsz: int | tuple[int, int] = 640,
    dynamic_batch: bool = True,
    *,
    max_det: int = DEFAULT_MAX_DET,
    opset: int = DEFAULT_OPSET,
    fuse: bool = True,
    half: bool = False,
) -> Path:
    """Export ``model`` (left untouched) to ``path``; see the module docstring for the graph's outputs.

    ``imgsz``: the fixed input size (int or ``(h, w)``, multiples of the largest stride); the batch dimension is
    dynamic when ``dynamic_batch``. ``fuse`` (default) exports the inference form: BatchNorm folded into the
    convolutions and, for end-to-end models, only the one-to-one branch. ``half`` exports float16 weights with a
    float16 ``images`` input (traced on the CPU in float16). Returns the written path.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    h, w = _input_hw(imgsz, max(model.strides))
    module = ExportModule(model, max_det=max_det, fuse=fuse)
    dtype = torch.float16 if half else torch.float32
    module = module.to(dtype)
    example = torch.zeros(1, 3, h, w, dtype=dtype)
    with torch.no_grad():
        sample = module(example)
    output_names = ["output0", "proto"] if isinstance(sample, tuple) else ["output0"]
    dynamic_axes = {name: {0: "batch"} for name in (INPUT_NAME, *output_names)} if dynamic_batch else None
    # a unique sibling name written by a plain open() (ordinary permissions), then renamed over the target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with (
            warnings.catch_warnings()
        ):  # tracer warnings about shape arithmetic; the graph is checked by tests
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                (example,),
                str(tmp),
                input_names=[INPUT_NAME],
                output_names=output_names,
                dynamic_axes=dynamic_axes,
                opset_version=opset,
                dynamo=False,
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
