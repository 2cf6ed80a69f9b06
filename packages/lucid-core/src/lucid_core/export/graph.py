"""The module every exporter traces: the fused eval model plus, per output kind, an in-graph top-k or NMS.

Outputs for an input ``(B, 3, H, W)`` float RGB in [0, 1]:

- ``"dense"``: the dense eval tensor ``(B, 4 + nc + extra, A)`` of docs/INTERFACES.md ("Eval mode") — for YOLO26
  of its one-to-one branch — decoded by the consumer (:func:`lucid_core.postprocess`).
- ``"topk"`` (YOLO26 only): the one-to-one branch decoded in the graph with ``TopK`` and no suppression (each
  anchor keeps its best class; the ``max_det`` best anchors, before any confidence threshold): ``(B, k, 6 + extra)``
  sorted by descending score, rows ``x1, y1, x2, y2, score, class`` then the task extras (OBB rows: ``cx, cy, w, h,
  score, class, θ``). k = min(max_det, A).
- ``"nms"`` (``nms=True``, axis-aligned tasks): the one-to-many branch with class-aware NMS in the graph: the same
  row layout, ``max_det`` rows per image padded with zero rows, scores above ``nms_conf``.

Segment models add ``proto`` ``(B, nm, H/4, W/4)``.
"""

from __future__ import annotations

import copy
from typing import Literal

import torch
from torch import Tensor, nn
from torchvision.ops import batched_nms

from lucid_core.models import YOLOModel
from lucid_core.nn.fuse import fuse_model
from lucid_core.tasks import get_task

__all__ = ["DEFAULT_MAX_DET", "ExportModule", "OutputKind", "nms_detections", "topk_detections"]

DEFAULT_MAX_DET = 300
OutputKind = Literal["dense", "topk", "nms"]
#: the in-graph NMS's defaults: validation's confidence floor and the decoders' IoU threshold
NMS_CONF = 0.001
NMS_IOU = 0.7


def _corners(box: Tensor, rotated: bool) -> Tensor:
    if rotated:  # rotated boxes keep centre, size and angle
        return box
    half = box[..., 2:4] / 2
    return torch.cat((box[..., :2] - half, box[..., :2] + half), -1)


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
    box = _corners(picked[..., :4], get_task(task).rotated)
    return torch.cat(
        (box, top_scores.unsqueeze(-1), top_labels.unsqueeze(-1), picked[..., 4 + num_classes :]), -1
    )


def nms_detections(
    dense: Tensor, *, num_classes: int, max_det: int, conf: float = NMS_CONF, iou: float = NMS_IOU
) -> Tensor:
    """Class-aware NMS of a dense ``(B, 4 + nc + extra, A)`` tensor (best class per anchor, scores > ``conf``)
    into ``(B, max_det, 6 + extra)`` rows ``x1, y1, x2, y2, score, class, extras`` padded with zero rows."""
    rows = []
    for columns in dense.transpose(1, 2):  # (A, rows) per image
        scores, labels = columns[:, 4 : 4 + num_classes].max(-1)
        keep = scores > conf
        columns, scores, labels = columns[keep], scores[keep], labels[keep]
        box = _corners(columns[:, :4], False)
        kept = batched_nms(box.float(), scores.float(), labels, iou)[:max_det]
        found = torch.cat(
            (
                box[kept],
                scores[kept].unsqueeze(-1),
                labels[kept].unsqueeze(-1).to(columns.dtype),
                columns[kept, 4 + num_classes :],
            ),
            -1,
        )
        pad = torch.zeros(max_det, found.shape[-1], dtype=found.dtype, device=found.device)
        rows.append(torch.cat((found, pad))[:max_det])
    return torch.stack(rows)


class ExportModule(nn.Module):
    """What an exported graph computes (module docstring): a fused eval-mode copy of ``model``, then ``output``.

    ``output`` None = ``"topk"`` for end-to-end models, else ``"dense"``. End-to-end models run their one-to-one
    branch (``branch``), the one-to-many branch for ``"nms"``. ``fuse`` folds BatchNorm and, on the one-to-one
    branch, drops the one-to-many branch (the deployed head). ``model`` is left untouched.
    """

    def __init__(
        self,
        model: YOLOModel,
        max_det: int = DEFAULT_MAX_DET,
        *,
        fuse: bool = True,
        output: OutputKind | None = None,
        nms_conf: float = NMS_CONF,
        nms_iou: float = NMS_IOU,
    ) -> None:
        super().__init__()
        if max_det < 1:
            raise ValueError(f"max_det must be >= 1, got {max_det}")
        kind: OutputKind = output if output is not None else ("topk" if model.end2end else "dense")
        if kind == "topk" and not model.end2end:
            raise ValueError("the top-k output needs an end-to-end (yolo26) model")
        if kind == "nms" and get_task(model.task).rotated:
            raise ValueError("in-graph NMS is axis-aligned: rotated-box (obb) models export the dense output")
        self.model = copy.deepcopy(model).float().eval()
        self.end2end = bool(model.end2end)
        self.output = kind
        self.branch: Literal["one2one", "one2many"] | None = (
            ("one2many" if kind == "nms" else "one2one") if self.end2end else None
        )
        if self.branch == "one2one" and not self.model.head.deployed and fuse:
            self.model.to_deployed()  # the deployed form: one-to-many branch and training-only parts dropped
        if fuse:  # inference form: every Conv+BN folded into one conv (same outputs within float rounding)
            fuse_model(self.model)
        self.max_det = max_det
        self.task = model.task
        self.num_classes = model.num_classes
        self.nms_conf, self.nms_iou = nms_conf, nms_iou
        self.eval()  # exporters restore the mode they found: keep it eval

    def forward(self, images: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        out = self.model(images, branch=self.branch) if self.branch is not None else self.model(images)
        dense, proto = out if isinstance(out, tuple) else (out, None)
        if not isinstance(dense, Tensor):
            raise TypeError(f"export: the model returned {type(dense).__name__} in eval mode")
        if self.output == "topk":
            dense = topk_detections(dense, num_classes=self.num_classes, task=self.task, max_det=self.max_det)
        elif self.output == "nms":
            dense = nms_detections(
                dense,
                num_classes=self.num_classes,
                max_det=self.max_det,
                conf=self.nms_conf,
                iou=self.nms_iou,
            )
        return (dense, proto) if proto is not None else dense


def input_hw(imgsz: int | tuple[int, int], stride: int) -> tuple[int, int]:
    """``imgsz`` as ``(h, w)``; each side a positive multiple of ``stride`` (else ``ValueError``)."""
    hw = (imgsz, imgsz) if isinstance(imgsz, int) else (int(imgsz[0]), int(imgsz[1]))
    if any(v <= 0 or v % stride for v in hw):
        raise ValueError(f"export: imgsz {imgsz!r} must be positive multiples of the largest stride {stride}")
    return hw
