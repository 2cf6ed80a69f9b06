"""Property tests (hypothesis) of the augmentation geometry: every annotation stays inside the canvas or is
dropped / marked invisible; flips are involutions (keypoint order included); rotated refit keeps the area of
uncut rectangles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lucid_data.augment.affine import random_affine
from lucid_data.augment.flip import flip_horizontal, flip_vertical
from lucid_data.augment.geometry import (
    canonical_rboxes,
    clip_polygon,
    polygons_to_min_area_rboxes,
    rboxes_to_corners,
    translation,
    warp_targets,
)
from lucid_data.augment.mosaic import mosaic4
from lucid_data.collate import collate
from lucid_data.targets import Targets, centre_form

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _random_targets(rng: np.random.Generator, n: int, hw: tuple[int, int], k: int = 4) -> Targets:
    """n rotated rectangles (anywhere, partly outside too) with polygons = their corners and k keypoints."""
    h, w = hw
    cx = rng.uniform(-0.2 * w, 1.2 * w, n)
    cy = rng.uniform(-0.2 * h, 1.2 * h, n)
    rw, rh = rng.uniform(3, 0.6 * w, n), rng.uniform(3, 0.6 * h, n)
    theta = rng.uniform(0, math.pi / 2, n)
    rboxes = np.stack((cx, cy, rw, rh, theta), -1)
    corners = rboxes_to_corners(rboxes)
    boxes = np.concatenate((corners.min(1), corners.max(1)), -1)
    kpt = np.concatenate((rng.uniform(-0.2, 1.2, (n, k, 2)) * [w, h], rng.integers(0, 3, (n, k, 1))), -1)
    return Targets(
        boxes=boxes,
        labels=rng.integers(0, 5, n),
        polygons=list(corners),
        keypoints=kpt,
        rboxes=rboxes,
        orig_size=hw,
    )


def _assert_inside(t: Targets, hw: tuple[int, int]) -> None:
    h, w = hw
    tol = 1e-3
    assert (t.boxes[:, 0] >= -tol).all() and (t.boxes[:, 2] <= w + tol).all()
    assert (t.boxes[:, 1] >= -tol).all() and (t.boxes[:, 3] <= h + tol).all()
    assert (t.boxes[:, 2] - t.boxes[:, 0] > 2).all() and (t.boxes[:, 3] - t.boxes[:, 1] > 2).all()
    for p in t.polygons or []:
        assert len(p) >= 3
        assert (p[:, 0] >= -tol).all() and (p[:, 0] <= w + tol).all()
        assert (p[:, 1] >= -tol).all() and (p[:, 1] <= h + tol).all()
    if t.keypoints is not None and len(t):
        vis = t.keypoints[..., 2] > 0
        x, y = t.keypoints[..., 0], t.keypoints[..., 1]
        assert ((x >= -tol) & (x <= w + tol) & (y >= -tol) & (y <= h + tol))[vis].all()
    if t.rboxes is not None and len(t):
        # canonical form of the reference (fixture README, label convention): w >= h, θ ∈ [−π/4, 3π/4)
        assert ((t.rboxes[:, 4] >= -math.pi / 4 - 1e-6) & (t.rboxes[:, 4] < 3 * math.pi / 4)).all()
        assert (t.rboxes[:, 2] >= t.rboxes[:, 3] * (1 - 1e-5)).all()
        # the refit is the minimum-area rectangle of the clipped (inside) part: its centre is inside; its corners
        # may stick out where the cut is oblique (a rectangle around a corner-cut triangle), never its centre
        cx, cy = t.rboxes[:, 0], t.rboxes[:, 1]
        assert ((cx >= -tol) & (cx <= w + tol) & (cy >= -tol) & (cy <= h + tol)).all()
        assert (t.rboxes[:, 2] > 0).all() and (t.rboxes[:, 3] > 0).all()


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 6),
    degrees=st.floats(0, 180),
    shear=st.floats(0, 20),
    perspective=st.sampled_from([0.0, 0.0005]),
    scale=st.floats(0, 0.9),
    mode=st.sampled_from(["rboxes", "polygons", "boxes", "keypoints"]),
)
def test_random_affine_keeps_every_annotation_inside_or_drops_it(
    seed: int, n: int, degrees: float, shear: float, perspective: float, scale: float, mode: str
) -> None:
    rng = np.random.default_rng(seed)
    hw = (int(rng.integers(40, 120)), int(rng.integers(40, 120)))
    t = _random_targets(rng, n, hw)
    if mode != "rboxes":
        t.rboxes = None
    if mode not in ("polygons", "rboxes"):
        t.polygons = None
    if mode != "keypoints":
        t.keypoints = None
    image = np.zeros((*hw, 3), np.uint8)
    out_hw = (64, 64)
    warped, moved = random_affine(
        image,
        t,
        rng,
        out_hw=out_hw,
        degrees=degrees,
        translate=0.3,
        scale=scale,
        shear=shear,
        perspective=perspective,
    )
    assert warped.shape == (*out_hw, 3)
    assert len(moved) <= n
    _assert_inside(moved, out_hw)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_mosaic_keeps_annotations_inside_the_double_canvas(seed: int) -> None:
    rng = np.random.default_rng(seed)
    s = 48
    images, targets = [], []
    for _ in range(4):
        hw = (int(rng.integers(10, s + 1)), int(rng.integers(10, s + 1)))
        hw = (hw[0], s) if rng.random() < 0.5 else (s, hw[1])
        images.append(np.full((*hw, 3), int(rng.integers(0, 255)), np.uint8))
        targets.append(_random_targets(rng, int(rng.integers(0, 4)), hw))
    canvas, merged = mosaic4(images, targets, rng, s)
    assert canvas.shape == (2 * s, 2 * s, 3)
    _assert_inside(merged, (2 * s, 2 * s))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 5), k=st.integers(1, 6))
def test_flip_twice_is_identity_including_keypoint_order(seed: int, n: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    hw = (int(rng.integers(20, 90)), int(rng.integers(20, 90)))
    t = _random_targets(rng, n, hw, k)
    t.rboxes = canonical_rboxes(t.rboxes).astype(np.float32)
    flip_idx = list(rng.permutation(k))
    # a flip permutation is an involution (left ↔ right): build one from random pairs
    perm = list(range(k))
    for a, b in zip(flip_idx[0::2], flip_idx[1::2]):
        perm[a], perm[b] = b, a
    image = rng.integers(0, 255, (*hw, 3), dtype=np.uint8)
    once_img, once = flip_horizontal(image, t, perm)
    twice_img, twice = flip_horizontal(once_img, once, perm)
    np.testing.assert_array_equal(twice_img, image)
    np.testing.assert_allclose(twice.boxes, t.boxes, atol=1e-4)
    np.testing.assert_allclose(twice.keypoints, t.keypoints, atol=1e-4)
    for a, b in zip(twice.polygons or [], t.polygons or []):
        np.testing.assert_allclose(a, b, atol=1e-4)
    np.testing.assert_allclose(rboxes_to_corners(twice.rboxes), rboxes_to_corners(t.rboxes), atol=1e-3)
    v_img, v = flip_vertical(*flip_vertical(image, t))
    np.testing.assert_array_equal(v_img, image)
    np.testing.assert_allclose(v.keypoints, t.keypoints, atol=1e-4)


def test_a_flip_mirrors_the_centre_form_in_float32_and_the_batch_is_made_from_it() -> None:
    width = 96
    t = Targets(boxes=[[93.37, 10.0, 96.0, 20.0], [0.0, 3.1, 7.3, 9.9]], labels=[0, 1])
    before = centre_form(t.boxes)
    image = np.zeros((40, width, 3), np.uint8)
    _, out = flip_horizontal(image, t)
    np.testing.assert_array_equal(
        out.boxes[:, [0, 2]], np.float32(width) - t.boxes[:, [2, 0]]
    )  # exact mirror
    expected = before.copy()
    expected[:, 0] = np.float32(width) - before[:, 0]
    assert out.box_centres is not None
    np.testing.assert_array_equal(out.box_centres, expected)  # not the centre form of the mirrored corners
    batch = collate([{"image": torch.zeros((3, 40, width), dtype=torch.uint8), "targets": out, "meta": {}}])
    scale = np.array([width, 40, width, 40], np.float32)
    np.testing.assert_array_equal(batch["bboxes"].numpy(), expected / scale)
    _, v = flip_vertical(np.zeros((40, width, 3), np.uint8), out)
    assert v.box_centres is not None
    np.testing.assert_array_equal(v.box_centres[:, 1], np.float32(40) - expected[:, 1])
    np.testing.assert_array_equal(v.box_centres[:, 0], expected[:, 0])  # the earlier mirror is kept


def test_box_centres_follow_select_and_copy_and_are_reset_by_a_warp() -> None:
    t = Targets(
        boxes=[[1, 2, 5, 6], [10, 10, 20, 30]], labels=[0, 1], box_centres=[[3, 4, 4, 4], [15, 20, 10, 20]]
    )
    np.testing.assert_array_equal(t.select([1]).centres(), [[15, 20, 10, 20]])
    copied = t.copy()
    assert copied.box_centres is not None and copied.box_centres is not t.box_centres
    assert warp_targets(t, translation(1.0, 0.0), (40, 40)).box_centres is None
    with pytest.raises(ValueError, match="box_centres has 1 rows"):
        Targets(boxes=[[1, 2, 5, 6], [10, 10, 20, 30]], labels=[0, 1], box_centres=[[3, 4, 4, 4]])


def test_horizontal_flip_swaps_keypoints_by_flip_idx() -> None:
    kpt = np.array([[[10, 5, 2], [30, 5, 2], [20, 5, 0]]], np.float32)  # left, right, unlabelled
    t = Targets(boxes=[[10, 5, 30, 6]], labels=[0], keypoints=kpt)
    _, out = flip_horizontal(np.zeros((10, 100, 3), np.uint8), t, [1, 0, 2])
    # the new "left" keypoint is the mirrored old right one (100 - 30), unlabelled stays 0 and unmoved
    np.testing.assert_allclose(out.keypoints[0], [[70, 5, 2], [90, 5, 2], [20, 5, 0]])
    np.testing.assert_allclose(out.boxes[0], [70, 5, 90, 6])


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    degrees=st.floats(-180, 180),
    scale=st.floats(0.5, 1.5),
)
def test_rotated_refit_preserves_area_of_uncut_rectangles(seed: int, degrees: float, scale: float) -> None:
    rng = np.random.default_rng(seed)
    w, h = rng.uniform(5, 20), rng.uniform(5, 20)
    rbox = np.array([[100, 100, w, h, rng.uniform(0, math.pi / 2)]], np.float32)
    t = Targets(boxes=[[0, 0, 1, 1]], labels=[0], rboxes=rbox)
    a = math.radians(degrees)
    m = np.array(
        [
            [scale * math.cos(a), -scale * math.sin(a), 0],
            [scale * math.sin(a), scale * math.cos(a), 0],
            [0, 0, 1],
        ]
    )
    m[:2, 2] = np.array([100, 100]) - m[:2, :2] @ np.array(
        [100, 100]
    )  # rotate about the centre: stays inside
    out = warp_targets(t, m, (200, 200))
    assert len(out) == 1
    np.testing.assert_allclose(out.rboxes[0, 2] * out.rboxes[0, 3], w * h * scale**2, rtol=1e-3)
    np.testing.assert_allclose(out.rboxes[0, :2], [100, 100], atol=1e-3)


def test_cut_rotated_box_is_refitted_to_the_clipped_part() -> None:
    # axis-aligned 40x20 box centred on the right edge: half of it survives
    t = Targets(boxes=[[80, 40, 120, 60]], labels=[0], rboxes=[[100, 50, 40, 20, 0]])
    out = warp_targets(t, np.eye(3), (100, 100))
    np.testing.assert_allclose(out.rboxes[0, 2] * out.rboxes[0, 3], 20 * 20, rtol=1e-4)
    np.testing.assert_allclose(out.boxes[0], [80, 40, 100, 60], atol=1e-4)


def test_a_cut_rotated_box_keeps_its_angle_and_shrinks_along_its_axes() -> None:
    """A 60 x 10 box at 30 degrees whose right end is cut off by the canvas edge x = 100: the angle and the short
    side stay, the long side runs from the kept end to the farthest point of the cut (a = 12.5 / cos 30 along the
    box's axis), and the centre moves along that axis. A minimum-area refit of the cut shape would turn it."""
    theta = math.pi / 6
    t = Targets(boxes=[[60, 30, 120, 70]], labels=[0], rboxes=[[90, 50, 60, 10, theta]])
    out = warp_targets(t, np.eye(3), (100, 100))
    a_max = 12.5 / math.cos(theta)
    shift = (-30 + a_max) / 2
    expected = [90 + shift * math.cos(theta), 50 + shift * math.sin(theta), 30 + a_max, 10, theta]
    np.testing.assert_allclose(out.rboxes[0], expected, atol=1e-3)
    # a 40 x 30 box with only a corner wedge inside: the minimum-area refit of the wedge turns to the border
    # (θ = π/2), the box keeps its own angle (π/6, canonical π/6 + π/2 once its sides swap)
    wedge = np.array([[112, 50, 40, 30, theta]])
    corners = rboxes_to_corners(wedge)[0]
    t = Targets(boxes=[[*corners.min(0), *corners.max(0)]], labels=[0], rboxes=wedge)
    kept = warp_targets(t, np.eye(3), (100, 100)).rboxes[0]
    assert abs(kept[4] - (theta + math.pi / 2)) < 1e-5
    refit = polygons_to_min_area_rboxes([clip_polygon(corners, 100, 100)])[0]
    assert abs(refit[4] - math.pi / 2) < 1e-5


def test_a_rotated_box_keeps_the_polygon_area_threshold() -> None:
    """A 40 x 40 instance with 3 px (7.5 % of its area) left inside the canvas: kept as a rotated box (the 1 %
    threshold of instances defined by polygons, as the reference's rotated-box training losses show), dropped as
    an axis-aligned box (10 %)."""
    rotated = Targets(boxes=[[97, 30, 137, 70]], labels=[0], rboxes=[[117, 50, 40, 40, 0.0]])
    kept = warp_targets(rotated, np.eye(3), (100, 100))
    assert len(kept) == 1
    np.testing.assert_allclose(kept.boxes[0], [97, 30, 100, 70], atol=1e-4)
    assert len(warp_targets(Targets(boxes=[[97, 30, 137, 70]], labels=[0]), np.eye(3), (100, 100))) == 0


def test_keypoints_outside_are_marked_invisible_and_degenerate_instances_dropped() -> None:
    kpt = np.array([[[5, 5, 2], [150, 5, 2]], [[1, 1, 1], [2, 2, 1]]], np.float32)
    t = Targets(boxes=[[0, 0, 50, 50], [98, 0, 140, 40]], labels=[0, 1], keypoints=kpt)
    out = warp_targets(t, np.eye(3), (100, 100))
    assert out.labels.tolist() == [0]  # the second keeps a 2-px sliver: dropped (min size 2, area ratio)
    np.testing.assert_allclose(out.keypoints[0], [[5, 5, 2], [0, 0, 0]])


@pytest.mark.parametrize("width,height", [(10, 10), (37, 5)])
def test_clip_polygon_of_a_covering_square_is_the_canvas(width: int, height: int) -> None:
    square = np.array([[-5, -5], [50, -5], [50, 50], [-5, 50]], np.float64)
    clipped = clip_polygon(square, width, height)
    assert {tuple(p) for p in clipped.tolist()} == {(0, 0), (width, 0), (width, height), (0, height)}


def test_min_area_refit_matches_the_rectangle_it_was_built_from() -> None:
    rbox = np.array([[30, 40, 20, 8, 0.3]])
    refit = polygons_to_min_area_rboxes(list(rboxes_to_corners(rbox)))
    np.testing.assert_allclose(refit, rbox, atol=1e-3)


def test_translated_boxes_equal_their_transformed_corners() -> None:
    """The translation shortcut of `warp_targets` gives the values of moving the 4 corners (clip and filter as ever),
    also for boxes given with swapped corners."""
    from lucid_data.augment.geometry import candidate_mask, transform_points, translation

    rng = np.random.default_rng(4)
    xy = rng.uniform(-50, 150, (40, 4))
    boxes = xy.astype(np.float32)
    t = Targets(boxes=boxes, labels=np.arange(40) % 3)
    for dx, dy in ((13.25, -7.5), (-60.0, 31.0), (0.0, 0.0)):
        m = translation(dx, dy)
        out = warp_targets(t, m, (100, 120))
        b = boxes.astype(np.float64)
        corners = np.stack((b[:, [0, 1]], b[:, [2, 1]], b[:, [2, 3]], b[:, [0, 3]]), 1)
        moved = transform_points(corners, m)
        before = np.concatenate((moved.min(1), moved.max(1)), 1)
        after = before.copy()
        after[:, 0::2] = after[:, 0::2].clip(0, 120)
        after[:, 1::2] = after[:, 1::2].clip(0, 100)
        keep = candidate_mask(before, after)
        np.testing.assert_array_equal(out.boxes, after[keep].astype(np.float32))
        np.testing.assert_array_equal(out.labels, t.labels[keep])


def test_boxes_only_mosaic_placement_equals_warping_each_image() -> None:
    """`mosaic4_targets` places boxes-only targets in one vectorised pass: the values, order and filter of moving
    each image's targets with `warp_targets` and concatenating."""
    from lucid_data.augment.geometry import translation
    from lucid_data.augment.mosaic import concat_targets, mosaic4_layout, mosaic4_targets

    rng = np.random.default_rng(8)
    shapes = [(48, 64), (64, 40), (30, 64), (64, 64)]
    targets = []
    for k, (h, w) in enumerate(shapes):
        n = int(rng.integers(0, 6))
        xy = rng.uniform(0, 1, (n, 4)) * np.array([w, h, w, h])
        targets.append(
            Targets(boxes=xy, labels=rng.integers(0, 3, n), iscrowd=rng.random(n) < 0.3, image_id=k)
        )
    for draw in range(10):
        layout = mosaic4_layout(shapes, np.random.default_rng(draw), 64)
        fast = mosaic4_targets(targets, layout)
        n = layout.size
        each = [
            warp_targets(t, translation(x1a - x1b, y1a - y1b), (n, n))
            for t, (x1a, y1a, _, _, x1b, y1b, _, _) in zip(targets, layout.tiles)
        ]
        slow = concat_targets(each, targets[0])
        np.testing.assert_array_equal(fast.boxes, slow.boxes)
        np.testing.assert_array_equal(fast.labels, slow.labels)
        np.testing.assert_array_equal(fast.iscrowd, slow.iscrowd)
        assert fast.image_id == slow.image_id == 0 and fast.masks is None
