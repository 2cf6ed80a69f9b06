"""From the model's dense eval tensor to per-image :class:`~lucid_core.results.Detections` (input pixels).

Input layout (docs/INTERFACES.md, "Eval mode"; shared/fixtures/README.md, ``output_unfused``):
``(B, 4 + nc + extra, A)`` with rows cx, cy, w, h (input pixels), nc class probabilities, then the task extras —
segment: nm mask coefficients (and ``proto`` ``(B, nm, H/4, W/4)``); pose: K×D keypoints already decoded to
pixels (x, y[, visibility probability]); obb: one angle θ in radians.

``mode="topk"`` is the one-to-one decode (no suppression), ``mode="nms"`` the class-aware NMS (rotated ProbIoU
NMS for obb). Keypoints are passed through unchanged. A task that decodes its output itself
(:meth:`Task.decode_output`, e.g. classify: probabilities ``(B, nc)`` → ``Detections.probs``) bypasses all this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from torch import Tensor

from lucid_core.decode.defaults import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF, VAL_CONF
from lucid_core.decode.nms import decode_nms
from lucid_core.decode.rotated_nms import decode_rotated_nms
from lucid_core.decode.selection import Selection, class_filter
from lucid_core.decode.topk import decode_topk
from lucid_core.geometry.boxes import xywh_to_xyxy
from lucid_core.geometry.letterbox import LetterboxInfo
from lucid_core.geometry.rotated import rboxes_to_xyxy
from lucid_core.results import Detections
from lucid_core.tasks.base import Task
from lucid_core.tasks.registry import TASKS, get_task

__all__ = ["DEFAULT_IOU", "DEFAULT_MAX_DET", "PREDICT_CONF", "VAL_CONF", "DecodeMode", "postprocess"]

DecodeMode = Literal["nms", "topk"]


def _check_rows(task: Task, nc: int, rows: int, expected: int | None) -> None:
    extra = rows - 4 - nc
    if expected is not None and extra != expected:
        raise ValueError(
            f"postprocess: task {task.name!r} with nc={nc} expects {4 + nc + expected} rows "
            f"(4 box + {nc} classes + {expected} extra), got {rows}"
        )


def postprocess(
    pred: Tensor | tuple[Tensor, Tensor],
    *,
    task: str,
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
        raise ValueError(f"postprocess: task must be one of {tuple(TASKS)}, got {task!r}")
    spec = get_task(task)
    decoded = spec.decode_output(pred, nc=nc)
    if decoded is not None:  # an image-level task (classify): its own decode, no boxes to select
        return decoded
    if mode not in ("nms", "topk"):
        raise ValueError(f"postprocess: mode must be 'nms' or 'topk', got {mode!r}")
    if pred.ndim != 3:
        raise ValueError(f"postprocess: pred must be (B, 4 + nc + extra, A), got {tuple(pred.shape)}")
    extra = int(pred.shape[1]) - 4 - nc
    if extra < 0:
        raise ValueError(
            f"postprocess: prediction has {int(pred.shape[1])} rows, fewer than 4 + nc = {4 + nc}"
        )
    expected, layout = spec.decode_layout(extra, kpt_shape=kpt_shape, proto=proto, input_hw=input_hw)
    _check_rows(spec, nc, int(pred.shape[1]), expected)
    class_ids = class_filter(classes, nc, pred.device)
    if retina_letterbox is not None and pred.shape[0] != 1:
        raise ValueError(f"postprocess: retina_letterbox describes one image, got a batch of {pred.shape[0]}")

    results: list[Detections] = []
    for b in range(pred.shape[0]):
        columns = pred[b].transpose(0, 1)  # (A, rows)
        scores = columns[:, 4 : 4 + nc]
        extras = columns[:, 4 + nc :]
        rboxes = spec.rotated_boxes(columns[:, :4], extras)
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
        det = spec.attach(
            det,
            extras[sel.anchor_idx],
            index=b,
            proto=proto,
            layout=layout,
            retina_letterbox=retina_letterbox,
        )
        results.append(det)
    return results
