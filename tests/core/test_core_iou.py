"""box_iou / bbox_ciou: agreement with torchvision, the README's CIoU arithmetic, and float64 gradient checks."""

from __future__ import annotations

import math

import pytest
import torch
from torchvision.ops import box_iou as tv_box_iou

from lucid_core.geometry.iou import bbox_ciou, box_iou


def _random_boxes(n: int, generator: torch.Generator, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    xy = torch.rand(n, 2, generator=generator, dtype=dtype) * 50
    wh = torch.rand(n, 2, generator=generator, dtype=dtype) * 30 + 1
    return torch.cat((xy, xy + wh), -1)


def test_box_iou_matches_torchvision() -> None:
    g = torch.Generator().manual_seed(0)
    a, b = _random_boxes(7, g), _random_boxes(5, g)
    torch.testing.assert_close(box_iou(a, b), tv_box_iou(a, b), rtol=1e-5, atol=1e-6)


def test_box_iou_rejects_bad_shape() -> None:
    with pytest.raises(ValueError, match="xyxy"):
        box_iou(torch.zeros(3, 5), torch.zeros(2, 4))


def test_ciou_of_identical_boxes_is_one_and_of_far_boxes_negative() -> None:
    boxes = torch.tensor([[10.0, 20.0, 40.0, 60.0]])
    assert bbox_ciou(boxes, boxes).item() == pytest.approx(1.0, abs=1e-6)
    far = torch.tensor([[100.0, 120.0, 110.0, 125.0]])
    assert bbox_ciou(boxes, far).item() < 0


def test_ciou_follows_readme_formula_in_float64() -> None:
    """Independent transcription of the fixture README's CIoU rule (eps 1e-7)."""
    g = torch.Generator().manual_seed(1)
    b1, b2 = _random_boxes(50, g, torch.float64), _random_boxes(50, g, torch.float64)
    eps = 1e-7
    w1, h1 = b1[:, 2] - b1[:, 0], b1[:, 3] - b1[:, 1] + eps
    w2, h2 = b2[:, 2] - b2[:, 0], b2[:, 3] - b2[:, 1] + eps
    iw = (torch.minimum(b1[:, 2], b2[:, 2]) - torch.maximum(b1[:, 0], b2[:, 0])).clamp(min=0)
    ih = (torch.minimum(b1[:, 3], b2[:, 3]) - torch.maximum(b1[:, 1], b2[:, 1])).clamp(min=0)
    inter = iw * ih
    iou = inter / (w1 * h1 + w2 * h2 - inter + eps)
    cw = torch.maximum(b1[:, 2], b2[:, 2]) - torch.minimum(b1[:, 0], b2[:, 0])
    ch = torch.maximum(b1[:, 3], b2[:, 3]) - torch.minimum(b1[:, 1], b2[:, 1])
    c2 = cw**2 + ch**2 + eps
    rho2 = (
        (b2[:, 0] + b2[:, 2] - b1[:, 0] - b1[:, 2]) ** 2 + (b2[:, 1] + b2[:, 3] - b1[:, 1] - b1[:, 3]) ** 2
    ) / 4
    v = 4 / math.pi**2 * (torch.atan(w2 / h2) - torch.atan(w1 / h1)) ** 2
    alpha = v / (1 - iou + v + eps)
    expected = iou - (rho2 / c2 + v * alpha)
    torch.testing.assert_close(bbox_ciou(b1, b2), expected, rtol=1e-12, atol=1e-12)


def test_ciou_alpha_carries_no_gradient() -> None:
    """The gradient equals that of the same expression with α held at its value (reference behaviour)."""
    g = torch.Generator().manual_seed(2)
    b1 = _random_boxes(6, g, torch.float64).requires_grad_(True)
    b2 = _random_boxes(6, g, torch.float64)
    (grad_default,) = torch.autograd.grad(bbox_ciou(b1, b2).sum(), b1)
    with torch.no_grad():
        eps = 1e-7
        w1, h1 = b1[:, 2] - b1[:, 0], b1[:, 3] - b1[:, 1] + eps
        w2, h2 = b2[:, 2] - b2[:, 0], b2[:, 3] - b2[:, 1] + eps
        v = 4 / math.pi**2 * (torch.atan(w2 / h2) - torch.atan(w1 / h1)) ** 2
        iou = torch.diagonal(box_iou(b1, b2, eps=0.0))
        alpha0 = v / (v - iou + 1 + eps)
    (grad_fixed,) = torch.autograd.grad(bbox_ciou(b1, b2, alpha=alpha0).sum(), b1)
    torch.testing.assert_close(grad_default, grad_fixed, rtol=1e-6, atol=1e-9)


def test_ciou_gradcheck_float64() -> None:
    g = torch.Generator().manual_seed(3)
    b1 = _random_boxes(4, g, torch.float64).requires_grad_(True)
    b2 = _random_boxes(4, g, torch.float64).requires_grad_(True)
    with torch.no_grad():
        alpha0 = torch.rand(4, generator=g, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x, y: bbox_ciou(x, y, alpha=alpha0), (b1, b2))
