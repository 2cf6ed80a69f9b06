"""Prediction of a batch of network-input images, decoded as ``lucid-predict`` decodes them."""

from __future__ import annotations

from torch import Tensor, nn

from lucid_core.decode import DEFAULT_IOU, PREDICT_CONF
from lucid_core.inference import forward_for_decode
from lucid_core.postprocess import postprocess
from lucid_core.results import Detections
from lucid_train.eval.runner import decode_paths


def predict_batch(
    model: nn.Module, images: Tensor, task: str, num_classes: int, max_det: int, decode: str | None = None
) -> list[Detections]:
    """One :class:`Detections` per image of ``images`` (float in [0, 1], on ``model``'s device), in input pixels,
    on the CPU.

    ``model`` is in eval mode. Decoded with the predict defaults (conf 0.25, iou 0.7) and ``max_det``; ``decode``
    None is NMS for every family (YOLO26: the one-to-many branch + NMS, the reference default).
    """
    path = decode_paths(model, decode)[0]
    output = forward_for_decode(model, images, path)
    output = tuple(t.float() for t in output) if isinstance(output, tuple) else output.float()
    detections = postprocess(
        output,
        task=task,
        nc=num_classes,
        mode=path,
        conf=PREDICT_CONF,
        iou=DEFAULT_IOU,
        max_det=max_det,
        kpt_shape=getattr(model, "kpt_shape", None),
        input_hw=(int(images.shape[2]), int(images.shape[3])),
    )
    return [d.to("cpu") for d in detections]
