"""Decoding primitives: one-to-one top-k, class-aware NMS, rotated NMS, mask assembly and the decode defaults
(:func:`lucid_core.postprocess.postprocess` combines them per task)."""

from lucid_core.decode.defaults import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF, VAL_CONF
from lucid_core.decode.masks import assemble_masks
from lucid_core.decode.nms import decode_nms
from lucid_core.decode.rotated_nms import decode_rotated_nms, rotated_nms
from lucid_core.decode.selection import Selection
from lucid_core.decode.topk import decode_topk

__all__ = [
    "DEFAULT_IOU",
    "DEFAULT_MAX_DET",
    "PREDICT_CONF",
    "VAL_CONF",
    "Selection",
    "assemble_masks",
    "decode_nms",
    "decode_rotated_nms",
    "decode_topk",
    "rotated_nms",
]
