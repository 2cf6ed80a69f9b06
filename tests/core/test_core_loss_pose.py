"""Pose objective against the reference fixtures (pose_loss_yolo11n-pose.pt, pose_loss_yolo26n-pose.pt) and the
README's rules for other keypoint layouts (shared/fixtures/README.md, "pose_loss_*.pt").

Every case, branch, shape and expected value is read from the file: the top-level case, every entry of
``variants`` (hidden files), every ``results`` key (``with_targets``, ``empty_targets``,
``with_targets_no_sigma``, ...) and, for the classic file, the ``checkpoint`` record (with the real
``weights/yolo11n-pose.pt`` imported through lucid_core.interop).
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

from lucid_core.assign.keypoint_aware import KeypointAwareAssigner
from lucid_core.loss.objective import EndToEndObjective
from lucid_core.loss.schedule import BranchWeightSchedule
from lucid_core.loss.terms.pose import (
    PoseLoss,
    default_keypoint_sigmas,
    pack_pose_targets,
    pose_objective,
    resolve_keypoint_sigmas,
    rle_keypoint_weights,
    validate_keypoint_sigmas,
)
from lucid_core.nn.flow import RealNVP
from lucid_core.outputs import BranchOutput, TrainOutput
from lucid_core.tasks import build_objective

RTOL, ATOL = 1e-5, 1e-6  # README: losses and head-output gradients with a different op order
FLOW_RTOL, FLOW_ATOL = 1e-4, 1e-6  # README: flow-parameter gradients
FILES = ("pose_loss_yolo11n-pose.pt", "pose_loss_yolo26n-pose.pt")
BRANCHES = ("one2many", "one2one")
FLOW_LAYERS = (0, 2, 4)  # Linear layers of a coupling net (checkpoint keys s.{i}.{0,2,4})


# ----------------------------------------------------------------------------------------------- fixture plumbing
@pytest.fixture(scope="module", params=FILES)
def fixture_file(request: pytest.FixtureRequest, shared_dir: Path) -> dict[str, Any]:
    fx: dict[str, Any] = torch.load(
        shared_dir / "fixtures" / request.param, weights_only=True, map_location="cpu"
    )
    assert fx["schema"] == "lucid-fixture/pose_loss/1"
    return fx


def _cases(fx: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The file's own case and every variant (variants use the top-level flow_state)."""
    yield "main", fx
    for name, case in dict(fx.get("variants", {})).items():
        yield str(name), case


def _targets_key(case: dict[str, Any], results_key: str) -> str:
    """The case's targets entry a results key was computed from: ``targets``, ``targets_empty``,
    ``targets_xy_only``, ... — the one whose extra words all appear in the results key (most words wins)."""
    words = set(results_key.split("_"))
    options = [k for k in case if k == "targets" or k.startswith("targets_")]
    matching = [k for k in options if set(k.split("_")[1:]) <= words]
    assert matching, f"no targets entry for results key {results_key!r} among {options}"
    return max(matching, key=lambda k: len(k.split("_")))


def _load_flow(state: dict[str, Any]) -> RealNVP:
    """The fixture's flow_state loaded through the checkpoint key layout the README names
    (``s.{i}.{0,2,4}`` / ``t.{i}.{0,2,4}`` weights and biases, a ``mask`` buffer, unused ``loc`` / ``cov``)."""
    flow = RealNVP(num_layers=len(state["scale"]), hidden=int(state["scale"][0]["w0"].shape[0]))
    tensors: dict[str, Tensor] = {"mask": state["masks"], "loc": torch.zeros(2), "cov": torch.eye(2)}
    for prefix, key in (("s", "scale"), ("t", "translate")):
        for i, params in enumerate(state[key]):
            for j, layer in enumerate(FLOW_LAYERS):
                tensors[f"{prefix}.{i}.{layer}.weight"] = params[f"w{j}"]
                tensors[f"{prefix}.{i}.{layer}.bias"] = params[f"b{j}"]
    flow.load_state_dict(tensors, strict=True)
    return flow


def _stand_in(meta: dict[str, Any], flow: RealNVP | None) -> types.SimpleNamespace:
    """A model-shaped object with exactly what the factory reads."""
    end2end = bool(meta["end2end"])
    head = types.SimpleNamespace(kpt_shape=tuple(meta["kpt_shape"]), rle=end2end, flow_model=flow)
    return types.SimpleNamespace(
        task="pose",
        head=head,
        num_classes=int(meta["nc"]),
        reg_max=int(meta["reg_max"]),
        strides=tuple(meta["strides"]),
        end2end=end2end,
    )


def _assigner_params(meta: dict[str, Any], branch: str) -> dict[str, Any]:
    params: dict[str, Any] = meta["assigner_params"]
    return dict(params[branch]) if branch in params else dict(params)


def _objective(meta: dict[str, Any], flow: RealNVP | None, branch: str) -> PoseLoss:
    o2m, o2o = _assigner_params(meta, "one2many"), _assigner_params(meta, "one2one")
    extra: dict[str, Any] = {}
    if "level_range" in o2m:
        extra = {"level_range": tuple(o2m["level_range"]), "oks_area_factor": o2m["oks_area_factor"]}
    obj = pose_objective(
        _stand_in(meta, flow),
        gains=meta["hyp"],
        one2one=branch == "one2one",
        topk=o2m["topk"],
        alpha=o2m["alpha"],
        beta=o2m["beta"],
        o2o_topk=o2o["topk"],
        o2o_topk2=o2o["topk2"],
        **extra,
    )
    params = _assigner_params(meta, branch)
    assigner = obj.assigner
    assert (assigner.topk, assigner.topk2) == (params["topk"], params["topk2"])
    assert (assigner.alpha, assigner.beta, assigner.eps) == (params["alpha"], params["beta"], params["eps"])
    assert assigner.small_target_stride == params["stride_val"]
    assert isinstance(assigner, KeypointAwareAssigner) == ("level_range" in params)
    torch.testing.assert_close(obj.sigmas, meta["sigmas"], rtol=0, atol=0)
    if "rle_target_weights" in meta:
        torch.testing.assert_close(obj.rle_weights, meta["rle_target_weights"], rtol=0, atol=0)
    return obj


def _level_shapes(meta: dict[str, Any]) -> list[tuple[int, int]]:
    return [(int(h), int(w)) for h, w in meta["level_shapes_hw"]]


def _branch_output(heads: dict[str, Any], with_sigma: bool) -> BranchOutput:
    extras = {"keypoints": heads["kpts"].float().requires_grad_(True)}
    if with_sigma and "kpts_sigma" in heads:
        extras["kpt_sigma"] = heads["kpts_sigma"].float().requires_grad_(True)
    return BranchOutput(
        heads["boxes"].float().requires_grad_(True), heads["scores"].float().requires_grad_(True), extras
    )


def _dense(sparse: dict[str, Any]) -> Tensor:
    grad = torch.zeros(sparse["shape"])
    grad.permute(0, 2, 1)[sparse["b"], sparse["a"]] = sparse["values"]
    return grad


class _RecordingAssigner:
    """Forwards to the objective's assigner and keeps its inputs (to check candidate pairs via its hooks)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        return self.inner(*args)


def _candidate_pairs(assigner: Any, args: tuple[Any, ...]) -> dict[str, Tensor]:
    """README steps 1-4 through the assigner's own hooks: candidate pairs, u, t, OKS use, conflict count."""
    pd_scores, pd_bboxes, anc_points, gt_labels, gt_bboxes, mask_gt, extras = args
    extras = {} if extras is None else extras
    real = mask_gt.to(pd_scores.dtype)
    candidate = assigner.candidates(anc_points, gt_bboxes, real, extras) * real
    is_candidate = candidate > 0
    labels = gt_labels.long().squeeze(-1).clamp(min=0)
    scores = pd_scores.permute(0, 2, 1).gather(1, labels.unsqueeze(-1).expand(-1, -1, pd_scores.shape[1]))
    scores = torch.where(is_candidate, scores, torch.zeros_like(scores))
    overlaps = assigner.overlaps(gt_bboxes, pd_bboxes, is_candidate, scores, extras)
    align = scores.pow(assigner.alpha) * overlaps.pow(assigner.beta)
    topk = torch.topk(align, assigner.topk, dim=-1).indices
    selected = torch.zeros_like(align).scatter_(-1, topk, 1.0) * candidate
    b, j, a = is_candidate.nonzero(as_tuple=True)
    out = {
        "b": b,
        "j": j,
        "a": a,
        "overlap": overlaps[b, j, a],
        "align_metric": align[b, j, a],
        "conflicts": (selected.sum(1) > 1).sum(),
    }
    if isinstance(assigner, KeypointAwareAssigner):
        out["overlap_is_oks"] = assigner.row_uses_oks(extras)[b, j]
    return out


def _check_flow_grads(flow: RealNVP | None, record: dict[str, Any]) -> None:
    grads = {} if flow is None else {n: p.grad for n, p in flow.named_parameters()}
    if "grad_flow" in record:
        assert flow is not None
        for nets, key in ((flow.s, "scale"), (flow.t, "translate")):
            for net, expected in zip(nets, record["grad_flow"][key], strict=True):
                for i, layer in enumerate(FLOW_LAYERS):
                    for attr, name in (("weight", f"w{i}"), ("bias", f"b{i}")):
                        grad = getattr(net[layer], attr).grad
                        got = torch.zeros_like(expected[name]) if grad is None else grad
                        torch.testing.assert_close(
                            got, expected[name], rtol=FLOW_RTOL, atol=FLOW_ATOL, msg=f"grad_flow.{key}.{name}"
                        )
    if record.get("grad_flow_all_zero"):
        assert all(g is None or not bool(g.any()) for g in grads.values())
    if "grad_flow_sq_norm" in record:
        sq = sum(float(g.double().pow(2).sum()) for g in grads.values() if g is not None)
        assert sq == pytest.approx(float(record["grad_flow_sq_norm"]), rel=2 * FLOW_RTOL, abs=1e-12)


def _check_values(got: Any, record: dict[str, Any]) -> None:
    for key in ("loss_vector_times_bs", "loss_items", "total"):
        torch.testing.assert_close(getattr(got, key), record[key], rtol=RTOL, atol=ATOL)


def _check_assignment(result: Any, record: dict[str, Any], num_classes: int) -> None:
    assigned, assignment = record["assigned"], result.assignment
    assert torch.equal(assignment.fg_mask, assigned["fg_mask"])
    for key, expected in (("target_gt_idx", "target_gt_idx"), ("target_labels", "target_labels")):
        value = getattr(assignment, key)
        assert value.dtype == assigned[expected].dtype, key
        assert torch.equal(value, assigned[expected]), key
    torch.testing.assert_close(assignment.target_bboxes, assigned["target_bboxes_px"], rtol=RTOL, atol=ATOL)
    labels = assignment.target_labels.long().clamp(max=num_classes - 1).unsqueeze(-1)
    at_label = assignment.target_scores.gather(-1, labels).squeeze(-1)
    torch.testing.assert_close(at_label, assigned["target_scores_at_label"], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(result.target_scores_sum, assigned["target_scores_sum"], rtol=RTOL, atol=ATOL)
    assert assignment.fg_mask.sum(1).tolist() == list(assigned["num_fg_per_image"])


def _check_details(result: Any, record: dict[str, Any]) -> None:
    details = result.details or {}
    for group in ("keypoint_terms", "rle_terms"):
        assert (group in details) == (group in record), group
        for key, expected in dict(record.get(group, {})).items():
            got = details[group][key]
            if expected.dtype == torch.bool:
                assert torch.equal(got, expected), (group, key)
            else:
                torch.testing.assert_close(got, expected, rtol=RTOL, atol=ATOL, msg=f"{group}.{key}")


def _check_branch(
    case: dict[str, Any],
    record: dict[str, Any],
    targets_key: str,
    branch: str,
    flow: RealNVP | None,
    with_sigma: bool,
) -> None:
    """One branch record R: values, names, padded GT, assignment, candidates, intermediates and gradients."""
    meta = case["meta"]
    heads = case["head_outputs"][branch] if meta["end2end"] else case["head_outputs"]
    obj = _objective(meta, flow, branch)
    if "loss_names" in record:
        assert list(obj.loss_names) == list(record["loss_names"])
    recorder = _RecordingAssigner(obj.assigner)
    obj.assigner = recorder  # type: ignore[assignment]
    batch = case[targets_key]
    batch_size = int(meta["input_shape"][0])
    targets = obj.pack(batch, batch_size, tuple(meta["imgsz_hw"]))
    if "gt_padded" in record:
        gt = record["gt_padded"]
        assert torch.equal(targets.boxes.gt_labels, gt["gt_labels"])
        assert torch.equal(targets.boxes.gt_bboxes, gt["gt_bboxes_xyxy_px"])
        assert torch.equal(targets.boxes.mask_gt, gt["mask_gt"])
        if "gt_kpts_px" in gt:
            assert torch.equal(targets.keypoints, gt["gt_kpts_px"])
    out = _branch_output(heads, with_sigma)
    output = TrainOutput(out, None, _level_shapes(meta), tuple(int(s) for s in meta["strides"]))
    if flow is not None:
        flow.zero_grad(set_to_none=True)
    result = obj.branch_loss(output, out, targets, batch, one2one=branch == "one2one")
    _check_values(result, record)
    if "assigned" not in record:
        return
    _check_assignment(result, record, int(meta["nc"]))
    pairs = _candidate_pairs(recorder.inner, recorder.calls[-1])
    assert int(pairs.pop("conflicts")) == int(record["assigned"]["num_conflicts_resolved"])
    if "candidates" in record:
        for key, expected in record["candidates"].items():
            if expected.dtype in (torch.int64, torch.bool):
                assert torch.equal(pairs[key], expected), key
            else:
                torch.testing.assert_close(pairs[key], expected, rtol=RTOL, atol=ATOL, msg=key)
    _check_details(result, record)
    result.total.backward()
    torch.testing.assert_close(out.scores.grad, record["grad_scores"], rtol=RTOL, atol=ATOL)
    for grad_key, tensor in (
        ("grad_boxes_sparse", out.boxes),
        ("grad_kpts_sparse", out.extras["keypoints"]),
        ("grad_kpts_sigma_sparse", out.extras.get("kpt_sigma")),
    ):
        if grad_key in record:
            assert tensor is not None, grad_key
            grad = torch.zeros_like(tensor) if tensor.grad is None else tensor.grad
            torch.testing.assert_close(grad, _dense(record[grad_key]), rtol=RTOL, atol=ATOL, msg=grad_key)
    _check_flow_grads(flow, record)


def _check_e2e(
    case: dict[str, Any],
    records: dict[str, Any],
    targets_key: str,
    flow: RealNVP | None,
    with_sigma: bool,
    constants: dict[str, Any],
) -> None:
    meta = case["meta"]
    hyp = meta["hyp"]
    e2e = records["e2e"]
    objective = EndToEndObjective(
        _objective(meta, flow, "one2many"),
        _objective(meta, flow, "one2one"),
        BranchWeightSchedule(
            epochs=int(hyp["epochs"]),
            o2m_init=float(constants["o2m_init"]),
            o2m_final=float(constants["final_o2m"]),
        ),
    )
    if "o2m_weight" in e2e:
        assert (objective.schedule.o2m, objective.schedule.o2o) == (e2e["o2m_weight"], e2e["o2o_weight"])
    outs = {b: _branch_output(case["head_outputs"][b], with_sigma) for b in BRANCHES}
    output = TrainOutput(
        outs["one2many"], outs["one2one"], _level_shapes(meta), tuple(int(s) for s in meta["strides"])
    )
    batch = case[targets_key]
    if flow is not None:
        flow.zero_grad(set_to_none=True)
    result = objective.result(output, batch)
    _check_values(result, e2e)
    if "loss_names" in e2e:
        assert list(objective.loss_names) == list(e2e["loss_names"])
    result.total.backward()
    for b in BRANCHES:
        out = outs[b]
        if f"grad_scores_{b}" in e2e:
            torch.testing.assert_close(out.scores.grad, e2e[f"grad_scores_{b}"], rtol=RTOL, atol=ATOL)
        for name, tensor in (
            ("boxes", out.boxes),
            ("kpts", out.extras["keypoints"]),
            ("kpts_sigma", out.extras.get("kpt_sigma")),
        ):
            key = f"grad_{name}_{b}_sparse"
            if key in e2e:
                assert tensor is not None, key
                grad = torch.zeros_like(tensor) if tensor.grad is None else tensor.grad
                torch.testing.assert_close(grad, _dense(e2e[key]), rtol=RTOL, atol=ATOL, msg=key)
    _check_flow_grads(flow, e2e)
    after = records.get("e2e_after_10_updates")
    if after is not None:
        for _ in range(int(after["updates"])):
            objective.step_epoch()
        assert (objective.schedule.o2m, objective.schedule.o2o) == (after["o2m_weight"], after["o2o_weight"])
        outs = {b: _branch_output(case["head_outputs"][b], with_sigma) for b in BRANCHES}
        output = TrainOutput(
            outs["one2many"], outs["one2one"], _level_shapes(meta), tuple(int(s) for s in meta["strides"])
        )
        again = objective.result(output, batch)
        torch.testing.assert_close(
            again.loss_vector_times_bs, after["loss_vector_times_bs"], rtol=RTOL, atol=ATOL
        )
        torch.testing.assert_close(again.total, after["total"], rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------------------------------- fixtures
@pytest.mark.shared
def test_pose_loss_reproduces_every_case_of_the_file(fixture_file: dict[str, Any]) -> None:
    flow_state = fixture_file.get("flow_state")
    checked = 0
    for name, case in _cases(fixture_file):
        meta = case["meta"]
        torch.testing.assert_close(resolve_keypoint_sigmas(meta["kpt_shape"]), meta["sigmas"], rtol=0, atol=0)
        for results_key, records in case["results"].items():
            targets_key = _targets_key(case, results_key)
            with_sigma = "no_sigma" not in results_key
            flow = _load_flow(flow_state) if meta["end2end"] else None
            try:
                if not meta["end2end"]:
                    _check_branch(case, records, targets_key, "one2many", flow, with_sigma)
                    checked += 1
                    continue
                for branch in BRANCHES:
                    _check_branch(case, records[branch], targets_key, branch, flow, with_sigma)
                    checked += 1
                constants = case.get("e2e_constants", fixture_file.get("e2e_constants"))
                _check_e2e(case, records, targets_key, flow, with_sigma, constants)
            except AssertionError as err:
                raise AssertionError(f"case {name!r}, results {results_key!r}: {err}") from err
    assert checked >= 2


@pytest.mark.shared
def test_checkpoint_record_loss_on_stored_outputs(fixture_file: dict[str, Any]) -> None:
    """The ``checkpoint`` record (real YOLO11n-pose outputs, rounded to float16) as a validation loss."""
    if "checkpoint" not in fixture_file:
        pytest.skip("this file has no checkpoint record")
    record = fixture_file["checkpoint"]
    case = dict(fixture_file, head_outputs=record["head_outputs"])
    _check_branch(case, record["result"], "targets", "one2many", None, with_sigma=True)


@pytest.mark.shared
def test_checkpoint_record_with_the_imported_weights(fixture_file: dict[str, Any], shared_dir: Path) -> None:
    """Our import of the real checkpoint, in eval mode on ``input_uint8 / 255``, reproduces the stored raw head
    outputs and the loss of the unrounded outputs (README: within ~1e-3 relative)."""
    if "checkpoint" not in fixture_file or "input_uint8" not in fixture_file:
        pytest.skip("this file has no checkpoint record")
    from lucid_core.checkpoint import file_sha256
    from lucid_core.interop import import_checkpoint

    record = fixture_file["checkpoint"]
    path = shared_dir / record["info"]["file"]
    assert file_sha256(path) == record["info"]["sha256"]
    model, _ = import_checkpoint(path)
    model.eval()
    model.head.training = True  # raw branch outputs, BatchNorm with running statistics (README: eval mode)
    with torch.no_grad():
        output = model(fixture_file["input_uint8"].float() / 255)
    assert isinstance(output, TrainOutput)
    stored = record["head_outputs"]
    ours = {
        "boxes": output.one2many.boxes,
        "scores": output.one2many.scores,
        "kpts": output.one2many.extras["keypoints"],
    }
    for key, value in ours.items():
        bound = float(record["result"]["max_abs_rounding"][key]) + 1e-2
        assert float((value - stored[key].float()).abs().max()) <= bound, key
    meta = fixture_file["meta"]
    obj = _objective(meta, None, "one2many")
    result = obj.branch_loss(
        output, output.one2many, obj.pack(fixture_file["targets"], 2, tuple(meta["imgsz_hw"])), {}
    )
    expected = record["result"]["loss_vector_times_bs_unrounded_outputs"]
    torch.testing.assert_close(result.loss_vector_times_bs, expected, rtol=1e-3, atol=1e-5)


# --------------------------------------------------------------------------------------- rules for other layouts
def _synthetic_case(kpt_shape: tuple[int, int], seed: int = 0, rle: bool = False) -> dict[str, Any]:
    """A small random batch (64x64 input, two images, three people) for rule tests."""
    g = torch.Generator().manual_seed(seed)
    num_kpts, dims = kpt_shape
    level_shapes = [(8, 8), (4, 4), (2, 2)]
    num_anchors = sum(h * w for h, w in level_shapes)
    reg_max = 1 if rle else 16
    heads = {
        "boxes": torch.rand(2, 4 * reg_max, num_anchors, generator=g) * (3 if rle else 1),
        "scores": torch.randn(2, 1, num_anchors, generator=g),
        "kpts": torch.randn(2, num_kpts * dims, num_anchors, generator=g) * 0.5,
        "kpts_sigma": torch.randn(2, 2 * num_kpts, num_anchors, generator=g),
    }
    boxes = torch.tensor([[0.5, 0.5, 0.6, 0.7], [0.3, 0.4, 0.3, 0.5], [0.6, 0.5, 0.5, 0.6]])
    kpts = torch.rand(3, num_kpts, 3, generator=g) * 0.4 + 0.3
    kpts[..., 2] = torch.randint(0, 3, (3, num_kpts), generator=g).float()
    kpts[:, 0, 2] = 2.0
    batch = {
        "batch_idx": torch.tensor([0.0, 1.0, 1.0]),
        "cls": torch.zeros(3, 1),
        "bboxes": boxes,
        "keypoints": kpts if dims == 3 else kpts[..., :2].clone(),
    }
    meta = {"kpt_shape": list(kpt_shape), "reg_max": reg_max, "end2end": rle, "nc": 1, "strides": [8, 16, 32]}
    return {"heads": heads, "batch": batch, "level_shapes": level_shapes, "meta": meta}


def _run(case: dict[str, Any], sigmas: Any = None, flow: RealNVP | None = None) -> tuple[PoseLoss, Any]:
    meta = case["meta"]
    obj = pose_objective(_stand_in(meta, flow), sigmas=sigmas)
    out = _branch_output(case["heads"], with_sigma=True)
    output = TrainOutput(out, None, case["level_shapes"], (8, 16, 32))
    targets = obj.pack(case["batch"], 2, (64, 64))
    return obj, obj.branch_loss(output, out, targets, case["batch"])


def test_sigma_defaults_follow_the_readme() -> None:
    coco = default_keypoint_sigmas((17, 3))
    expected = (
        torch.tensor(
            [
                0.26,
                0.25,
                0.25,
                0.35,
                0.35,
                0.79,
                0.79,
                0.72,
                0.72,
                0.62,
                0.62,
                1.07,
                1.07,
                0.87,
                0.87,
                0.89,
                0.89,
            ]
        )
        / 10
    )
    assert torch.equal(coco, expected)
    for shape in ((17, 2), (5, 3), (1, 2), (21, 3)):
        assert torch.equal(default_keypoint_sigmas(shape), torch.ones(shape[0]) / shape[0]), shape
    assert torch.equal(rle_keypoint_weights((17, 2)), torch.ones(17))
    assert rle_keypoint_weights((17, 3))[9].item() == 1.5


def test_dataset_sigmas_are_validated_and_used() -> None:
    assert torch.equal(
        resolve_keypoint_sigmas((4, 3), [0.1, 0.2, 0.3, 0.4]), torch.tensor([0.1, 0.2, 0.3, 0.4])
    )
    with pytest.raises(ValueError, match="3 keypoint sigmas given for 4 keypoints"):
        resolve_keypoint_sigmas((4, 3), [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="finite and > 0"):
        validate_keypoint_sigmas([0.1, 0.0, 0.3], 3, "data.yaml: kpt_sigmas")
    with pytest.raises(ValueError, match=r"data\.yaml: kpt_sigmas"):
        validate_keypoint_sigmas(["a", 1], 2, "data.yaml: kpt_sigmas")
    case = _synthetic_case((4, 3))
    obj, result = _run(case, sigmas=[0.5, 0.5, 0.5, 0.5])
    assert torch.equal(obj.sigmas, torch.full((4,), 0.5))
    _, default = _run(case)  # 1/K = 0.25: tighter sigmas give a larger OKS-style loss
    assert float(default.loss_items[1]) > float(result.loss_items[1]) > 0


def test_pose_term_is_the_mean_of_per_person_means_and_unlabelled_people_count() -> None:
    """README step 5: c_f·(1 − exp(−e))·m averaged over n·K; a person without labelled keypoints adds 0 but counts."""
    case = _synthetic_case((5, 3))
    _, result = _run(case)
    terms = result.details["keypoint_terms"]
    pred, gt, mask, area = (
        terms["pred_kpts_grid"],
        terms["gt_kpts_grid"],
        terms["kpt_mask"],
        terms["area_grid2"],
    )
    sigmas = torch.ones(5) / 5
    e = ((pred[..., 0] - gt[..., 0]) ** 2 + (pred[..., 1] - gt[..., 1]) ** 2) / (
        (2 * sigmas) ** 2 * (area + 1e-9) * 2
    )
    per_person = [
        ((1 - torch.exp(-e[i]))[mask[i]]).mean() if mask[i].any() else torch.tensor(0.0)
        for i in range(len(e))
    ]
    torch.testing.assert_close(terms["pose_loss_raw"], torch.stack(per_person).mean(), rtol=1e-5, atol=1e-7)
    assert torch.equal(mask, gt[..., 2] != 0)

    unlabelled = _synthetic_case((5, 3))
    unlabelled["batch"]["keypoints"][0, :, 2] = 0  # image 0's only person has no labelled keypoint
    _, res = _run(unlabelled)
    terms = res.details["keypoint_terms"]
    fg_image0 = int(res.assignment.fg_mask[0].sum())
    assert fg_image0 > 0 and not terms["kpt_mask"][:fg_image0].any()
    contributions = []
    for i in range(len(terms["kpt_mask"])):
        m = terms["kpt_mask"][i]
        d = ((terms["pred_kpts_grid"][i, :, :2] - terms["gt_kpts_grid"][i, :, :2]) ** 2).sum(-1)
        e = d / ((2 * sigmas) ** 2 * (terms["area_grid2"][i] + 1e-9) * 2)
        contributions.append(((1 - torch.exp(-e))[m]).mean() if m.any() else torch.tensor(0.0))
    torch.testing.assert_close(
        terms["pose_loss_raw"], torch.stack(contributions).mean(), rtol=1e-5, atol=1e-7
    )
    assert math.isfinite(float(res.total.detach()))


def test_two_dimensional_keypoints_have_no_kobj_and_count_every_keypoint() -> None:
    """README: nd = 2 → kobj 0; keypoints handed as (N, K, 2) get a channel of ones (every keypoint counts)."""
    case = _synthetic_case((6, 2))
    assert case["batch"]["keypoints"].shape[-1] == 2
    obj, result = _run(case)
    assert obj.loss_names == ("box_loss", "pose_loss", "kobj_loss", "cls_loss", "dfl_loss")
    assert float(result.loss_items[2]) == 0.0 and float(result.loss_items[1]) > 0
    terms = result.details["keypoint_terms"]
    assert terms["pred_kpts_grid"].shape[-1] == 2 and bool(terms["kpt_mask"].all())
    packed = pack_pose_targets(case["batch"], 2, (64, 64), 6)
    assert packed.keypoints.shape == (2, 2, 6, 3) and bool(
        (packed.keypoints[..., 2][packed.boxes.mask_gt[..., 0] > 0] == 1).all()
    )
    result.total.backward()

    rle_case = _synthetic_case((6, 2), rle=True)
    obj, result = _run(rle_case, flow=RealNVP())
    assert obj.loss_names[-1] == "rle_loss" and "rle_terms" in result.details
    assert result.details["rle_terms"]["sigma"].shape == (
        int(result.details["keypoint_terms"]["kpt_mask"].sum()),
        2,
    )
    assert float(result.loss_items[2]) == 0.0


def test_yolo26_decode_and_empty_batch_give_zero_task_terms() -> None:
    case = _synthetic_case((4, 3), rle=True)
    case["batch"] = {k: v[:0] for k, v in case["batch"].items()}
    flow = RealNVP()
    obj, result = _run(case, flow=flow)
    assert obj.loss_names == ("box_loss", "pose_loss", "kobj_loss", "cls_loss", "l1_loss", "rle_loss")
    items = result.loss_items.tolist()
    assert items[:3] == [0.0, 0.0, 0.0] and items[4:] == [0.0, 0.0] and items[3] > 0
    result.total.backward()
    assert all(p.grad is None or not bool(p.grad.any()) for p in flow.parameters())


def test_keypoint_aware_gate_keeps_ungated_candidates_for_rows_without_any() -> None:
    """README step 3.2: an anchor of stride s passes when (side >= 2s or s is the smallest stride) and
    (side <= 12s or s is the largest); a row with no gated candidate keeps its ungated ones."""
    from lucid_core.geometry.anchors import make_anchors

    grid, stride = make_anchors([(80, 8), (40, 4), (20, 2)], (8, 16, 32))  # a 640 x 64 input
    points = grid * stride
    assigner = KeypointAwareAssigner(
        torch.ones(2) / 2, (8, 16, 32), topk=3, num_classes=1, small_target_stride=16
    )
    gt = torch.tensor(
        [
            [
                [0.0, 0.0, 64.0, 640.0],  # side 202: only stride 32 (202 > 12·16)
                [20.0, 40.0, 40.0, 60.0],  # side 20: stride 8 only (20 < 2·16)
                [24.0, 0.0, 40.0, 640.0],  # side 101: stride 8 gated out, no stride-16/32 anchor inside
                [0.0, 0.0, 0.0, 0.0],  # padding
            ]
        ]
    )
    real = torch.tensor([[[1.0], [1.0], [1.0], [0.0]]])
    cand = assigner.candidates(points, gt, real, {"stride_tensor": stride})
    base = assigner._candidates(points, gt, real)
    s = stride.view(-1)
    wh = gt[0, :, 2:] - gt[0, :, :2]
    for row in range(3):
        side = float((wh[row, 0] * wh[row, 1]).clamp(min=0).sqrt())
        gate = ((side >= 2 * s) | (s == 8)) & ((side <= 12 * s) | (s == 32))
        gated = base[0, row] * gate
        expected = gated if bool(gated.any()) else base[0, row]
        assert torch.equal(cand[0, row], expected), row
    assert bool(cand[0, 0][s == 32].any()) and not bool(cand[0, 0][s < 32].any())
    assert bool(cand[0, 1][s == 8].any()) and not bool(cand[0, 1][s > 8].any())
    assert bool(cand[0, 2][s == 8].any()) and torch.equal(cand[0, 2], base[0, 2])  # kept ungated
    assert not bool(cand[0, 3].any())


def test_build_objective_and_real_models_train(tmp_path: Path) -> None:
    """Smoke: yolo11 and yolo26 pose models in train mode on a collated batch → finite loss, gradients."""
    from lucid_core.models import build_model

    torch.manual_seed(0)
    case = _synthetic_case((17, 3))
    for family in ("yolo11", "yolo26"):
        model = build_model(family, "pose", "n", 1, kpt_shape=(17, 3)).train()
        objective = build_objective(model, epochs=3, sigmas=None)
        output = model(torch.rand(2, 3, 64, 64))
        total, items = objective(output, case["batch"])
        assert torch.isfinite(total) and items.shape == (len(objective.loss_names),)
        total.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
        if family == "yolo26":
            assert isinstance(objective, EndToEndObjective)
            assert objective.loss_names[-1] == "rle_loss"
            assert any(p.grad is not None for p in model.head.flow_model.parameters())


@pytest.mark.parametrize("family", ["yolo11", "yolo26"])
def test_inference_decode_matches_the_decode_the_loss_trains(family: str) -> None:
    """The head's eval decode of keypoints = the loss decode (README step 2) × stride, for each family."""
    from lucid_core.geometry.anchors import make_anchors
    from lucid_core.loss.terms.pose import decode_keypoints
    from lucid_core.models import build_model

    torch.manual_seed(0)
    model = build_model(family, "pose", "n", 1, kpt_shape=(4, 3))
    head = model.head
    num_anchors, level_shapes = 21, [(4, 4), (2, 2), (1, 1)]
    raw = torch.randn(2, 12, num_anchors)
    grid, stride = make_anchors(level_shapes, model.strides)
    (decoded,) = head.decode_extras({"keypoints": raw}, grid.T, stride.T)
    loss_grid = decode_keypoints(raw, grid, (4, 3), classic=family != "yolo26")
    expected_xy = loss_grid[..., :2] * stride.view(1, -1, 1, 1)  # (B, A, K, 2)
    got = decoded.view(2, 4, 3, num_anchors).permute(0, 3, 1, 2)
    torch.testing.assert_close(got[..., :2], expected_xy, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(
        got[..., 2], raw.view(2, 4, 3, num_anchors)[:, :, 2].sigmoid().permute(0, 2, 1)
    )
