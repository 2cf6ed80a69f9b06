"""Detection objective against the reference fixtures (yolov8n DFL loss, yolo26n end-to-end loss) and gradients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from lucid_core.loss import (
    BranchWeightSchedule,
    DetectionLoss,
    E2EDetectionLoss,
    distribution_focal_loss,
    normalised_l1_loss,
    pack_targets,
)
from lucid_core.outputs import BranchOutput, TrainOutput

RTOL, ATOL = 1e-5, 1e-6  # fixture README "Tolerances" (different op order than the reference)
CASES = [("targets", "with_targets"), ("targets_empty", "empty_targets")]


def _load(shared_dir: Path, name: str) -> dict[str, Any]:
    fx: dict[str, Any] = torch.load(shared_dir / "fixtures" / name, weights_only=True, map_location="cpu")
    return fx


@pytest.fixture(scope="module")
def v8_fixture(shared_dir: Path) -> dict[str, Any]:
    return _load(shared_dir, "detection_loss_yolov8n.pt")


@pytest.fixture(scope="module")
def y26_fixture(shared_dir: Path) -> dict[str, Any]:
    return _load(shared_dir, "detection_loss_yolo26n.pt")


def _level_shapes(meta: dict[str, Any]) -> list[tuple[int, int]]:
    return [(int(h), int(w)) for h, w in meta["level_shapes_hw"]]


def _dense_grad(sparse: dict[str, Any]) -> torch.Tensor:
    grad = torch.zeros(sparse["shape"])
    grad.permute(0, 2, 1)[sparse["b"], sparse["a"]] = sparse["values"]
    return grad


def _check_branch(result: Any, record: dict[str, Any]) -> None:
    torch.testing.assert_close(
        result.loss_vector_times_bs, record["loss_vector_times_bs"], rtol=RTOL, atol=ATOL
    )
    torch.testing.assert_close(result.loss_items, record["loss_items"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(result.total, record["total"], rtol=RTOL, atol=ATOL)
    assigned = record["assigned"]
    assignment = result.assignment
    assert torch.equal(assignment.fg_mask, assigned["fg_mask"])
    assert assignment.target_gt_idx.dtype == assigned["target_gt_idx"].dtype
    assert torch.equal(assignment.target_gt_idx, assigned["target_gt_idx"])
    assert assignment.target_labels.dtype == assigned["target_labels"].dtype
    assert torch.equal(assignment.target_labels, assigned["target_labels"])
    torch.testing.assert_close(assignment.target_bboxes, assigned["target_bboxes_px"], rtol=RTOL, atol=ATOL)
    at_label = assignment.target_scores.gather(
        -1, assignment.target_labels.long().clamp(max=79).unsqueeze(-1)
    )
    torch.testing.assert_close(at_label.squeeze(-1), assigned["target_scores_at_label"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(result.target_scores_sum, assigned["target_scores_sum"], rtol=RTOL, atol=ATOL)


@pytest.mark.shared
@pytest.mark.parametrize(("targets_key", "results_key"), CASES)
def test_yolov8n_loss_reproduces_fixture(
    v8_fixture: dict[str, Any], targets_key: str, results_key: str
) -> None:
    meta, heads = v8_fixture["meta"], v8_fixture["head_outputs"]
    record = v8_fixture["results"][results_key]
    hyp = meta["hyp"]
    loss = DetectionLoss(
        meta["nc"], meta["reg_max"], meta["strides"], box=hyp["box"], cls=hyp["cls"], dfl=hyp["dfl"]
    )
    assert list(loss.loss_names) == record["loss_names"]
    targets = pack_targets(v8_fixture[targets_key], meta["input_shape"][0], tuple(meta["imgsz_hw"]))
    gt = record["gt_padded"]
    assert torch.equal(targets.gt_labels, gt["gt_labels"])
    assert torch.equal(targets.gt_bboxes, gt["gt_bboxes_xyxy_px"])
    assert torch.equal(targets.mask_gt, gt["mask_gt"])

    boxes = heads["boxes"].clone().requires_grad_(True)
    result = loss.branch(BranchOutput(boxes, heads["scores"]), _level_shapes(meta), targets)
    _check_branch(result, record)
    result.total.backward()
    assert boxes.grad is not None
    torch.testing.assert_close(boxes.grad, _dense_grad(record["grad_boxes_sparse"]), rtol=RTOL, atol=ATOL)


@pytest.mark.shared
def test_yolov8n_loss_call_matches_branch_record(v8_fixture: dict[str, Any]) -> None:
    """The public call ``loss(TrainOutput, batch) -> (total, items)`` on the fixture's head outputs."""
    meta, heads = v8_fixture["meta"], v8_fixture["head_outputs"]
    loss = DetectionLoss(meta["nc"], meta["reg_max"], meta["strides"])
    output = TrainOutput(
        BranchOutput(heads["boxes"], heads["scores"]), None, _level_shapes(meta), (8, 16, 32)
    )
    total, items = loss(output, v8_fixture["targets"])
    record = v8_fixture["results"]["with_targets"]
    torch.testing.assert_close(total, record["total"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(items, record["loss_items"], rtol=RTOL, atol=ATOL)


def _e2e_output(fx: dict[str, Any], requires_grad: bool = False) -> TrainOutput:
    heads = fx["head_outputs"]
    branches = [
        BranchOutput(heads[k]["boxes"].clone().requires_grad_(requires_grad), heads[k]["scores"])
        for k in ("one2many", "one2one")
    ]
    return TrainOutput(branches[0], branches[1], _level_shapes(fx["meta"]), (8, 16, 32))


@pytest.mark.shared
@pytest.mark.parametrize(("targets_key", "results_key"), CASES)
def test_yolo26n_e2e_loss_reproduces_fixture(
    y26_fixture: dict[str, Any], targets_key: str, results_key: str
) -> None:
    meta = y26_fixture["meta"]
    records = y26_fixture["results"][results_key]
    hyp = meta["hyp"]
    loss = E2EDetectionLoss(
        meta["nc"],
        meta["reg_max"],
        meta["strides"],
        box=hyp["box"],
        cls=hyp["cls"],
        dfl=hyp["dfl"],
        epochs=hyp["epochs"],
    )
    assert loss.one2one.assigner.topk == meta["assigner_params"]["one2one"]["topk"]
    assert loss.one2one.assigner.topk2 == meta["assigner_params"]["one2one"]["topk2"]
    assert loss.one2many.assigner.small_target_stride == meta["assigner_params"]["one2many"]["stride_val"]
    targets = pack_targets(y26_fixture[targets_key], meta["input_shape"][0], tuple(meta["imgsz_hw"]))
    assert torch.equal(targets.gt_bboxes, records["gt_padded"]["gt_bboxes_xyxy_px"])

    output = _e2e_output(y26_fixture, requires_grad=True)
    result = loss.combine(output, targets)
    _check_branch(result.one2many, records["one2many"])
    _check_branch(result.one2one, records["one2one"])

    e2e = records["e2e"]
    assert loss.schedule.o2m == e2e["o2m_weight"] and loss.schedule.o2o == e2e["o2o_weight"]
    torch.testing.assert_close(result.loss_vector_times_bs, e2e["loss_vector_times_bs"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(result.loss_items, e2e["loss_items"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(result.total, e2e["total"], rtol=RTOL, atol=ATOL)
    result.total.backward()
    for name, branch in (("one2many", output.one2many), ("one2one", output.one2one)):
        assert branch is not None and branch.boxes.grad is not None
        expected = _dense_grad(e2e[f"grad_boxes_{name}_sparse"])
        torch.testing.assert_close(branch.boxes.grad, expected, rtol=RTOL, atol=ATOL)

    after = records["e2e_after_10_updates"]
    for _ in range(after["updates"]):
        loss.step_epoch()
    assert loss.schedule.o2m == after["o2m_weight"] and loss.schedule.o2o == after["o2o_weight"]
    total, items = loss(_e2e_output(y26_fixture), y26_fixture[targets_key])
    torch.testing.assert_close(total, after["total"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(items, e2e["loss_items"], rtol=RTOL, atol=ATOL)
    vector = loss.combine(_e2e_output(y26_fixture), targets).loss_vector_times_bs
    torch.testing.assert_close(vector, after["loss_vector_times_bs"], rtol=RTOL, atol=ATOL)


@pytest.mark.shared
def test_branch_weight_schedule_reproduces_fixture(y26_fixture: dict[str, Any]) -> None:
    epochs = y26_fixture["meta"]["hyp"]["epochs"]
    consts = y26_fixture["e2e_constants"]
    schedule = BranchWeightSchedule(epochs, o2m_init=consts["o2m_init"], o2m_final=consts["final_o2m"])
    for n, o2m, o2o in y26_fixture["branch_weight_schedule"]:
        assert schedule.updates == n
        assert (schedule.o2m, schedule.o2o) == (o2m, o2o), n
        schedule.step()


def test_branch_weight_schedule_state_round_trip() -> None:
    loss = E2EDetectionLoss(num_classes=3, epochs=20)
    for _ in range(7):
        loss.step_epoch()
    resumed = E2EDetectionLoss(num_classes=3, epochs=20)
    resumed.load_state_dict(loss.state_dict())
    assert (resumed.schedule.updates, resumed.schedule.o2m, resumed.schedule.o2o) == (
        7,
        loss.schedule.o2m,
        loss.schedule.o2o,
    )
    with pytest.raises(KeyError, match="updates"):
        resumed.load_state_dict({"epochs": 20})


def _tiny_output(reg_max: int, seed: int, degenerate: bool = False) -> TrainOutput:
    g = torch.Generator().manual_seed(seed)
    level_shapes = [(8, 8), (4, 4), (2, 2)]
    num_anchors = sum(h * w for h, w in level_shapes)
    if reg_max == 1:
        boxes = torch.rand(2, 4, num_anchors, generator=g) * 3
        if degenerate:
            boxes[:, :, ::2] = 0.0  # zero-size boxes
            boxes[:, :2, 1::4] = -2.0  # inverted boxes
    else:
        boxes = torch.randn(2, 4 * reg_max, num_anchors, generator=g)
    scores = torch.randn(2, 3, num_anchors, generator=g)
    return TrainOutput(
        BranchOutput(boxes.requires_grad_(True), scores.requires_grad_(True)), None, level_shapes, (8, 16, 32)
    )


def _tiny_batch() -> dict[str, torch.Tensor]:
    return {
        "batch_idx": torch.tensor([0.0, 0.0, 0.0]),
        "cls": torch.tensor([[0.0], [2.0], [1.0]]),
        "bboxes": torch.tensor([[0.5, 0.5, 0.5, 0.4], [0.2, 0.3, 0.1, 0.12], [0.7, 0.6, 0.3, 0.5]]),
    }


@pytest.mark.parametrize("reg_max", [1, 16])
def test_gradients_finite_with_empty_image_and_degenerate_background_boxes(reg_max: int) -> None:
    """Image 1 has no ground truth; yolo26-style raw distances include zero-size and inverted boxes."""
    output = _tiny_output(reg_max, seed=0, degenerate=True)
    total, items = DetectionLoss(3, reg_max, (8, 16, 32))(output, _tiny_batch())
    total.backward()
    assert torch.isfinite(total) and torch.isfinite(items).all()
    assert output.one2many.boxes.grad is not None and output.one2many.scores.grad is not None
    assert torch.isfinite(output.one2many.boxes.grad).all()
    assert torch.isfinite(output.one2many.scores.grad).all()
    assert output.one2many.boxes.grad[1].abs().sum() == 0  # no ground truth: no box gradient
    assert items[0] > 0 and items[2] > 0


def test_empty_target_batch_gives_zero_box_terms_and_plain_bce() -> None:
    output = _tiny_output(16, seed=1)
    empty = {"batch_idx": torch.zeros(0), "cls": torch.zeros(0, 1), "bboxes": torch.zeros(0, 4)}
    total, items = DetectionLoss(3, 16, (8, 16, 32))(output, empty)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        output.one2many.scores, torch.zeros_like(output.one2many.scores), reduction="sum"
    )
    assert items[0] == 0 and items[2] == 0
    torch.testing.assert_close(items[1], bce.detach() * 0.5)
    torch.testing.assert_close(total, bce * 0.5 * 2)


def test_pack_targets_rejects_out_of_range_image_index() -> None:
    batch = _tiny_batch()
    batch["batch_idx"] = torch.tensor([0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="batch_idx"):
        pack_targets(batch, 2, (64, 64))
    with pytest.raises(KeyError, match="bboxes"):
        pack_targets({"batch_idx": torch.zeros(1), "cls": torch.zeros(1, 1)}, 1, (64, 64))


def test_pack_targets_extra_rows_do_not_change_the_loss() -> None:
    loss = DetectionLoss(3, 16, (8, 16, 32))
    output = _tiny_output(16, seed=2)
    exact = pack_targets(_tiny_batch(), 2, (64, 64))
    padded = pack_targets(_tiny_batch(), 2, (64, 64), rows=6)
    assert exact.gt_bboxes.shape[1] == 3 and padded.gt_bboxes.shape[1] == 6
    a = loss.branch(output.one2many, output.level_shapes, exact)
    b = loss.branch(output.one2many, output.level_shapes, padded)
    assert torch.equal(a.assignment.fg_mask, b.assignment.fg_mask)
    torch.testing.assert_close(a.loss_vector_times_bs, b.loss_vector_times_bs)


def test_dfl_gradcheck_float64() -> None:
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(3, 4, 16, generator=g, dtype=torch.float64, requires_grad=True)
    target = (torch.rand(3, 4, generator=g, dtype=torch.float64) * 13.8 + 0.1).requires_grad_(True)
    assert torch.autograd.gradcheck(distribution_focal_loss, (logits, target))


def test_dfl_is_cross_entropy_at_integer_targets() -> None:
    logits = torch.randn(5, 4, 16, dtype=torch.float64)
    target = torch.randint(0, 15, (5, 4)).double()
    expected = torch.nn.functional.cross_entropy(
        logits.view(-1, 16), target.long().view(-1), reduction="none"
    )
    torch.testing.assert_close(distribution_focal_loss(logits, target), expected.view(5, 4).mean(-1))


def test_l1_gradcheck_float64() -> None:
    g = torch.Generator().manual_seed(5)
    pred = (torch.rand(6, 4, generator=g, dtype=torch.float64) * 40).requires_grad_(True)
    target = (pred.detach() + 5 + torch.rand(6, 4, generator=g, dtype=torch.float64)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p, t: normalised_l1_loss(p, t, (48, 64)), (pred, target))
