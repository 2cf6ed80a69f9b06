"""Segment objective against the reference fixtures ``segment_loss_*.pt`` (fixture README section
"segment_loss_yolov8n-seg.pt, segment_loss_yolo26n-seg.pt"): losses, items, assignment, per-anchor mask terms,
mask-IoU pairs (YOLO26) and gradients, for every case and branch the file holds."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import torch

from lucid_core.loss.objective import EndToEndObjective, OneToManyObjective
from lucid_core.loss.targets import pack_targets
from lucid_core.loss.terms.segment import SegmentLoss, segment_objective
from lucid_core.outputs import BranchOutput, TrainOutput
from lucid_core.tasks import build_objective

RTOL, ATOL = 1e-5, 1e-6  # fixture README "Tolerances" (another summation order than the reference)
GRAD_ATOL = 1e-8  # segment section: rtol 1e-5 / atol 1e-8 for float values (the atol scaled: _close_grad)
FILES = ("segment_loss_yolov8n-seg.pt", "segment_loss_yolo26n-seg.pt")
HEAD_KEYS = {"boxes": "boxes", "scores": "scores", "mask_coefficient": "mask_coef"}


def _load(shared_dir: Path, name: str) -> dict[str, Any]:
    path = shared_dir / "fixtures" / name
    if not path.is_file():
        pytest.skip(f"fixture {path} absent")
    fx: dict[str, Any] = torch.load(path, weights_only=True, map_location="cpu")
    assert str(fx["schema"]).startswith("lucid-fixture/segment_loss/")
    return fx


def _stand_in_model(meta: dict[str, Any]) -> types.SimpleNamespace:
    """What the factory reads from a model (seam: task, num_classes, reg_max, strides, end2end, head)."""
    return types.SimpleNamespace(
        task="segment",
        num_classes=int(meta["nc"]),
        reg_max=int(meta["reg_max"]),
        strides=tuple(float(s) for s in meta["strides"]),
        end2end=bool(meta["end2end"]),
        head=types.SimpleNamespace(nm=int(meta["nm"]), multiscale_proto=meta.get("semantic_hw") is not None),
    )


def _branch_names(meta: dict[str, Any]) -> list[str]:
    return ["one2many", "one2one"] if meta["end2end"] else ["single"]


def _branch_tensors(heads: dict[str, Any], name: str) -> dict[str, torch.Tensor]:
    """One branch's stored head outputs as float leaves; ``<key>_same_as_one2many`` reuses the one2many tensor."""
    src = heads if name == "single" else heads[name]
    out = {}
    for key in HEAD_KEYS:
        if key in src:
            value = src[key]
        else:
            assert src.get(f"{key}_same_as_one2many"), f"branch {name} lacks {key}"
            value = heads["one2many"][key]
        out[key] = value.float().clone().requires_grad_(True)
    return out


def _output(fx: dict[str, Any]) -> tuple[TrainOutput, dict[str, dict[str, torch.Tensor]]]:
    meta, heads = fx["meta"], fx["head_outputs"]
    leaves = {name: _branch_tensors(heads, name) for name in _branch_names(meta)}
    branches = {
        name: BranchOutput(t["boxes"], t["scores"], {"mask_coef": t["mask_coefficient"]})
        for name, t in leaves.items()
    }
    proto = heads["proto"].float().clone().requires_grad_(True)
    semantic = heads.get("semantic")
    semseg = None if semantic is None else semantic.float().clone().requires_grad_(True)
    leaves["aux"] = {"proto": proto} | ({} if semseg is None else {"semantic": semseg})
    first = _branch_names(meta)[0]
    output = TrainOutput(
        branches[first],
        branches.get("one2one"),
        [(int(h), int(w)) for h, w in meta["level_shapes_hw"]],
        tuple(int(s) for s in meta["strides"]),
        proto,
        semseg,
    )
    return output, leaves


def _objective(fx: dict[str, Any], case: dict[str, Any]) -> OneToManyObjective | EndToEndObjective:
    meta = fx["meta"]
    hyp = meta["hyp"]
    return build_objective(
        _stand_in_model(meta),
        gains={k: hyp[k] for k in ("box", "cls", "dfl")},
        epochs=int(hyp["epochs"]),
        overlap_mask=bool(case["config"]["overlap_mask"]),
        mask_ratio=int(case["config"]["mask_ratio"]),
    )


def _dense_rows(sparse: dict[str, Any]) -> torch.Tensor:
    grad = torch.zeros(sparse["shape"])
    grad.permute(0, 2, 1)[sparse["b"], sparse["a"]] = sparse["values"]
    return grad


def _dense_blocks(record: dict[str, Any]) -> torch.Tensor:
    grad = torch.zeros(record["shape"])
    for block in record["blocks"]:
        grad[block["b"], :, block["y0"] : block["y1"], block["x0"] : block["x1"]] = block["values"]
    return grad


def _close(actual: Any, expected: Any, atol: float = ATOL) -> None:
    torch.testing.assert_close(actual, expected, rtol=RTOL, atol=atol)


def _close_grad(actual: torch.Tensor, expected: torch.Tensor, atol: float) -> None:
    """A gradient within rtol 1e-5 / atol 1e-8 with the absolute part relative to the tensor's magnitude: another
    summation order moves an element near 0 by rounding of the terms summed (≈ rtol × the largest element), not of
    the element itself."""
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    _close(actual, expected, atol=max(atol, RTOL * scale))


def _check_branch(result: Any, record: dict[str, Any], nc: int) -> None:
    _close(result.loss_vector_times_bs, record["loss_vector_times_bs"])
    _close(result.loss_items, record["loss_items"])
    _close(result.total, record["total"])
    assigned, assignment = record["assigned"], result.assignment
    assert torch.equal(assignment.fg_mask, assigned["fg_mask"])
    assert assignment.target_gt_idx.dtype == assigned["target_gt_idx"].dtype
    assert torch.equal(assignment.target_gt_idx, assigned["target_gt_idx"])
    assert str(assignment.target_labels.dtype).removeprefix("torch.") == assigned["target_labels_dtype"]
    at_label = assignment.target_scores.gather(
        -1, assignment.target_labels.long().clamp(max=nc - 1).unsqueeze(-1)
    ).squeeze(-1)
    _close(at_label, assigned["target_scores_at_label"])
    _close(result.target_scores_sum, assigned["target_scores_sum"])

    details, detail_record = result.details, record["seg_detail"]
    assert details["n_fg"] == detail_record["n_fg"] == int(assigned["fg_mask"].sum())
    for key, expected in detail_record.items():
        if key == "n_fg":
            continue
        if expected.dtype == torch.int64:
            assert torch.equal(details[key], expected), key
        else:
            _close(details[key], expected)
    if "mask_iou_pairs" in record:
        pairs, expected_pairs = details["mask_iou_pairs"], record["mask_iou_pairs"]
        for key, expected in expected_pairs.items():
            actual = getattr(pairs, key)
            if expected.dtype == torch.int64:
                assert torch.equal(actual, expected), key
            else:
                _close(actual, expected)
    else:
        assert "mask_iou_pairs" not in details or details["n_fg"] == 0


def _check_sparse_grads(
    grads: dict[str, Any], leaves: dict[str, torch.Tensor], atol: float, weight: float = 1.0
) -> None:
    """Box / coefficient gradients equal the stored sparse rows; the score gradient at the stored fg anchors."""
    for key, leaf_key in (("boxes_sparse", "boxes"), ("mask_coefficient_sparse", "mask_coefficient")):
        if key in grads:
            grad = leaves[leaf_key].grad
            assert grad is not None, key
            _close_grad(grad, _dense_rows(grads[key]), atol)
    if "scores_at_fg" in grads:
        sparse = grads["scores_at_fg"]
        grad = leaves["scores"].grad
        assert grad is not None
        _close_grad(grad.permute(0, 2, 1)[sparse["b"], sparse["a"]], sparse["values"], atol)


def _check_blocks(
    grads: dict[str, Any], aux: dict[str, torch.Tensor], cases: dict[str, Any], atol: float
) -> None:
    """Dense proto / semantic gradients from their blocks; ``same_as:<case>`` and ``omitted`` handled generically."""
    for key, leaf_key in (("proto_blocks", "proto"), ("semantic_blocks", "semantic")):
        record = grads.get(key)
        for _ in range(len(cases)):  # follow "same_as:<case>" references
            if not (isinstance(record, str) and record.startswith("same_as:")):
                break
            other = cases[record.removeprefix("same_as:")]["results"]
            record = (other["e2e"]["grads"] if "e2e" in other else other["grads"]).get(key)
        if record is None or record == "omitted":
            continue
        assert isinstance(record, dict), f"{key}: unknown marker {record!r}"
        grad = aux[leaf_key].grad
        expected = _dense_blocks(record)
        if grad is None:
            assert not bool(expected.any()), key
        else:
            _close_grad(grad, expected, atol)


@pytest.fixture(scope="module")
def fixtures(shared_dir: Path) -> dict[str, dict[str, Any]]:
    return {name: _load(shared_dir, name) for name in FILES if (shared_dir / "fixtures" / name).is_file()}


@pytest.mark.shared
def test_segment_fixtures_present(fixtures: dict[str, dict[str, Any]]) -> None:
    assert fixtures, "no segment_loss_*.pt fixture found"
    for fx in fixtures.values():
        assert fx["cases"]


@pytest.mark.shared
@pytest.mark.parametrize("file_name", FILES)
def test_segment_loss_reproduces_every_case(fixtures: dict[str, dict[str, Any]], file_name: str) -> None:
    if file_name not in fixtures:
        pytest.skip(f"{file_name} absent")
    fx = fixtures[file_name]
    meta = fx["meta"]
    nc, batch_size = int(meta["nc"]), int(meta["input_shape"][0])
    imgsz_hw = (int(meta["imgsz_hw"][0]), int(meta["imgsz_hw"][1]))
    for case_name, case in fx["cases"].items():
        objective = _objective(fx, case)
        assert isinstance(objective, EndToEndObjective) == bool(meta["end2end"]), case_name
        gt = case["gt_padded"]
        packed = pack_targets(case["targets"], batch_size, imgsz_hw)
        assert torch.equal(packed.gt_labels, gt["gt_labels"]), case_name
        assert torch.equal(packed.gt_bboxes, gt["gt_bboxes_xyxy_px"]), case_name
        assert torch.equal(packed.mask_gt, gt["mask_gt"]), case_name
        records = case["results"]
        if isinstance(objective, OneToManyObjective):
            _check_one_to_many(fx, case, objective, records, nc)
        else:
            _check_end_to_end(fx, case, objective, records, nc)


def _check_one_to_many(
    fx: dict[str, Any], case: dict[str, Any], objective: OneToManyObjective, record: dict[str, Any], nc: int
) -> None:
    output, leaves = _output(fx)
    result = objective.result(output, case["targets"])
    assert list(objective.loss_names) == record["loss_names"]
    _check_branch(result, record, nc)
    result.total.backward()
    _check_sparse_grads(record["grads"], leaves["single"], GRAD_ATOL)
    _check_blocks(record["grads"], leaves["aux"], fx["cases"], GRAD_ATOL)


def _check_end_to_end(
    fx: dict[str, Any], case: dict[str, Any], objective: EndToEndObjective, records: dict[str, Any], nc: int
) -> None:
    for name in ("one2many", "one2one"):
        record = records[name]
        assert list(objective.loss_names) == record["loss_names"]
        # Each branch alone: its values and its own gradients (one-to-one: detached proto / semantic).
        output, leaves = _output(fx)
        branch_objective = getattr(objective, name)
        targets = objective.pack(case["targets"], output)
        branch = output.one2many if name == "one2many" else output.one2one
        assert branch is not None
        result = branch_objective.branch_loss(
            output, branch, targets, case["targets"], one2one=name == "one2one"
        )
        _check_branch(result, record, nc)
        result.total.backward()
        _check_sparse_grads(record.get("grads", {}), leaves[name], GRAD_ATOL)
        _check_blocks(record.get("grads", {}), leaves["aux"], fx["cases"], GRAD_ATOL)
        if name == "one2one":
            assert all(leaf.grad is None for leaf in leaves["aux"].values())

    e2e = records["e2e"]
    assert (objective.schedule.o2m, objective.schedule.o2o) == (e2e["o2m_weight"], e2e["o2o_weight"])
    output, leaves = _output(fx)
    combined = objective.result(output, case["targets"])
    assert list(objective.loss_names) == e2e["loss_names"]
    _close(combined.loss_vector_times_bs, e2e["loss_vector_times_bs"])
    _close(combined.loss_items, e2e["loss_items"])
    _close(combined.total, e2e["total"])
    combined.total.backward()
    for name in ("one2many", "one2one"):
        _check_sparse_grads(e2e["grads"][name], leaves[name], GRAD_ATOL)
    _check_blocks(e2e["grads"], leaves["aux"], fx["cases"], GRAD_ATOL)

    after = records.get("e2e_after_10_updates")
    if after is not None:
        for _ in range(int(after["updates"])):
            objective.step_epoch()
        assert (objective.schedule.o2m, objective.schedule.o2o) == (after["o2m_weight"], after["o2o_weight"])
        output, _ = _output(fx)
        later = objective.result(output, case["targets"])
        _close(later.loss_vector_times_bs, after["loss_vector_times_bs"])
        _close(later.total, after["total"])


def test_segment_factory_reads_the_model() -> None:
    v8 = types.SimpleNamespace(
        task="segment",
        num_classes=3,
        reg_max=16,
        strides=(8, 16, 32),
        end2end=False,
        head=types.SimpleNamespace(),
    )
    loss = segment_objective(v8, gains={"box": 7.5, "pose": 12.0}, unknown_option=1)
    assert isinstance(loss, SegmentLoss) and not loss.mask_aware and not loss.semantic
    assert loss.loss_names == ("box_loss", "seg_loss", "cls_loss", "dfl_loss", "sem_loss")
    y26 = types.SimpleNamespace(
        task="segment",
        num_classes=3,
        reg_max=1,
        strides=(8, 16, 32),
        end2end=True,
        head=types.SimpleNamespace(multiscale_proto=True),
    )
    o2o = segment_objective(y26, one2one=True)
    assert o2o.mask_aware and o2o.semantic and o2o.assigner.topk == 7 and o2o.assigner.topk2 == 1
    assert o2o.loss_names[3] == "l1_loss"


def test_segment_loss_rejects_wrong_mask_layout() -> None:
    loss = SegmentLoss(3, 16, (8, 16, 32), overlap_mask=False)
    batch = {
        "batch_idx": torch.tensor([0.0, 1.0, 1.0]),
        "cls": torch.zeros(3, 1),
        "bboxes": torch.full((3, 4), 0.25),
        "masks": torch.zeros(2, 16, 16),
    }
    with pytest.raises(ValueError, match="per-instance masks with N = 3"):
        loss.pack(batch, 2, (64, 64))
    with pytest.raises(KeyError, match="no 'masks'"):
        loss.pack({k: v for k, v in batch.items() if k != "masks"}, 2, (64, 64))
