"""``torch.compile(fullgraph=True)`` of the detection objective traces as one graph and equals eager."""

from __future__ import annotations

import pytest
import torch

from lucid_core.loss import DetectionLoss, E2EDetectionLoss
from lucid_core.outputs import BranchOutput, TrainOutput

LEVEL_SHAPES = [(4, 4), (2, 2), (1, 1)]  # 32x32 input, 21 anchors


def _branch(reg_max: int, generator: torch.Generator) -> BranchOutput:
    num_anchors = sum(h * w for h, w in LEVEL_SHAPES)
    if reg_max == 1:
        boxes = torch.rand(2, 4, num_anchors, generator=generator) * 2
    else:
        boxes = torch.randn(2, 4 * reg_max, num_anchors, generator=generator)
    scores = torch.randn(2, 3, num_anchors, generator=generator)
    return BranchOutput(boxes.requires_grad_(True), scores.requires_grad_(True))


def _batch() -> dict[str, torch.Tensor]:
    return {
        "batch_idx": torch.tensor([0.0, 0.0, 1.0]),
        "cls": torch.tensor([[0.0], [2.0], [1.0]]),
        "bboxes": torch.tensor([[0.5, 0.5, 0.6, 0.5], [0.25, 0.3, 0.2, 0.3], [0.6, 0.6, 0.5, 0.6]]),
    }


def _compare(loss: DetectionLoss | E2EDetectionLoss, output: TrainOutput, backend: str) -> None:
    eager_total, eager_items = loss(output, _batch())
    eager_grads = torch.autograd.grad(eager_total, [output.one2many.boxes, output.one2many.scores])
    compiled = torch.compile(loss.__call__, fullgraph=True, backend=backend)
    total, items = compiled(output, _batch())
    grads = torch.autograd.grad(total, [output.one2many.boxes, output.one2many.scores])
    torch.testing.assert_close(total, eager_total, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(items, eager_items, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, eager_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reg_max", [16, pytest.param(1, marks=pytest.mark.slow)])
def test_detection_loss_traces_fullgraph(reg_max: int) -> None:
    """Dynamo + AOT autograd (no code generation): one graph, forward and backward equal eager."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(reg_max)
    output = TrainOutput(_branch(reg_max, g), None, LEVEL_SHAPES, (8, 16, 32))
    _compare(DetectionLoss(3, reg_max, (8, 16, 32)), output, backend="aot_eager")


@pytest.mark.slow
def test_e2e_loss_compiles_with_inductor() -> None:
    """Full inductor compilation of the YOLO26 end-to-end objective on CPU."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    output = TrainOutput(_branch(1, g), _branch(1, g), LEVEL_SHAPES, (8, 16, 32))
    _compare(E2EDetectionLoss(3, 1, (8, 16, 32), epochs=10), output, backend="inductor")


@pytest.mark.slow
def test_dfl_loss_compiles_with_inductor() -> None:
    """Full inductor compilation of the reg_max 16 (DFL) objective on CPU."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(1)
    output = TrainOutput(_branch(16, g), None, LEVEL_SHAPES, (8, 16, 32))
    _compare(DetectionLoss(3, 16, (8, 16, 32)), output, backend="inductor")
