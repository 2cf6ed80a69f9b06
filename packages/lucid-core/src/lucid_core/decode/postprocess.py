"""From the model's dense eval tensor to per-image :class:`~lucid_core.results.Detections` (input pixels).

Input layout (docs/INTERFACES.md, "Eval mode"; shared/fixtures/README.md, ``output_unfused``):
``(B, 4 + nc + extra, A)`` with rows cx, cy, w, h (input pixels), nc class probabilities, then the task extras —
segment: nm mask coefficients (and ``proto`` ``(B, nm, H/4, W/4)``); pose: K×D keypoints already decoded to
pixels (x, y[, visibility probability]); obb: one angle θ in radians.

``mode="topk"`` is the one-to-one decode (no suppression), ``mode="nms"`` the class-aware NMS (rotated ProbIoU
NMS for obb). Keypoints are passed through unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from lucid_core.decode.masks import assemble_masks, assemble_masks_retina
from lucid_core.decode.nms import decode_nms
from lucid_core.decode.rotated_nms import decode_rotated_nms
from lucid_core.decode.selection import Selection, class_filter
from lucid_core.decode.topk import decode_topk
from lucid_core.geometry.boxes import xywh_to_xyxy
from lucid_core.geometry.letterbox import LetterboxInfo, scale_boxes_back
from lucid_core.geometry.rotated import rboxes_to_xyxy
from lucid_core.results import Detections

Task = Literal["detect", "segment", "pose", "obb"]
DecodeMode = Literal["nms", "topk"]
TASKS: tuple[str, ...] = ("detect", "segment", "pose", "obb")

# Documented defaults (issue 3): validation conf 0.001 / iou 0.7, prediction conf 0.25 / iou 0.7, max_det 300.
VAL_CONF = 0.001
PREDICT_CONF = 0.25
DEFAULT_IOU = 0.7
DEFAULT_MAX_DET = 300


def _extra_rows(
    task: str, nc: int, rows: int, kpt_shape: tuple[int, int] | None, proto: Tensor | None
) -> int:
    extra = rows - 4 - nc
    if extra < 0:
        raise ValueError(f"postprocess: prediction has {rows} rows, fewer than 4 + nc = {4 + nc}")
    expected: int | None
    if task == "detect":
        expected = 0
    elif task == "obb":
        expected = 1
    elif task == "pose":
        expected = None if kpt_shape is None else kpt_shape[0] * kpt_shape[1]
    else:  # segment
        if proto is None:
            raise ValueError("postprocess: task 'segment' needs proto (B, nm, Hp, Wp)")
        expected = int(proto.shape[1])
    if expected is not None and extra != expected:
        raise ValueError(
            f"postprocess: task {task!r} with nc={nc} expects {4 + nc + expected} rows "
            f"(4 box + {nc} classes + {expected} extra), got {rows}"
        )
    return extra


def postprocess(
    pred: Tensor | tuple[Tensor, Tensor],
    *,
    task: Task | str,
    nc: int,
    mode: DecodeMode | str = "nms",
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    proto: Tensor | None = None,
    kpt_shape: tuple[int, int] | None = None,
    input_hw: tuple[int, int] | None = None,
    multi_label: bool = False,
    retina_letterbox: LetterboxInfo | None = None,
    classes: Sequence[int] | Tensor | None = None,
    agnostic: bool = False,
) -> list[Detections]:
    """Decode ``pred`` ``(B, 4 + nc + extra, A)`` into one :class:`Detections` per image, in input pixels.

    ``pred`` may also be the ``(pred, proto)`` pair a segment model returns. ``input_hw`` (needed for masks)
    defaults to 4 × the prototype size. ``multi_label`` applies to NMS only.

    ``classes``: keep only detections of these class ids (the reference's ``classes=``: filtered before NMS and
    ``max_det``, and before top-k's selection); ``agnostic``: class-agnostic NMS, or one class per anchor in
    top-k (the reference's ``agnostic_nms=``). An empty list or an id outside ``0 .. nc-1`` is a ValueError.

    Segment masks follow the reference predictor (``lucid_core.decode.masks``): detections whose mask is empty
    are dropped. Masks are (N, H, W) at the input size, or — with ``retina_letterbox`` (one image per call, the
    ``retina_masks`` path) — (N, H0, W0) at that letterbox's original size.
    """
    if isinstance(pred, tuple):
        pred, proto = pred[0], pred[1] if proto is None else proto
    if task not in TASKS:
        raise ValueError(f"postprocess: task must be one of {TASKS}, got {task!r}")
    if mode not in ("nms", "topk"):
        raise ValueError(f"postprocess: mode must be 'nms' or 'topk', got {mode!r}")
    if pred.ndim != 3:
        raise ValueError(f"postprocess: pred must be (B, 4 + nc + extra, A), got {tuple(pred.shape)}")
    extra = _extra_rows(task, nc, int(pred.shape[1]), kpt_shape, proto)
    class_ids = class_filter(classes, nc, pred.device)
    if retina_letterbox is not None and pred.shape[0] != 1:
        raise ValueError(f"postprocess: retina_letterbox describes one image, got a batch of {pred.shape[0]}")
    if task == "pose" and kpt_shape is None:
        if extra % 3:
            raise ValueError(f"postprocess: pose with {extra} keypoint rows needs kpt_shape")
        kpt_shape = (extra // 3, 3)
    if task == "segment" and input_hw is None:
        assert proto is not None
        input_hw = (int(proto.shape[2]) * 4, int(proto.shape[3]) * 4)

    results: list[Detections] = []
    for b in range(pred.shape[0]):
        columns = pred[b].transpose(0, 1)  # (A, rows)
        scores = columns[:, 4 : 4 + nc]
        extras = columns[:, 4 + nc :]
        rboxes = torch.cat((columns[:, :4], extras[:, :1]), 1) if task == "obb" else None
        boxes = rboxes_to_xyxy(rboxes) if rboxes is not None else xywh_to_xyxy(columns[:, :4])
        sel: Selection
        if mode == "topk":
            sel = decode_topk(scores, conf=conf, max_det=max_det, classes=class_ids, agnostic=agnostic)
        elif rboxes is not None:
            sel = decode_rotated_nms(
                rboxes,
                scores,
                conf=conf,
                iou=iou,
                max_det=max_det,
                multi_label=multi_label,
                classes=class_ids,
                agnostic=agnostic,
            )
        else:
            sel = decode_nms(
                boxes,
                scores,
                conf=conf,
                iou=iou,
                max_det=max_det,
                multi_label=multi_label,
                classes=class_ids,
                agnostic=agnostic,
            )
        det = Detections(
            boxes=boxes[sel.anchor_idx].float(),
            scores=sel.scores.float(),
            labels=sel.labels.long(),
        )
        if rboxes is not None:
            det.rboxes = rboxes[sel.anchor_idx].float()
        if task == "pose":
            assert kpt_shape is not None
            kpts = extras[sel.anchor_idx].float().reshape(len(sel), kpt_shape[0], kpt_shape[1])
            if kpt_shape[1] == 2:  # no visibility channel: report every keypoint as visible
                kpts = torch.cat((kpts, torch.ones_like(kpts[..., :1])), -1)
            det.keypoints = kpts
        if task == "segment":
            assert proto is not None and input_hw is not None
            coefficients = extras[sel.anchor_idx]
            if retina_letterbox is not None:
                orig_boxes = scale_boxes_back(det.boxes, retina_letterbox)
                det.masks = assemble_masks_retina(proto[b], coefficients, orig_boxes, retina_letterbox)
            else:
                det.masks = assemble_masks(proto[b], coefficients, det.boxes, input_hw)
            nonempty = det.masks.flatten(1).any(1)
            if not bool(nonempty.all()):  # rule 5: a detection whose cropped mask is empty is dropped
                det = Detections(
                    boxes=det.boxes[nonempty],
                    scores=det.scores[nonempty],
                    labels=det.labels[nonempty],
                    masks=det.masks[nonempty],
                )
        results.append(det)
    return results
