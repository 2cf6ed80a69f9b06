"""Geometry shared by models, objectives, decoders and data: anchors and box conversions."""

from lucid_core.geometry.anchors import make_anchors
from lucid_core.geometry.boxes import xywh_to_xyxy, xyxy_to_xywh

__all__ = ["make_anchors", "xywh_to_xyxy", "xyxy_to_xywh"]
