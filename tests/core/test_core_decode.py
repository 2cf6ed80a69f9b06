"""Decoders on constructed cases, and on the stored eval outputs of the import fixtures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from lucid_core.decode import assemble_masks, decode_nms, decode_topk, rotated_nms
from lucid_core.geometry.letterbox import (
    letterbox_geometry,
    scale_boxes_back,
    scale_keypoints_back,
    scale_masks_back,
    scale_rboxes_back,
)
from lucid_core.geometry.rotated import rboxes_to_polygons, rboxes_to_xyxy
from lucid_core.postprocess import postprocess


def dense(
    boxes_xywh: list[list[float]], probs: list[list[float]], extras: list[list[float]] | None = None
) -> torch.Tensor:
    """Build a (1, 4 + nc + extra, A) eval tensor from per-anchor rows."""
    cols = [b + p + (extras[i] if extras else []) for i, (b, p) in enumerate(zip(boxes_xywh, probs))]
    return torch.tensor(cols, dtype=torch.float32).T[None]


# two near-identical class-0 boxes, one class-1 duplicate of them, one separate box, one below threshold
MASK_PIXEL_FLIPS = 2  # per detection, unfused vs fused model logits near 0 (fixture README, mask rule)

BOXES = [[50, 50, 40, 40], [51, 50, 40, 40], [50, 50, 40, 40], [200, 200, 20, 20], [300, 300, 10, 10]]
PROBS = [[0.9, 0.1], [0.8, 0.1], [0.1, 0.7], [0.6, 0.2], [0.2, 0.1]]


def test_topk_keeps_duplicates() -> None:
    (det,) = postprocess(dense(BOXES, PROBS), task="detect", nc=2, mode="topk", conf=0.25)
    assert det.scores.tolist() == pytest.approx([0.9, 0.8, 0.7, 0.6])
    assert det.labels.tolist() == [0, 0, 1, 0]
    assert torch.allclose(det.boxes[0], torch.tensor([30.0, 30.0, 70.0, 70.0]))


def test_nms_suppresses_same_class_duplicate_only() -> None:
    (det,) = postprocess(dense(BOXES, PROBS), task="detect", nc=2, mode="nms", conf=0.25, iou=0.7)
    assert det.scores.tolist() == pytest.approx([0.9, 0.7, 0.6])  # 0.8 (same class, IoU 0.95) suppressed
    assert det.labels.tolist() == [0, 1, 0]


def test_conf_threshold_is_strict_and_max_det_caps() -> None:
    scores = torch.tensor([[0.25], [0.2500001], [0.9]])
    sel = decode_topk(scores, conf=0.25)
    assert sorted(sel.anchor_idx.tolist()) == [1, 2]
    boxes = torch.tensor([[0.0, 0, 10, 10], [100, 100, 110, 110], [200, 200, 210, 210]])
    assert decode_nms(boxes, scores, conf=0.25).anchor_idx.tolist() == [2, 1]
    assert decode_nms(boxes, scores, conf=0.0, max_det=2).anchor_idx.tolist() == [2, 1]
    assert decode_topk(scores, conf=0.0, max_det=1).anchor_idx.tolist() == [2]


def test_nms_iou_threshold_is_strict() -> None:
    # IoU of these two boxes is exactly 0.5: suppressed only when IoU > thr
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 5.0]])
    scores = torch.tensor([[0.9], [0.8]])
    assert len(decode_nms(boxes, scores, conf=0.1, iou=0.5)) == 2
    assert len(decode_nms(boxes, scores, conf=0.1, iou=0.49)) == 1


def test_multi_label_nms_lets_one_anchor_report_two_classes() -> None:
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0]])
    scores = torch.tensor([[0.6, 0.5]])
    assert len(decode_nms(boxes, scores, conf=0.1)) == 1
    sel = decode_nms(boxes, scores, conf=0.1, multi_label=True)
    assert sel.labels.tolist() == [0, 1]


def test_rotated_nms_on_rotated_duplicates() -> None:
    rb = torch.tensor(
        [
            [100.0, 100.0, 80.0, 20.0, 0.5],  # best
            [101.0, 100.0, 80.0, 20.0, 0.5 + math.pi],  # same box turned by pi: duplicate
            [100.0, 100.0, 20.0, 80.0, 0.5 + math.pi / 2],  # same box with w/h swapped: duplicate
            [100.0, 100.0, 80.0, 20.0, 0.5 + math.pi / 2],  # crossing box: low ProbIoU, kept
            [100.0, 100.0, 80.0, 20.0, 0.5],  # duplicate of the best but another class: kept
        ]
    )
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
    labels = torch.tensor([0, 0, 0, 0, 1])
    assert rotated_nms(rb, scores, 0.7, labels=labels).tolist() == [0, 3, 4]
    assert rotated_nms(rb, scores, 0.7).tolist() == [0, 3]


def test_rotated_nms_is_fast_variant_suppressed_boxes_still_suppress() -> None:
    # box1 is suppressed by box0; box2 overlaps only box1 -> dropped too (no greedy re-admission)
    rb = torch.tensor([[0.0, 0, 20, 20, 0], [4.0, 0, 20, 20, 0], [8.0, 0, 20, 20, 0]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    from lucid_core.geometry.rotated import probiou

    m = probiou(rb, rb)
    thr = float((m[0, 1] + m[0, 2]) / 2)
    assert float(m[1, 2]) > thr > float(m[0, 2])
    assert rotated_nms(rb, scores, thr).tolist() == [0]


def test_obb_postprocess_topk_and_nms() -> None:
    boxes = [[100, 100, 80, 20], [101, 100, 80, 20]]
    pred = dense(boxes, [[0.9], [0.8]], extras=[[0.5], [0.5]])
    (nms,) = postprocess(pred, task="obb", nc=1, mode="nms")
    (topk,) = postprocess(pred, task="obb", nc=1, mode="topk")
    assert len(nms) == 1 and len(topk) == 2
    assert nms.rboxes is not None
    assert torch.allclose(nms.boxes, rboxes_to_xyxy(nms.rboxes))


def test_pose_keypoints_pass_through() -> None:
    kpts = [[10.0, 11.0, 0.9, 20.0, 21.0, 0.1], [30.0, 31.0, 0.5, 40.0, 41.0, 0.6]]
    pred = dense([[50, 50, 40, 40], [150, 150, 40, 40]], [[0.9], [0.8]], extras=kpts)
    (det,) = postprocess(pred, task="pose", nc=1, kpt_shape=(2, 3))
    assert det.keypoints is not None
    assert torch.equal(det.keypoints, torch.tensor(kpts).reshape(2, 2, 3))
    (det2,) = postprocess(pred[:, :9], task="pose", nc=1, kpt_shape=(2, 2))
    assert det2.keypoints is not None and torch.equal(det2.keypoints[..., 2], torch.ones(2, 2))


def test_masks_are_upsampled_thresholded_then_cropped_at_input_resolution() -> None:
    proto = torch.ones(2, 16, 16) * 5.0  # every prototype pixel strongly positive
    coef = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    boxes = torch.tensor([[8.5, 8.0, 32.0, 24.2], [0.0, 0.0, 64.0, 64.0]])
    masks = assemble_masks(proto, coef, boxes, (64, 64))
    assert masks.shape == (2, 64, 64) and masks.dtype == torch.bool
    assert int(masks[1].sum()) == 0  # negative logits everywhere
    expected = torch.zeros(64, 64, dtype=torch.bool)
    expected[8:25, 9:32] = True  # x1 <= c < x2, y1 <= r < y2 with the float box at input resolution
    assert torch.equal(masks[0], expected)


def test_mask_logits_are_upsampled_before_the_crop() -> None:
    """A logit step inside the box survives at input resolution (crop-then-upsample would erode the edge)."""
    proto = torch.full((1, 4, 4), -1.0)
    proto[0, :, 2:] = 1.0
    masks = assemble_masks(proto, torch.ones(1, 1), torch.tensor([[8.0, 0.0, 16.0, 16.0]]), (16, 16))
    logits = torch.nn.functional.interpolate(proto[None], size=(16, 16), mode="bilinear", align_corners=False)
    expected = (logits[0, 0] > 0) & (torch.arange(16) >= 8)[None, :]
    assert torch.equal(masks[0], expected)


def test_retina_factor_rule() -> None:
    from lucid_core.decode.masks import retina_factor

    assert retina_factor(0, 0) == 1
    assert [retina_factor(p, 0) for p in (1, 2, 4, 6, 8, 12, 32)] == [4, 4, 2, 4, 1, 2, 1]


def test_segment_postprocess_returns_masks_of_input_size() -> None:
    pred = dense([[32, 32, 20, 20]], [[0.9]], extras=[[2.0, 0.0]])
    proto = torch.ones(1, 2, 16, 16)
    (det,) = postprocess((pred, proto), task="segment", nc=1)
    assert det.masks is not None and det.masks.shape == (1, 64, 64)


def test_postprocess_rejects_wrong_row_count() -> None:
    with pytest.raises(ValueError, match="expects 7 rows"):
        postprocess(torch.zeros(1, 8, 10), task="obb", nc=2)
    with pytest.raises(ValueError, match="task must be one of"):
        postprocess(torch.zeros(1, 6, 10), task="depth", nc=2)  # not a registered task


def _import_cases(shared_dir: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    out = []
    for path in sorted((shared_dir / "fixtures").glob("import_*.pt")):
        fx = torch.load(path, weights_only=True, map_location="cpu")
        out.extend((fx["checkpoint"], case) for case in fx["cases"].values())
    return out


@pytest.mark.shared
def test_postprocess_reproduces_import_fixture_predictions(shared_dir: Path) -> None:
    cases = _import_cases(shared_dir)
    assert cases
    for ckpt, case in cases:
        lb, args, ref = case["letterbox"], case["predict_args"], case["pred"]
        info = letterbox_geometry(
            tuple(case["orig_shape_hw"]), args["imgsz"], auto=lb["auto"], stride=lb["stride"]
        )
        assert list(info.new_unpad_wh) == lb["new_unpad_wh"] and (info.top, info.left) == (
            lb["top"],
            lb["left"],
        )
        kpt_shape = tuple(ckpt["kpt_shape"]) if ckpt["kpt_shape"] else None
        (det,) = postprocess(
            case["output_unfused"],
            task=case["task"],
            nc=ckpt["nc"],
            conf=args["conf"],
            iou=args["iou"],
            max_det=args["max_det"],
            kpt_shape=kpt_shape,  # type: ignore[arg-type]
            proto=case.get("proto_unfused"),  # segment: the unfused prototypes of the same forward
            input_hw=tuple(case["input_shape"][2:]),
        )
        assert len(det) == case["num_pred"] == ref["conf"].shape[0]
        torch.testing.assert_close(det.scores, ref["conf"], atol=1e-4, rtol=0)
        assert torch.equal(det.labels, ref["cls"].long())
        if case["task"] == "obb":
            assert det.rboxes is not None
            rb = scale_rboxes_back(det.rboxes, info)
            torch.testing.assert_close(rb, ref["xywhr"], atol=1e-2, rtol=0)
            torch.testing.assert_close(rboxes_to_polygons(rb), ref["xyxyxyxy"], atol=1e-2, rtol=0)
            torch.testing.assert_close(rboxes_to_xyxy(rb), ref["xyxy"], atol=1e-2, rtol=0)
        else:
            torch.testing.assert_close(scale_boxes_back(det.boxes, info), ref["xyxy"], atol=1e-2, rtol=0)
        if "masks_input" in ref:  # unfused vs the predictor's fused model: a logit near 0 may flip a pixel
            assert det.masks is not None and det.masks.shape == ref["masks_input"].shape
            assert int((det.masks != ref["masks_input"]).sum()) <= MASK_PIXEL_FLIPS * len(det)
        if "keypoints" in ref:
            assert det.keypoints is not None
            torch.testing.assert_close(
                scale_keypoints_back(det.keypoints, info), ref["keypoints"], atol=1e-2, rtol=0
            )


def _segment_import_cases(shared_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((shared_dir / "fixtures").glob("import_*.pt")):
        fx = torch.load(path, weights_only=True, map_location="cpu")
        out.extend((f"{path.name}:{name}", case) for name, case in fx["cases"].items() if "mask_step" in case)
    return out


def _keep_nonempty(masks: torch.Tensor) -> torch.Tensor:
    return masks[masks.flatten(1).any(1)]


@pytest.mark.shared
def test_mask_rule_reproduces_import_fixture_mask_steps(shared_dir: Path) -> None:
    """Given the predictor's own mask-step inputs, every path's masks equal the stored ones exactly."""
    from lucid_core.decode.masks import assemble_masks_retina, mask_logits
    from lucid_core.geometry.letterbox import LetterboxInfo

    cases = _segment_import_cases(shared_dir)
    if not cases:
        pytest.skip("no import fixture with a mask_step")
    for name, case in cases:
        step = case["mask_step"]
        input_hw = (int(step["input_hw"][0]), int(step["input_hw"][1]))
        torch.testing.assert_close(
            mask_logits(step["proto"], step["coeffs"]), step["mask_logits_proto"], rtol=1e-5, atol=1e-5
        )
        cropped = assemble_masks(step["proto"], step["coeffs"], step["boxes_xyxy_input"], input_hw)
        assert torch.equal(cropped, step["masks_after_crop"]), name
        assert torch.equal(cropped.flatten(1).any(1), step["keep_nonempty"]), name
        pred = case["pred"]
        assert torch.equal(cropped[step["keep_nonempty"]], pred["masks_input"]), name
        lb = case["letterbox"]
        info = LetterboxInfo(
            orig_hw=(int(case["orig_shape_hw"][0]), int(case["orig_shape_hw"][1])),
            input_hw=input_hw,
            ratio=float(min(lb["ratio_wh"])),
            new_unpad_wh=(int(lb["new_unpad_wh"][0]), int(lb["new_unpad_wh"][1])),
            top=int(lb["top"]),
            bottom=int(lb["bottom"]),
            left=int(lb["left"]),
            right=int(lb["right"]),
        )
        assert torch.equal(scale_masks_back(pred["masks_input"], info), pred["masks"]), name
        retina = case.get("pred_retina")
        if retina is not None:
            masks = assemble_masks_retina(step["proto"], step["coeffs"], retina["boxes_xyxy_orig_used"], info)
            assert torch.equal(_keep_nonempty(masks), retina["masks"]), name
        e2e = case.get("pred_e2e")
        if e2e is not None:
            masks = assemble_masks(step["proto"], e2e["coeffs"], e2e["boxes_xyxy_input"], input_hw)
            assert torch.equal(_keep_nonempty(masks), e2e["masks_input"]), name


def test_classes_filter_before_nms_and_max_det() -> None:
    """``classes``: an unlisted class neither appears nor suppresses, and max_det counts the listed ones only;
    single-label keeps an anchor only when its best class is listed (the reference, measured black-box)."""
    pred = dense(BOXES, PROBS)
    (det,) = postprocess(pred, task="detect", nc=2, mode="nms", conf=0.25, classes=[1])
    assert det.labels.tolist() == [1] and det.scores.tolist() == pytest.approx([0.7])
    (det,) = postprocess(pred, task="detect", nc=2, mode="nms", conf=0.25, classes=[0], max_det=2)
    assert det.scores.tolist() == pytest.approx([0.9, 0.6])  # 0.7 (class 1) does not take a slot
    (every,) = postprocess(pred, task="detect", nc=2, mode="nms", conf=0.25, classes=[1, 0])
    (plain,) = postprocess(pred, task="detect", nc=2, mode="nms", conf=0.25)
    assert torch.equal(every.boxes, plain.boxes) and torch.equal(every.labels, plain.labels)
    # anchor 0's second class (0.1) is below conf: filtering to class 1 does not relabel it
    (low,) = postprocess(pred, task="detect", nc=2, mode="nms", conf=0.05, classes=[1])
    assert low.scores.tolist() == pytest.approx([0.7])


def test_agnostic_nms_suppresses_across_classes_and_keeps_labels() -> None:
    pred = dense(BOXES, PROBS)
    (det,) = postprocess(pred, task="detect", nc=2, mode="nms", conf=0.25, agnostic=True)
    assert det.scores.tolist() == pytest.approx([0.9, 0.6]) and det.labels.tolist() == [0, 0]
    # classes first: with class 0 gone, its box cannot suppress the class-1 duplicate
    (det,) = postprocess(pred, task="detect", nc=2, mode="nms", conf=0.25, agnostic=True, classes=[1])
    assert det.labels.tolist() == [1]


def test_topk_classes_restrict_scores_before_selection_and_agnostic_reports_anchors_once() -> None:
    scores = torch.tensor([[0.9, 0.2], [0.6, 0.5], [0.1, 0.3]])
    sel = decode_topk(scores, conf=0.05, max_det=2, classes=torch.tensor([1]))
    assert sel.anchor_idx.tolist() == [1, 2] and sel.labels.tolist() == [
        1,
        1,
    ]  # not the 2 best anchors' pairs
    assert sel.scores.tolist() == pytest.approx([0.5, 0.3])
    full = decode_topk(scores, conf=0.05, max_det=3)
    assert full.anchor_idx.tolist() == [0, 1, 1] and full.labels.tolist() == [0, 0, 1]  # anchor 1 twice
    agnostic = decode_topk(scores, conf=0.05, max_det=3, agnostic=True)
    assert agnostic.anchor_idx.tolist() == [0, 1, 2] and agnostic.labels.tolist() == [0, 0, 1]
    assert agnostic.scores.tolist() == pytest.approx([0.9, 0.6, 0.3])


def test_rotated_nms_classes_and_agnostic() -> None:
    boxes = [[100, 100, 80, 20], [101, 100, 80, 20], [300, 300, 40, 40]]
    pred = dense(boxes, [[0.9, 0.1], [0.1, 0.8], [0.1, 0.7]], extras=[[0.5], [0.5], [0.0]])
    (aware,) = postprocess(pred, task="obb", nc=2, mode="nms")
    (agnostic,) = postprocess(pred, task="obb", nc=2, mode="nms", agnostic=True)
    (only1,) = postprocess(pred, task="obb", nc=2, mode="nms", agnostic=True, classes=[1])
    assert len(aware) == 3 and agnostic.scores.tolist() == pytest.approx([0.9, 0.7])
    assert only1.labels.tolist() == [1, 1] and only1.scores.tolist() == pytest.approx([0.8, 0.7])


@pytest.mark.parametrize(
    ("classes", "message"), [([], "empty"), ([0, 2], r"\[2\] not a class id .* 2 classes"), ([-1], r"\[-1\]")]
)
def test_classes_out_of_range_or_empty_is_a_clear_error(classes: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        postprocess(dense(BOXES, PROBS), task="detect", nc=2, classes=classes)
