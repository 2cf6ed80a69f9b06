"""Reference checkpoint import: the three real checkpoints reproduce the reference's outputs and predictions
(shared/fixtures/README.md, ``import_<checkpoint>.pt``), and unknown layouts are refused naming the key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

from lucid_core.geometry.letterbox import (
    LetterboxInfo,
    scale_boxes_back,
    scale_keypoints_back,
    scale_rboxes_back,
)
from lucid_core.geometry.rotated import rboxes_to_xyxy
from lucid_core.inference import predict
from lucid_core.interop import CheckpointImportError, import_checkpoint, import_reference_tree
from lucid_core.interop.reference import read_reference_checkpoint
from lucid_core.interop.unpickler import StandInModule
from lucid_core.models import YOLOModel
from lucid_core.postprocess import postprocess

pytestmark = pytest.mark.shared

CHECKPOINTS = ("yolo11n-pose.pt", "yolov8n-obb-taufibrils.pt", "yolov8s-fall.pt")
COORD_TOL = 1e-2  # px, fixture README "Conventions"
PROB_TOL = 1e-4
PRED_BOX_TOL = 1.0  # px, issue 9 acceptance
PRED_SCORE_TOL = 1e-3


@pytest.fixture(scope="module", params=CHECKPOINTS)
def imported(request: pytest.FixtureRequest, shared_dir: Path) -> Iterator[dict[str, Any]]:
    name: str = request.param
    model, config = import_checkpoint(shared_dir / "weights" / name)
    fixture = torch.load(
        shared_dir / "fixtures" / f"import_{Path(name).stem}.pt", weights_only=True, map_location="cpu"
    )
    listing = json.loads((shared_dir / "weights" / "checkpoints.json").read_text())[name]
    outputs = {case_name: _eval(model, case) for case_name, case in fixture["cases"].items()}
    yield {
        "name": name,
        "model": model,
        "config": config,
        "fixture": fixture,
        "listing": listing,
        "outputs": outputs,
    }


def _eval(model: YOLOModel, case: dict[str, Any]) -> Tensor:
    """The float32 eval output on the case's stored input (``input = input_uint8.float() / 255``)."""
    with torch.no_grad():
        out = model(case["input_uint8"].float() / 255)
    assert isinstance(out, Tensor)
    return out


def test_metadata_matches_the_listing(imported: dict[str, Any]) -> None:
    model: YOLOModel = imported["model"]
    config = imported["config"]
    listing = imported["listing"]
    assert model.num_classes == listing["nc"]
    assert config.names == [listing["names"][str(i)] for i in range(listing["nc"])]
    expected_kpt = tuple(listing["kpt_shape"]) if listing["kpt_shape"] else None
    assert model.kpt_shape == expected_kpt
    assert config.imgsz == listing["train_args"]["imgsz"]
    assert model.task == listing["train_args"]["task"]
    assert list(config.strides) == [int(s) for s in listing["stride"]]
    assert config.head_class.endswith("." + listing["head_class"])
    assert config.model_class.endswith("." + listing["model_class"])
    assert sum(p.numel() for p in model.parameters()) == listing["n_params"]
    scale = listing["yaml_scalars"].get("scale")
    if scale is not None:
        assert model.scale == scale
    assert not model.training
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_weights_equal_the_stored_float16_values(imported: dict[str, Any], shared_dir: Path) -> None:
    root = read_reference_checkpoint(shared_dir / "weights" / imported["name"])["model"]
    assert isinstance(root, StandInModule)
    reference = root.state_tensors()
    ours = imported["model"].state_dict()
    assert len(reference) == len(ours)
    for key, value in reference.items():
        mine = ours["layers." + key[len("model.") :]]
        assert torch.equal(mine, value.to(mine.dtype)), key


def test_eval_output_matches_output_unfused(imported: dict[str, Any]) -> None:
    model: YOLOModel = imported["model"]
    nc = model.num_classes
    for case_name, case in imported["fixture"]["cases"].items():
        out = imported["outputs"][case_name]
        ref = case["output_unfused"]
        assert out.shape == ref.shape, case_name
        diff = (out - ref).abs()[0]
        assert diff[:4].max() <= COORD_TOL, case_name
        assert diff[4 : 4 + nc].max() <= PROB_TOL, case_name
        extra = diff[4 + nc :]
        if model.task == "pose":
            assert model.kpt_shape is not None
            k, d = model.kpt_shape
            per_kpt = extra.view(k, d, -1)
            assert per_kpt[:, :2].max() <= COORD_TOL, case_name
            assert per_kpt[:, 2:].max() <= PROB_TOL, case_name
        elif model.task == "obb":
            assert extra.max() <= PROB_TOL, case_name  # angle, radians


def _letterbox_info(case: dict[str, Any]) -> LetterboxInfo:
    lb = case["letterbox"]
    return LetterboxInfo(
        orig_hw=(int(case["orig_shape_hw"][0]), int(case["orig_shape_hw"][1])),
        input_hw=(int(case["input_shape"][2]), int(case["input_shape"][3])),
        ratio=float(lb["ratio_wh"][0]),
        new_unpad_wh=(int(lb["new_unpad_wh"][0]), int(lb["new_unpad_wh"][1])),
        top=int(lb["top"]),
        bottom=int(lb["bottom"]),
        left=int(lb["left"]),
        right=int(lb["right"]),
    )


def test_postprocess_reproduces_the_reference_predictions(imported: dict[str, Any]) -> None:
    model: YOLOModel = imported["model"]
    for case_name, case in imported["fixture"]["cases"].items():
        args = case["predict_args"]
        (det,) = postprocess(
            imported["outputs"][case_name],
            task=model.task,
            nc=model.num_classes,
            mode="nms",
            conf=args["conf"],
            iou=args["iou"],
            max_det=args["max_det"],
            kpt_shape=model.kpt_shape,
        )
        pred = case["pred"]
        info = _letterbox_info(case)
        assert len(det.scores) == case["num_pred"] == len(pred["conf"]), case_name
        torch.testing.assert_close(det.scores, pred["conf"], atol=PRED_SCORE_TOL, rtol=0)
        assert torch.equal(det.labels, pred["cls"].long()), case_name
        if model.task == "obb":
            assert det.rboxes is not None
            rboxes = scale_rboxes_back(det.rboxes, info)
            torch.testing.assert_close(rboxes[:, :4], pred["xywhr"][:, :4], atol=PRED_BOX_TOL, rtol=0)
            torch.testing.assert_close(rboxes[:, 4], pred["xywhr"][:, 4], atol=1e-3, rtol=0)
            torch.testing.assert_close(rboxes_to_xyxy(rboxes), pred["xyxy"], atol=PRED_BOX_TOL, rtol=0)
        else:
            boxes = scale_boxes_back(det.boxes, info)
            torch.testing.assert_close(boxes, pred["xyxy"], atol=PRED_BOX_TOL, rtol=0)
        if model.task == "pose":
            assert det.keypoints is not None
            kpts = scale_keypoints_back(det.keypoints, info)
            torch.testing.assert_close(kpts[..., :2], pred["keypoints"][..., :2], atol=PRED_BOX_TOL, rtol=0)
            torch.testing.assert_close(kpts[..., 2], pred["keypoints"][..., 2], atol=PRED_SCORE_TOL, rtol=0)


def test_predict_from_the_image_file(imported: dict[str, Any], shared_dir: Path) -> None:
    """Our own decoder + letterbox (not OpenCV) on the image file: same count, boxes within 1 px."""
    model: YOLOModel = imported["model"]
    for case_name, case in imported["fixture"]["cases"].items():
        args = case["predict_args"]
        (result,) = predict(
            model,
            shared_dir / case["image"],
            imgsz=case["imgsz"],
            conf=args["conf"],
            iou=args["iou"],
            max_det=args["max_det"],
        )
        det = result.detections
        pred = case["pred"]
        assert len(det.scores) == case["num_pred"], case_name
        assert torch.equal(det.labels, pred["cls"].long()), case_name
        torch.testing.assert_close(det.boxes, pred["xyxy"], atol=PRED_BOX_TOL, rtol=0)
        if model.task == "pose":
            assert det.keypoints is not None
            torch.testing.assert_close(
                det.keypoints[..., :2], pred["keypoints"][..., :2], atol=PRED_BOX_TOL, rtol=0
            )


def _find_param_owner(root: StandInModule, dotted: str) -> tuple[StandInModule, str]:
    *path, leaf = dotted.split(".")
    node = root
    for part in path:
        node = node.children()[part]
    return node, leaf


@pytest.mark.parametrize(
    ("key", "shape"),
    [("model.0.conv.weight", (8, 3, 3, 3)), ("model.22.cv3.0.2.bias", (7,))],
)
def test_unknown_layout_is_refused_with_the_first_mismatching_key(
    shared_dir: Path, key: str, shape: tuple[int, ...]
) -> None:
    checkpoint = read_reference_checkpoint(shared_dir / "weights" / "yolov8n-obb-taufibrils.pt")
    root = checkpoint["model"]
    owner, leaf = _find_param_owner(root, key)
    original = tuple(owner._parameters[leaf].shape)
    owner._parameters[leaf] = torch.nn.Parameter(torch.zeros(shape, dtype=torch.float16))
    with pytest.raises(CheckpointImportError) as info:
        import_reference_tree(checkpoint, source="mutated.pt")
    message = str(info.value)
    assert "mutated.pt" in message and key in message
    assert str(shape) in message and str(original) in message


def test_missing_and_unexpected_keys_are_named(shared_dir: Path) -> None:
    checkpoint = read_reference_checkpoint(shared_dir / "weights" / "yolov8n-obb-taufibrils.pt")
    owner, leaf = _find_param_owner(checkpoint["model"], "model.22.cv4.2.2.bias")
    owner._parameters["surplus"] = owner._parameters.pop(leaf)
    with pytest.raises(CheckpointImportError, match=r"model\.22\.cv4\.2\.2\.bias.*missing"):
        import_reference_tree(checkpoint)


def test_a_checkpoint_without_a_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.pt"
    torch.save({"model": None, "ema": None, "epoch": -1}, path)
    with pytest.raises(CheckpointImportError, match=r"empty\.pt.*neither 'ema' nor 'model'"):
        import_checkpoint(path)
