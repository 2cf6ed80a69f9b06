"""ProbIoU and rotated-box geometry: known properties (shared/fixtures/README.md, OBB post-processing)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lucid_core.geometry.rotated import (
    polygons_to_rboxes,
    probiou,
    rboxes_to_polygons,
    rboxes_to_xyxy,
)


def test_probiou_identical_boxes_is_nearly_one() -> None:
    boxes = torch.tensor([[10.0, 20.0, 30.0, 8.0, 0.3], [100.0, 50.0, 5.0, 40.0, -0.7]])
    iou = probiou(boxes, boxes, pairwise=False)
    # Bd is clamped to >= eps, so Hd = sqrt(1 - exp(-eps) + eps) is about sqrt(2e-7) (float32 rounding aside)
    assert bool(((iou > 0.999) & (iou < 1.0)).all())


def test_probiou_symmetric_and_pairwise_matches_elementwise() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.cat(
        (
            torch.rand(6, 2, generator=g) * 50,
            torch.rand(6, 2, generator=g) * 30 + 2,
            torch.rand(6, 1, generator=g) * 3,
        ),
        1,
    )
    b = torch.cat(
        (
            torch.rand(4, 2, generator=g) * 50,
            torch.rand(4, 2, generator=g) * 30 + 2,
            torch.rand(4, 1, generator=g) * 3,
        ),
        1,
    )
    m = probiou(a, b)
    assert m.shape == (6, 4)
    assert torch.allclose(m, probiou(b, a).T, atol=1e-6)
    elem = probiou(a[:, None].expand(6, 4, 5), b[None].expand(6, 4, 5), pairwise=False)
    assert torch.allclose(m, elem)
    assert bool(((m >= 0) & (m <= 1)).all())


def test_probiou_rotation_by_pi_and_side_swap_are_the_same_box() -> None:
    box = torch.tensor([[40.0, 40.0, 30.0, 10.0, 0.2]])
    turned = box.clone()
    turned[0, 4] += math.pi
    swapped = torch.tensor([[40.0, 40.0, 10.0, 30.0, 0.2 + math.pi / 2]])
    ref = probiou(box, box)
    assert torch.allclose(probiou(box, turned), ref, atol=1e-6)
    assert torch.allclose(probiou(box, swapped), ref, atol=1e-5)


def test_probiou_decreases_with_distance_and_vanishes_far_away() -> None:
    base = torch.tensor([[0.0, 0.0, 20.0, 20.0, 0.0]])
    shifted = torch.tensor([[dx, 0.0, 20.0, 20.0, 0.0] for dx in (0.0, 2.0, 5.0, 10.0, 20.0, 1000.0)])
    values = probiou(base, shifted)[0]
    assert bool((values[1:] < values[:-1]).all())
    assert float(values[-1]) < 1e-6


def test_probiou_rejects_wrong_shape() -> None:
    with pytest.raises(ValueError, match="last dimension 5"):
        probiou(torch.zeros(3, 4), torch.zeros(3, 5))


def test_polygons_corner_order_and_hull() -> None:
    rb = torch.tensor([[10.0, 20.0, 8.0, 4.0, 0.0], [0.0, 0.0, 2.0, 2.0, math.pi / 4]])
    poly = rboxes_to_polygons(rb)
    expected0 = torch.tensor([[14.0, 22.0], [14.0, 18.0], [6.0, 18.0], [6.0, 22.0]])
    assert torch.allclose(poly[0], expected0)
    r = math.sqrt(2)
    assert torch.allclose(rboxes_to_xyxy(rb)[1], torch.tensor([-r, -r, r, r]), atol=1e-6)
    assert torch.allclose(rboxes_to_xyxy(rb)[0], torch.tensor([6.0, 18.0, 14.0, 22.0]))


def test_rboxes_to_polygons_numpy_arrays_stay_numpy_in_their_dtype() -> None:
    """One definition for tensors and arrays: an array is answered with NumPy in its dtype (the data pipeline's
    float64 labels keep NumPy's cos/sin bits), a tensor with torch; the two agree to float64 rounding."""
    rng = np.random.default_rng(0)
    rb = np.concatenate(
        [rng.uniform(0, 640, (64, 2)), rng.uniform(1, 200, (64, 2)), rng.uniform(-4, 4, (64, 1))], 1
    )
    corners = rboxes_to_polygons(rb)
    assert isinstance(corners, np.ndarray) and corners.dtype == np.float64 and corners.shape == (64, 4, 2)
    by_torch = rboxes_to_polygons(torch.from_numpy(rb)).numpy()
    assert np.abs(corners - by_torch).max() < 1e-9
    assert rboxes_to_polygons(rb.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="last dimension 5"):
        rboxes_to_polygons(rb[:, :4])


def test_polygons_to_rboxes_round_trip() -> None:
    rb = torch.tensor(
        [[50.0, 40.0, 30.0, 10.0, 0.3], [10.0, 10.0, 4.0, 12.0, 1.2], [5.0, 6.0, 7.0, 3.0, 0.0]]
    )
    back = polygons_to_rboxes(rboxes_to_polygons(rb))
    # same rectangle: identical corners as a set (the angle may be folded into [0, pi/2) with w/h swapped)
    p1 = rboxes_to_polygons(rb)
    p2 = rboxes_to_polygons(back)
    d = (p1[:, :, None, :] - p2[:, None, :, :]).norm(dim=-1)
    assert float(d.amin(-1).amax()) < 1e-4
    assert bool(((back[:, 4] >= 0) & (back[:, 4] < math.pi / 2)).all())
