"""TaskAlignedAssigner against the reference fixture (all variants and the empty batch) and its invariants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from lucid_core.assign import TaskAlignedAssigner


@pytest.fixture(scope="module")
def assigner_fixture(shared_dir: Path) -> dict[str, Any]:
    fx: dict[str, Any] = torch.load(
        shared_dir / "fixtures" / "assigner_public.pt", weights_only=True, map_location="cpu"
    )
    return fx


def _build(params: dict[str, Any]) -> TaskAlignedAssigner:
    return TaskAlignedAssigner(
        topk=params["topk"],
        num_classes=params["num_classes"],
        alpha=params["alpha"],
        beta=params["beta"],
        eps=params["eps"],
        topk2=params["topk2"],
        small_target_stride=params["stride_val"] if params["small_box_expansion"] else None,
    )


def _run(assigner: TaskAlignedAssigner, inputs: dict[str, torch.Tensor]) -> Any:
    return assigner(
        inputs["pd_scores"].float(),
        inputs["pd_bboxes"],
        inputs["anc_points"],
        inputs["gt_labels"],
        inputs["gt_bboxes"],
        inputs["mask_gt"],
    )


@pytest.mark.shared
def test_assigner_reproduces_fixture(assigner_fixture: dict[str, Any]) -> None:
    """Every variant the file holds (names, parameters and expectations all read from it)."""
    inputs = assigner_fixture["inputs"]
    assert assigner_fixture["variants"], "the fixture holds no variant"
    for variant, case in assigner_fixture["variants"].items():
        expected = case["outputs"]
        result = _run(_build(case["params"]), inputs)

        assert torch.equal(result.fg_mask, expected["fg_mask"]), variant
        assert torch.equal(result.target_gt_idx, expected["target_gt_idx"]), variant
        at_label = result.target_scores.gather(-1, result.target_labels.unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(
            at_label,
            expected["target_scores_at_label"],
            rtol=1e-5,
            atol=1e-6,
            msg=lambda m, v=variant: f"{v}: {m}",
        )
        assert result.fg_mask.sum(1).tolist() == case["num_fg_per_image"], variant
        per_gt = torch.zeros_like(case["num_fg_per_gt"])
        per_gt.scatter_add_(1, result.target_gt_idx, result.fg_mask.long())
        assert torch.equal(per_gt, case["num_fg_per_gt"]), variant

        # The README's reconstruction identities: labels/boxes gathered from row target_gt_idx, one score per anchor.
        lab = inputs["gt_labels"][..., 0].long()
        assert torch.equal(
            result.target_labels, torch.gather(lab, 1, expected["target_gt_idx"]).clamp(min=0)
        ), variant
        boxes = torch.gather(inputs["gt_bboxes"], 1, expected["target_gt_idx"][..., None].expand(-1, -1, 4))
        assert torch.equal(result.target_bboxes, boxes), variant
        assert torch.count_nonzero(result.target_scores, dim=-1).le(1).all(), variant
        assert torch.equal(result.target_scores.sum(-1), torch.where(result.fg_mask, at_label, 0.0)), variant


@pytest.mark.shared
def test_assigner_empty_batch_constants(assigner_fixture: dict[str, Any]) -> None:
    empty = assigner_fixture["empty_gt_batch"]
    inputs = dict(assigner_fixture["inputs"], **{k: empty[k] for k in ("gt_labels", "gt_bboxes", "mask_gt")})
    for variant, case in assigner_fixture["variants"].items():
        result = _run(_build(case["params"]), inputs)
        for name, spec in empty["outputs_8_4_190"].items():
            value = getattr(result, name)
            assert list(value.shape) == spec["shape"], (variant, name)
            assert str(value.dtype) == f"torch.{spec['dtype']}", (variant, name)
            assert (value == spec["fill"]).all(), (variant, name)


def test_first_argmax_is_argmax_with_ties_and_nan() -> None:
    """``first_argmax`` (``max(dim).indices``) returns argmax's index, the first maximum, on every dimension,
    on 0/1 masks full of ties, on all-zero rows and with NaN (argmax's NaN is the maximum)."""
    from lucid_core.assign.task_aligned import first_argmax

    g = torch.Generator().manual_seed(0)
    masks = (torch.rand(4, 7, 300, generator=g) > 0.8).float()
    masks[:, :, :5] = 0  # columns without any 1
    values = torch.rand(4, 7, 300, generator=g).round(decimals=1)  # many ties
    values[0, 3, 7] = float("nan")
    for tensor in (masks, values, values.to(torch.float64), values.to(torch.float16)):
        for dim in range(tensor.dim()):
            assert torch.equal(first_argmax(tensor, dim), tensor.argmax(dim)), (tensor.dtype, dim)


def test_assigner_one_to_one_keeps_single_anchor_per_ground_truth() -> None:
    g = torch.Generator().manual_seed(0)
    anchors = (
        torch.stack(torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="xy"), -1).view(-1, 2) * 4
        + 2
    )
    num = anchors.shape[0]
    scores = torch.rand(2, num, 5, generator=g)
    pred = torch.cat((anchors - 6, anchors + 6), -1).expand(2, -1, -1) + torch.rand(2, num, 4, generator=g)
    gt = torch.tensor(
        [[[4.0, 4.0, 30.0, 30.0], [20.0, 20.0, 60.0, 50.0]], [[8.0, 8.0, 40.0, 24.0], [0, 0, 0, 0]]]
    )
    labels = torch.tensor([[[1.0], [3.0]], [[2.0], [0.0]]])
    mask = (gt.sum(-1, keepdim=True) > 0).float()
    result = TaskAlignedAssigner(topk=7, num_classes=5, topk2=1, small_target_stride=16)(
        scores, pred, anchors, labels, gt, mask
    )
    per_gt = torch.zeros(2, 2, dtype=torch.long).scatter_add_(1, result.target_gt_idx, result.fg_mask.long())
    assert per_gt.tolist() == [[1, 1], [1, 0]]


def test_assigner_rejects_wrong_class_count() -> None:
    with pytest.raises(ValueError, match="classes"):
        TaskAlignedAssigner(num_classes=3)(
            torch.rand(1, 4, 5),
            torch.rand(1, 4, 4),
            torch.rand(4, 2),
            torch.zeros(1, 1, 1),
            torch.zeros(1, 1, 4),
            torch.zeros(1, 1, 1),
        )


def test_assigner_rejects_bad_topk2() -> None:
    with pytest.raises(ValueError, match="topk2"):
        TaskAlignedAssigner(topk=3, topk2=5)
