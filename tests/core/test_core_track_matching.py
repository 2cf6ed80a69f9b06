"""Association costs and the thresholded assignment of lucid_core.track.matching."""

from __future__ import annotations

import math

import numpy as np

from lucid_core.track.matching import box_iou, fuse_score, match, rotated_iou


def test_match_never_forces_a_pair_above_the_threshold() -> None:
    cost = np.array([[0.1, 0.9], [0.95, 0.85]])
    pairs, free_rows, free_cols = match(cost, 0.8)
    assert pairs.tolist() == [[0, 0]]
    assert free_rows.tolist() == [1] and free_cols.tolist() == [1]


def test_match_prefers_the_larger_total_margin() -> None:
    # two cheap-ish pairs beat one very cheap pair that blocks both (reject option: gain = thresh - cost)
    cost = np.array([[0.0, 0.2], [0.2, 1.0]])
    pairs, _, _ = match(cost, 0.8)
    assert sorted(map(tuple, pairs.tolist())) == [(0, 1), (1, 0)]
    cost = np.array([[0.0, 0.7], [0.7, 1.0]])
    pairs, free_rows, free_cols = match(cost, 0.8)
    assert pairs.tolist() == [[0, 0]] and free_rows.tolist() == [1] and free_cols.tolist() == [1]


def test_match_empty_sides() -> None:
    pairs, free_rows, free_cols = match(np.zeros((0, 3)), 0.5)
    assert pairs.shape == (0, 2) and free_rows.tolist() == [] and free_cols.tolist() == [0, 1, 2]
    pairs, free_rows, free_cols = match(np.zeros((2, 0)), 0.5)
    assert free_rows.tolist() == [0, 1] and free_cols.tolist() == []


def test_box_iou_and_score_fusion() -> None:
    a = np.array([[0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 0.0, 0.0]])
    b = np.array([[5.0, 0.0, 15.0, 10.0], [0.0, 0.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]])
    iou = box_iou(a, b)
    np.testing.assert_allclose(iou, [[1 / 3, 1, 0], [0, 0, 0]])
    fused = fuse_score(1 - iou, np.array([0.5, 0.9, 1.0]))
    np.testing.assert_allclose(fused[0], [1 - 1 / 6, 1 - 0.9, 1.0])


def test_rotated_iou() -> None:
    r = np.array([[50.0, 50.0, 40.0, 10.0, 0.4]])
    same_box_other_form = np.array([[50.0, 50.0, 10.0, 40.0, 0.4 + math.pi / 2]])
    crossed = np.array([[50.0, 50.0, 40.0, 10.0, 0.4 + math.pi / 2]])
    iou = rotated_iou(r, np.concatenate([r, same_box_other_form, crossed]))
    np.testing.assert_allclose(iou[0, :2], [1.0, 1.0], atol=1e-9)
    assert 0.1 < iou[0, 2] < 0.2  # a 40x10 cross: 100 / (400 + 400 - 100)
