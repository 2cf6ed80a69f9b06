"""OBB objective against the reference fixtures (yolov8n-obb DFL loss, yolo26n-obb end-to-end loss).

Every case, name, shape and expected value is read from the fixture files (``shared/fixtures/README.md``,
section "obb_loss_yolov8n.pt, obb_loss_yolo26n.pt"): packing and the size filter, decoded boxes, the rotated
assignment and its debug record, per-anchor terms, losses, and the gradients with respect to boxes, angle and
scores; tolerances are the README's ``rtol=1e-5, atol=1e-6`` (different op order).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from lucid_core.assign.rotated import RotatedTaskAlignedAssigner
from lucid_core.geometry.anchors import make_anchors
from lucid_core.geometry.rotated import probiou
from lucid_core.heads.obb import sigmoid_angle_radians
from lucid_core.loss.objective import EndToEndObjective, OneToManyObjective
from lucid_core.loss.terms.obb import (
    OBBLoss,
    angle_loss_term,
    obb_objective,
    pack_rotated_targets,
    rotated_size_filter,
)
from lucid_core.outputs import BranchOutput, TrainOutput
from lucid_core.tasks import build_objective

RTOL, ATOL = 1e-5, 1e-6  # fixture README "Tolerances"
FILES = ("obb_loss_yolov8n.pt", "obb_loss_yolo26n.pt")
RESULT_TARGETS = {"with_targets": "targets", "empty_targets": "targets_empty"}  # README schema


def _load(shared_dir: Path, name: str) -> dict[str, Any]:
    fx: dict[str, Any] = torch.load(shared_dir / "fixtures" / name, weights_only=True, map_location="cpu")
    assert fx["schema"] == "lucid-fixture/obb_loss/1"
    return fx


_CACHE: dict[str, dict[str, Any]] = {}


def _fixture(shared_dir: Path, name: str) -> dict[str, Any]:
    if name not in _CACHE:
        _CACHE[name] = _load(shared_dir, name)
    return _CACHE[name]


def _level_shapes(meta: dict[str, Any]) -> list[tuple[int, int]]:
    return [(int(h), int(w)) for h, w in meta["level_shapes_hw"]]


def _branches(fx: dict[str, Any]) -> list[str | None]:
    """Branch keys of the file: ``None`` for a classic one-branch file, else the end-to-end branch names."""
    return ["one2many", "one2one"] if fx["meta"]["end2end"] else [None]


def _part(tree: dict[str, Any], branch: str | None) -> dict[str, Any]:
    sub: dict[str, Any] = tree if branch is None else tree[branch]
    return sub


def _loss(fx: dict[str, Any], branch: str | None, *, angle_sigmoid: bool = False) -> OBBLoss:
    meta = fx["meta"]
    params = _part(meta["assigner_params"], branch)
    hyp = meta["hyp"]
    loss = OBBLoss(
        meta["nc"],
        meta["reg_max"],
        meta["strides"],
        box=hyp["box"],
        cls=hyp["cls"],
        dfl=hyp["dfl"],
        angle=hyp["angle"],
        topk=params["topk"],
        topk2=params["topk2"],
        alpha=params["alpha"],
        beta=params["beta"],
        angle_sigmoid=angle_sigmoid,
    )
    assert loss.assigner.small_target_stride == params["stride_val"] == meta["constants"]["stride_val"]
    assert loss.assigner.eps == params["eps"]
    return loss


def _dense(sparse: dict[str, Any]) -> torch.Tensor:
    grad = torch.zeros(sparse["shape"])
    grad.permute(0, 2, 1)[sparse["b"], sparse["a"]] = sparse["values"]
    return grad


def _output(heads: dict[str, Any], meta: dict[str, Any], branches: list[str | None]) -> TrainOutput:
    outs = []
    for branch in branches:
        h = _part(heads, branch)
        outs.append(
            BranchOutput(
                h["boxes"].clone().requires_grad_(True),
                h["scores"].clone().requires_grad_(True),
                {"angle": h["angle"].clone().requires_grad_(True)},
            )
        )
    strides = tuple(int(s) for s in meta["strides"])
    return TrainOutput(outs[0], outs[1] if len(outs) > 1 else None, _level_shapes(meta), strides)


def _cases() -> list[tuple[str, str]]:
    return [(name, key) for name in FILES for key in RESULT_TARGETS]


def _check_assignment(result: Any, record: dict[str, Any], nc: int) -> None:
    assigned, assignment = record["assigned"], result.assignment
    assert torch.equal(assignment.fg_mask, assigned["fg_mask"])
    for key in ("target_gt_idx", "target_labels"):
        got = getattr(assignment, key)
        assert got.dtype == assigned[key].dtype, key
        assert torch.equal(got, assigned[key]), key
    torch.testing.assert_close(assignment.target_bboxes, assigned["target_bboxes_px"], rtol=RTOL, atol=ATOL)
    at_label = assignment.target_scores.gather(
        -1, assignment.target_labels.long().clamp(max=nc - 1).unsqueeze(-1)
    )
    torch.testing.assert_close(at_label.squeeze(-1), assigned["target_scores_at_label"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(result.target_scores_sum, assigned["target_scores_sum"], rtol=RTOL, atol=ATOL)


def _check_values(result: Any, record: dict[str, Any], names: tuple[str, ...]) -> None:
    assert list(names) == record["loss_names"]
    for key in ("loss_vector_times_bs", "loss_items", "total"):
        torch.testing.assert_close(getattr(result, key), record[key], rtol=RTOL, atol=ATOL)


def _check_fg_terms(result: Any, record: dict[str, Any]) -> None:
    if "fg_terms" not in record:
        return
    fg = result.assignment.fg_mask
    for key, expected in record["fg_terms"].items():
        torch.testing.assert_close(result.details[key][fg], expected, rtol=RTOL, atol=ATOL, msg=key)


def _check_grads(branch: BranchOutput, record: dict[str, Any], grad_scores: torch.Tensor | None) -> None:
    assert branch.boxes.grad is not None and branch.extras["angle"].grad is not None
    torch.testing.assert_close(branch.boxes.grad, _dense(record["grad_boxes"]), rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(
        branch.extras["angle"].grad, _dense(record["grad_angle"]), rtol=RTOL, atol=ATOL
    )
    if grad_scores is not None:
        assert branch.scores.grad is not None
        torch.testing.assert_close(branch.scores.grad, grad_scores, rtol=RTOL, atol=ATOL)


def _formula_grad_scores(result: Any, scores: torch.Tensor, weight: float) -> torch.Tensor:
    """README: d total / d scores = weight · B · 0.5 · (sigmoid(scores) − target_scores) / S."""
    batch = scores.shape[0]
    target = result.assignment.target_scores.permute(0, 2, 1)
    return weight * batch * 0.5 * (scores.detach().sigmoid() - target) / result.target_scores_sum


@pytest.mark.shared
@pytest.mark.parametrize(("name", "results_key"), _cases())
def test_packing_and_size_filter_reproduce_fixture(shared_dir: Path, name: str, results_key: str) -> None:
    fx = _fixture(shared_dir, name)
    meta, record = fx["meta"], fx["results"][results_key]
    flat = fx[RESULT_TARGETS[results_key]]
    imgsz = (int(meta["imgsz_hw"][0]), int(meta["imgsz_hw"][1]))
    size = rotated_size_filter(flat["bboxes"], imgsz)
    assert torch.equal(size.kept, record["size_filter"]["kept"])
    assert torch.equal(size.w_px, record["size_filter"]["w_px"])
    assert torch.equal(size.h_px, record["size_filter"]["h_px"])
    targets = pack_rotated_targets(flat, int(meta["input_shape"][0]), imgsz)
    gt = record["gt_padded"]
    assert torch.equal(targets.gt_labels, gt["gt_labels"])
    assert torch.equal(targets.gt_bboxes, gt["gt_bboxes_xywhr_px"])
    assert torch.equal(targets.mask_gt, gt["mask_gt"])
    # the collated-batch key 'rboxes' is read the same way
    as_collated = {"batch_idx": flat["batch_idx"], "cls": flat["cls"], "rboxes": flat["bboxes"]}
    assert torch.equal(
        pack_rotated_targets(as_collated, int(meta["input_shape"][0]), imgsz).gt_bboxes, targets.gt_bboxes
    )


@pytest.mark.shared
@pytest.mark.parametrize("name", FILES)
def test_angle_activation_and_anchors_match_fixture(shared_dir: Path, name: str) -> None:
    fx = _fixture(shared_dir, name)
    meta, heads = fx["meta"], fx["head_outputs"]
    anchors, strides = make_anchors(_level_shapes(meta), meta["strides"])
    assert torch.equal(anchors, meta["anchor_points_grid"]) and torch.equal(strides, meta["stride_tensor"])
    if "angle_logits" in heads:  # classic head: θ = (sigmoid(logit) − 0.25)·π, bit-exact
        assert torch.equal(sigmoid_angle_radians(heads["angle_logits"]), heads["angle"])


@pytest.mark.shared
@pytest.mark.parametrize(("name", "results_key"), _cases())
def test_branch_losses_reproduce_fixture(shared_dir: Path, name: str, results_key: str) -> None:
    """Values, assignment, assigner debug record, per-anchor terms and gradients of every branch."""
    fx = _fixture(shared_dir, name)
    meta, heads, results = fx["meta"], fx["head_outputs"], fx["results"][results_key]
    imgsz = (int(meta["imgsz_hw"][0]), int(meta["imgsz_hw"][1]))
    targets = pack_rotated_targets(fx[RESULT_TARGETS[results_key]], int(meta["input_shape"][0]), imgsz)
    for branch in _branches(fx):
        record = _part(results, branch)
        loss = _loss(fx, branch)
        output = _output(_part(heads, branch) if branch else heads, meta, [None])
        result = loss.branch_loss(output, output.one2many, targets, {}, one2one=branch == "one2one")
        _check_values(result, record, loss.loss_names)
        _check_assignment(result, record, int(meta["nc"]))
        torch.testing.assert_close(
            result.details["decoded_rboxes_grid"],
            _part(heads, branch)["decoded_rboxes_grid"],
            rtol=RTOL,
            atol=ATOL,
        )
        _check_fg_terms(result, record)
        if "assigner_debug" in record:
            _check_assigner_debug(
                loss.assigner, meta, result, targets, output.one2many, record["assigner_debug"]
            )
        result.total.backward()
        grad_scores = record.get("grad_scores")
        if grad_scores is None:
            grad_scores = _formula_grad_scores(result, output.one2many.scores, 1.0)
        _check_grads(
            output.one2many,
            {"grad_boxes": record["grad_boxes_sparse"], "grad_angle": record["grad_angle_sparse"]},
            grad_scores,
        )


def _check_assigner_debug(
    assigner: RotatedTaskAlignedAssigner,
    meta: dict[str, Any],
    result: Any,
    targets: Any,
    branch: BranchOutput,
    debug: dict[str, Any],
) -> None:
    """Candidate pairs (b, j, a) of real rows, their overlap u and metric t (README ``assigner_debug``)."""
    anchors, strides = meta["anchor_points_grid"], meta["stride_tensor"]
    num_anchors = branch.scores.shape[2]
    decoded = result.details["decoded_rboxes_grid"]
    pd_bboxes = torch.cat((decoded[..., :4] * strides, decoded[..., 4:]), -1)
    real = targets.mask_gt
    candidate = assigner.candidates(anchors * strides, targets.gt_bboxes, real, {}) * real
    assert torch.equal(candidate.nonzero(), debug["candidates_bja"])
    assert torch.equal(candidate.sum(-1).long(), debug["num_candidates_per_gt"])
    is_candidate = candidate > 0
    pd_scores = branch.scores.detach().permute(0, 2, 1).sigmoid()
    labels = targets.gt_labels.long().squeeze(-1)
    class_scores = pd_scores.permute(0, 2, 1).gather(1, labels.unsqueeze(-1).expand(-1, -1, num_anchors))
    class_scores = torch.where(is_candidate, class_scores, torch.zeros_like(class_scores))
    overlaps = assigner.overlaps(targets.gt_bboxes, pd_bboxes, is_candidate, class_scores, {})
    metric = class_scores.pow(assigner.alpha) * overlaps.pow(assigner.beta)
    b, j, a = debug["candidates_bja"].unbind(1)
    torch.testing.assert_close(overlaps[b, j, a], debug["overlap"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(metric[b, j, a], debug["align_metric"], rtol=RTOL, atol=ATOL)


@pytest.mark.shared
@pytest.mark.parametrize("results_key", list(RESULT_TARGETS))
def test_classic_objective_from_angle_logits(shared_dir: Path, results_key: str) -> None:
    """Through the factory and the one-to-many wrapper, fed the classic head's raw angle logit."""
    name = next(n for n in FILES if not _fixture(shared_dir, n)["meta"]["end2end"])
    fx = _fixture(shared_dir, name)
    meta, heads, record = fx["meta"], fx["head_outputs"], fx["results"][results_key]
    model = SimpleNamespace(
        task="obb",
        num_classes=meta["nc"],
        reg_max=meta["reg_max"],
        strides=meta["strides"],
        end2end=False,
        head=SimpleNamespace(angle_sigmoid=True),
    )
    objective = build_objective(model, gains=dict(meta["hyp"]), epochs=meta["hyp"]["epochs"])
    assert isinstance(objective, OneToManyObjective)
    assert list(objective.loss_names) == record["loss_names"]
    output = TrainOutput(
        BranchOutput(heads["boxes"], heads["scores"], {"angle": heads["angle_logits"]}),
        None,
        _level_shapes(meta),
        tuple(int(s) for s in meta["strides"]),
    )
    total, items = objective(output, fx[RESULT_TARGETS[results_key]])
    torch.testing.assert_close(total, record["total"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(items, record["loss_items"], rtol=RTOL, atol=ATOL)


@pytest.mark.shared
@pytest.mark.parametrize("results_key", list(RESULT_TARGETS))
def test_end_to_end_objective_reproduces_fixture(shared_dir: Path, results_key: str) -> None:
    name = next(n for n in FILES if _fixture(shared_dir, n)["meta"]["end2end"])
    fx = _fixture(shared_dir, name)
    meta, records = fx["meta"], fx["results"][results_key]
    model = SimpleNamespace(
        task="obb",
        num_classes=meta["nc"],
        reg_max=meta["reg_max"],
        strides=meta["strides"],
        end2end=True,
        head=SimpleNamespace(angle_sigmoid=False),
    )
    objective = build_objective(model, gains=dict(meta["hyp"]), epochs=meta["hyp"]["epochs"])
    assert isinstance(objective, EndToEndObjective)
    for key in ("one2many", "one2one"):
        obj = getattr(objective, key)
        params = meta["assigner_params"][key]
        assert (obj.assigner.topk, obj.assigner.topk2) == (params["topk"], params["topk2"])
    output = _output(fx["head_outputs"], meta, ["one2many", "one2one"])
    flat = fx[RESULT_TARGETS[results_key]]
    result = objective.combine(output, objective.pack(flat, output), flat)
    e2e = records["e2e"]
    assert (objective.schedule.o2m, objective.schedule.o2o) == (e2e["o2m_weight"], e2e["o2o_weight"])
    assert list(objective.loss_names) == e2e["loss_names"]
    for key in ("loss_vector_times_bs", "loss_items", "total"):
        torch.testing.assert_close(getattr(result, key), e2e[key], rtol=RTOL, atol=ATOL)
    result.total.backward()
    for branch_name, branch in (("one2many", output.one2many), ("one2one", output.one2one)):
        assert branch is not None
        branch_result = getattr(result, branch_name)
        weight = objective.schedule.o2m if branch_name == "one2many" else objective.schedule.o2o
        grad_scores = e2e.get(f"grad_scores_{branch_name}")
        if grad_scores is None:
            grad_scores = _formula_grad_scores(branch_result, branch.scores, weight)
        _check_grads(
            branch,
            {
                "grad_boxes": e2e[f"grad_boxes_{branch_name}_sparse"],
                "grad_angle": e2e[f"grad_angle_{branch_name}_sparse"],
            },
            grad_scores,
        )
    after = records["e2e_after_10_updates"]
    for _ in range(int(after["updates"])):
        objective.step_epoch()
    assert (objective.schedule.o2m, objective.schedule.o2o) == (after["o2m_weight"], after["o2o_weight"])
    again = objective.result(_output(fx["head_outputs"], meta, ["one2many", "one2one"]), flat)
    torch.testing.assert_close(
        again.loss_vector_times_bs, after["loss_vector_times_bs"], rtol=RTOL, atol=ATOL
    )
    torch.testing.assert_close(again.total, after["total"], rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------- rules without the fixture


def test_probiou_floor_and_identical_boxes() -> None:
    box = torch.tensor([[10.0, 20.0, 6.0, 3.0, 0.4]])
    same = probiou(box, box, pairwise=False)
    assert float(same) == pytest.approx(0.99955, abs=5e-5)  # README: 1 − sqrt(1 − e^−1e-7 + 1e-7) in float32
    far = torch.tensor([[1000.0, 20.0, 6.0, 3.0, 0.4]])
    assert float(probiou(box, far, pairwise=False)) == 0.0
    # a square's angle does not matter (isotropic covariance), with and without the loss floor
    square = torch.tensor([[0.0, 0.0, 5.0, 5.0, 0.0]])
    turned = torch.tensor([[1.0, 0.5, 5.0, 5.0, 0.7]])
    for floor in (0.0, 0.01):
        torch.testing.assert_close(
            probiou(square, turned, pairwise=False, floor=floor),
            probiou(square, turned * torch.tensor([1, 1, 1, 1, 0.0]), pairwise=False, floor=floor),
        )


def test_angle_term_wraps_and_weights_aspect() -> None:
    target = torch.tensor([[0.0, 0.0, 4.0, 3.0, 0.3]]).expand(4, 5)
    pred = torch.tensor([0.3, 0.3 + math.pi / 2, 0.3 + math.pi, 0.3 + 5 * math.pi])
    assert torch.allclose(angle_loss_term(pred, target), torch.zeros(4), atol=1e-10)
    aspect = [(4.0, 3.0, 0.99), (12.0, 2.0, 0.70), (150.0, 5.0, 0.28)]  # README step 8
    for w, h, expected in aspect:
        box = torch.tensor([[0.0, 0.0, w, h, 0.0]])
        value = angle_loss_term(torch.tensor([math.pi / 4]), box)  # sin²(π/2) = 1
        assert float(value) == pytest.approx(expected, abs=5e-3)


def test_rotated_candidates_are_inclusive_on_edges() -> None:
    """An anchor exactly on an edge of a (widened) rotated box is a candidate (README step 3, no eps)."""
    assigner = RotatedTaskAlignedAssigner(topk=3, num_classes=2, small_target_stride=16.0)
    gt = torch.tensor([[[40.0, 40.0, 32.0, 16.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]]])
    real = torch.tensor([[[1.0], [0.0]]])
    points = torch.tensor([[24.0, 40.0], [56.0, 48.0], [56.1, 40.0], [40.0, 31.9], [0.0, 0.0]])
    mask = assigner.candidates(points, gt, real, {})
    assert mask[0, 0].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    # a 4x4 box is widened to 16x16 for the test only; the padding row is never widened (all corners at 0)
    small = torch.tensor([[[40.0, 40.0, 4.0, 4.0, 0.3], [0.0, 0.0, 0.0, 0.0, 0.0]]])
    assert float(assigner.candidates(torch.tensor([[46.0, 40.0]]), small, real, {})[0, 0, 0]) == 1.0
    assert float(assigner.candidates(torch.tensor([[0.0, 0.0]]), small, real, {})[0, 1, 0]) == 1.0


def test_objective_without_targets_has_zero_box_terms_and_finite_grads() -> None:
    model = SimpleNamespace(task="obb", num_classes=2, reg_max=1, strides=(8, 16, 32), end2end=False)
    loss = obb_objective(model, gains={"box": 7.5, "unknown": 3.0}, one2one=False, sigmas=None)
    assert loss.loss_names == ("box_loss", "cls_loss", "l1_loss", "angle_loss")
    level_shapes = [(4, 4), (2, 2), (1, 1)]
    boxes = (torch.randn(2, 4, 21) * 50).requires_grad_(True)
    angle = (torch.randn(2, 1, 21) * 9).requires_grad_(True)
    scores = torch.randn(2, 2, 21, requires_grad=True)
    output = TrainOutput(BranchOutput(boxes, scores, {"angle": angle}), None, level_shapes, (8, 16, 32))
    empty = {"batch_idx": torch.zeros(0), "cls": torch.zeros(0, 1), "rboxes": torch.zeros(0, 5)}
    result = loss.branch_loss(output, output.one2many, loss.pack(empty, 2, (32, 32)), empty)
    assert result.loss_items[[0, 2, 3]].tolist() == [0.0, 0.0, 0.0]
    result.total.backward()
    assert boxes.grad is not None and angle.grad is not None
    assert float(boxes.grad.abs().sum()) == 0.0 and float(angle.grad.abs().sum()) == 0.0
    # tiny boxes (< 2 px) are dropped before padding: the batch then behaves like the empty one
    tiny = {
        "batch_idx": torch.zeros(1),
        "cls": torch.zeros(1, 1),
        "rboxes": torch.tensor([[0.5, 0.5, 0.05, 0.5, 0.0]]),
    }
    assert loss.pack(tiny, 2, (32, 32)).gt_bboxes.shape == (2, 0, 5)


def test_pack_rejects_axis_aligned_boxes() -> None:
    batch = {"batch_idx": torch.zeros(1), "cls": torch.zeros(1, 1), "bboxes": torch.rand(1, 4)}
    with pytest.raises(ValueError, match="rboxes"):
        pack_rotated_targets(batch, 1, (32, 32))


@pytest.mark.parametrize(("family", "sigmoid"), [("yolov8", True), ("yolo11", True), ("yolo26", False)])
def test_obb_head_angle_activation_per_family(family: str, sigmoid: bool) -> None:
    """Classic heads: θ = (sigmoid − 0.25)·π; YOLO26's OBB26 head uses its raw output (README head layout)."""
    from lucid_core.models import build_model

    model = build_model(family, "obb", "n", 2)
    raw = torch.linspace(-4, 6, 11)
    assert model.head.angle_sigmoid is sigmoid
    expected = sigmoid_angle_radians(raw) if sigmoid else raw
    assert torch.equal(model.head.angle_radians(raw), expected)
    assert obb_objective(model, gains={}).angle_sigmoid is sigmoid


@pytest.mark.shared
@pytest.mark.parametrize("name", FILES)
def test_static_row_count_and_dropped_rows_pack_the_same(shared_dir: Path, name: str) -> None:
    """M = N (the compile-time packing) gives the fixture's losses and assignment; a dropped row leaves no trace."""
    fx = _fixture(shared_dir, name)
    meta, flat = fx["meta"], fx["targets"]
    imgsz = (int(meta["imgsz_hw"][0]), int(meta["imgsz_hw"][1]))
    batch_size = int(meta["input_shape"][0])
    packed = pack_rotated_targets(flat, batch_size, imgsz)
    static = pack_rotated_targets(flat, batch_size, imgsz, rows=flat["bboxes"].shape[0])
    m = packed.gt_bboxes.shape[1]
    assert torch.equal(static.gt_bboxes[:, :m], packed.gt_bboxes) and not static.mask_gt[:, m:].any()
    branch = _branches(fx)[0]
    record = _part(fx["results"]["with_targets"], branch)
    output = _output(_part(fx["head_outputs"], branch), meta, [None])
    result = _loss(fx, branch).branch_loss(output, output.one2many, static, {})
    _check_values(result, record, _loss(fx, branch).loss_names)
    assert torch.equal(result.assignment.fg_mask, record["assigned"]["fg_mask"])
    assert torch.equal(result.assignment.target_gt_idx, record["assigned"]["target_gt_idx"])
    # a 1-px-wide row inserted in the middle of image 0 is dropped before padding
    tiny = torch.tensor([[0.5, 0.5, 1.0 / imgsz[1], 0.2, 0.3]])
    mid = int((flat["batch_idx"] == 0).sum()) // 2
    with_tiny = {
        "batch_idx": torch.cat((flat["batch_idx"][:mid], torch.zeros(1), flat["batch_idx"][mid:])),
        "cls": torch.cat((flat["cls"][:mid], torch.zeros(1, 1), flat["cls"][mid:])),
        "bboxes": torch.cat((flat["bboxes"][:mid], tiny, flat["bboxes"][mid:])),
    }
    again = pack_rotated_targets(with_tiny, batch_size, imgsz)
    assert torch.equal(again.gt_bboxes, packed.gt_bboxes) and torch.equal(again.gt_labels, packed.gt_labels)


@pytest.mark.slow  # ~35 s of tracing on a shared 2-core machine
def test_obb_objective_traces_fullgraph() -> None:
    """``torch.compile(fullgraph=True)`` (Dynamo + AOT autograd): one graph, forward and backward equal eager."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    level_shapes = [(4, 4), (2, 2), (1, 1)]  # 32x32 input, 21 anchors
    boxes = torch.randn(2, 64, 21, generator=g).requires_grad_(True)
    scores = torch.randn(2, 3, 21, generator=g).requires_grad_(True)
    angle = torch.randn(2, 1, 21, generator=g).requires_grad_(True)
    output = TrainOutput(BranchOutput(boxes, scores, {"angle": angle}), None, level_shapes, (8, 16, 32))
    batch = {
        "batch_idx": torch.tensor([0.0, 0.0, 0.0, 1.0]),
        "cls": torch.tensor([[0.0], [2.0], [1.0], [1.0]]),
        "rboxes": torch.tensor(
            [
                [0.5, 0.5, 0.6, 0.3, 0.4],
                [0.3, 0.3, 0.02, 0.3, 0.0],
                [0.25, 0.7, 0.3, 0.2, 1.2],
                [0.6, 0.6, 0.5, 0.4, -0.3],
            ]
        ),  # row 1 is under 2 px wide: dropped
    }
    objective = OneToManyObjective(OBBLoss(3, 16, (8, 16, 32)))
    eager_total, eager_items = objective(output, batch)
    eager_grads = torch.autograd.grad(eager_total, [boxes, scores, angle])
    compiled = torch.compile(objective.__call__, fullgraph=True, backend="aot_eager")
    total, items = compiled(output, batch)
    grads = torch.autograd.grad(total, [boxes, scores, angle])
    torch.testing.assert_close(total, eager_total, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(items, eager_items, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, eager_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
