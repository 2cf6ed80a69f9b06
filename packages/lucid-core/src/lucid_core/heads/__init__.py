"""Task heads: detect, segment, pose, oriented boxes (each with an optional end-to-end one-to-one branch)."""

from lucid_core.heads.detect import DetectHead
from lucid_core.heads.obb import OBBHead
from lucid_core.heads.pose import PoseHead
from lucid_core.heads.segment import SegmentHead

__all__ = ["DetectHead", "OBBHead", "PoseHead", "SegmentHead"]
