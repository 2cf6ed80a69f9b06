"""Training augmentations: one module per mechanism, composed by `pipeline.AugmentPipeline`."""

from lucid_data.augment.affine import random_affine, random_affine_matrix
from lucid_data.augment.copy_paste import copy_paste_flip
from lucid_data.augment.flip import flip_horizontal, flip_vertical
from lucid_data.augment.geometry import (
    canonical_rboxes,
    clip_polygon,
    polygons_to_min_area_rboxes,
    rboxes_to_corners,
    transform_points,
    warp_targets,
)
from lucid_data.augment.hsv import augment_hsv
from lucid_data.augment.letterbox import letterbox_train, resize_long_side
from lucid_data.augment.mixup import mixup
from lucid_data.augment.mosaic import concat_targets, mosaic4
from lucid_data.augment.pipeline import AugmentConfig, AugmentPipeline

__all__ = [
    "AugmentConfig",
    "AugmentPipeline",
    "augment_hsv",
    "canonical_rboxes",
    "clip_polygon",
    "concat_targets",
    "copy_paste_flip",
    "flip_horizontal",
    "flip_vertical",
    "letterbox_train",
    "mixup",
    "mosaic4",
    "polygons_to_min_area_rboxes",
    "random_affine",
    "random_affine_matrix",
    "rboxes_to_corners",
    "resize_long_side",
    "transform_points",
    "warp_targets",
]
