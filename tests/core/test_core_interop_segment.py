"""The reference YOLO26n-seg checkpoint (``shared/weights/yolo26n-seg-shapes.pt``) imported and run end to end:
eval outputs and prototypes within the import tolerances, and ``predict`` reproducing the reference predictor's
boxes and masks for every case of ``fixtures/import_yolo26n-seg-shapes.pt`` — default one-to-many + NMS path,
``retina_masks`` and the one-to-one (NMS-free) path (fixture README, "import_yolo26n-seg-shapes.pt")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lucid_core.geometry.letterbox import letterbox_geometry
from lucid_core.inference import predict
from lucid_core.interop import import_checkpoint
from lucid_core.models import YOLOModel

pytestmark = pytest.mark.shared

FIXTURE = "import_yolo26n-seg-shapes.pt"
COORD_TOL = 1e-2  # px, fixture README "Conventions"
PROB_TOL = 1e-4
COEF_TOL = 1e-3  # raw mask coefficients (a conv output like the box distances)
MASK_PIXEL_FLIPS = 2  # per detection: our logits are within ~1e-5 of the reference's, a pixel at ≈ 0 may flip


@pytest.fixture(scope="module")
def imported(shared_dir: Path) -> Iterator[dict[str, Any]]:
    fixture_path = shared_dir / "fixtures" / FIXTURE
    if not fixture_path.is_file():
        pytest.skip(f"{fixture_path} absent")
    fixture = torch.load(fixture_path, weights_only=True, map_location="cpu")
    model, _ = import_checkpoint(shared_dir / fixture["checkpoint"]["file"])
    yield {"model": model, "fixture": fixture}


def _image(case: dict[str, Any], shared_dir: Path) -> Any:
    """The case's original image: the stored BGR pixels when the case has them, else the image file."""
    if case.get("orig_bgr_uint8") is not None:
        bgr = np.asarray(case["orig_bgr_uint8"])
        return np.ascontiguousarray(bgr[..., ::-1])
    return shared_dir / case["image"]


def _original_size_masks(masks_input: torch.Tensor, orig_hw: Any) -> torch.Tensor:
    """README mask rule 6: cut the letterbox padding of the input-size masks (the input pipeline's top/left for this
    original and input size) and, where that differs from (H0, W0), resize bilinearly and keep values > 0.5."""
    h0, w0 = (int(v) for v in orig_hw)
    height, width = (int(v) for v in masks_input.shape[1:])
    if (height, width) == (h0, w0):
        return masks_input
    geometry = letterbox_geometry((h0, w0), (height, width))
    new_w, new_h = geometry.new_unpad_wh
    cut = masks_input[:, geometry.top : geometry.top + new_h, geometry.left : geometry.left + new_w].float()
    if (new_h, new_w) != (h0, w0):
        cut = F.interpolate(cut[None], size=(h0, w0), mode="bilinear", align_corners=False)[0]
    return cut > 0.5


def _check_pred(det: Any, ref: dict[str, Any], mask_key: str, name: str) -> None:
    assert len(det) == ref["conf"].shape[0], name
    assert torch.equal(det.labels, ref["cls"].long()), name
    torch.testing.assert_close(det.scores, ref["conf"], atol=PROB_TOL, rtol=0)
    torch.testing.assert_close(det.boxes, ref["xyxy"], atol=COORD_TOL, rtol=0)
    assert det.masks is not None and det.masks.shape == ref[mask_key].shape, name
    assert int((det.masks != ref[mask_key]).sum()) <= MASK_PIXEL_FLIPS * max(len(det), 1), name


def test_eval_outputs_and_prototypes_match(imported: dict[str, Any]) -> None:
    model: YOLOModel = imported["model"]
    fixture = imported["fixture"]
    nc = int(fixture["checkpoint"]["nc"])
    model.eval()
    for name, case in fixture["cases"].items():
        with torch.no_grad():
            out = model(case["input_uint8"].float() / 255, branch="one2many")  # output_unfused: one-to-many
        assert isinstance(out, tuple), name
        pred, proto = out
        ref = case["output_unfused"]
        assert pred.shape == ref.shape and proto.shape == case["proto_unfused"].shape, name
        torch.testing.assert_close(pred[:, :4], ref[:, :4], atol=COORD_TOL, rtol=0)
        torch.testing.assert_close(pred[:, 4 : 4 + nc], ref[:, 4 : 4 + nc], atol=PROB_TOL, rtol=0)
        torch.testing.assert_close(pred[:, 4 + nc :], ref[:, 4 + nc :], atol=COEF_TOL, rtol=0)
        torch.testing.assert_close(proto, case["proto_unfused"], atol=PROB_TOL, rtol=0)


def test_predict_reproduces_default_retina_and_one_to_one_masks(
    imported: dict[str, Any], shared_dir: Path
) -> None:
    model: YOLOModel = imported["model"]
    for name, case in imported["fixture"]["cases"].items():
        args = case["predict_args"]
        common = dict(imgsz=case["imgsz"], conf=args["conf"], iou=args["iou"], max_det=args["max_det"])
        image = _image(case, shared_dir)
        # The reference's plain predict of a YOLO26 checkpoint: one-to-many branch + NMS.
        det = predict(model, image, decode="nms", **common)[0].detections
        _check_pred(det, case["pred"], "masks", name)
        if "pred_retina" in case:
            retina = predict(model, image, decode="nms", retina_masks=True, **common)[0].detections
            _check_pred(retina, case["pred_retina"], "masks", name)
        e2e = case.get("pred_e2e")
        if e2e is not None:
            one2one = predict(model, image, decode="topk", **common)[0].detections
            if "masks" not in e2e:  # README rule 6 gives the original-size masks from masks_input
                e2e = {**e2e, "masks": _original_size_masks(e2e["masks_input"], case["orig_shape_hw"])}
            _check_pred(one2one, e2e, "masks", name)


def test_original_size_masks_follow_rule_6() -> None:
    """The derivation the one-to-one comparison uses when a case stores only ``masks_input``: identity at equal
    sizes, the letterbox padding cut for a rectangular input, and a bilinear resize back for an up-scaled one."""
    masks = torch.zeros(2, 60, 96, dtype=torch.bool)
    masks[0, 10:30, 20:50] = True
    masks[1, 40:60, 0:96] = True
    assert torch.equal(_original_size_masks(masks, (60, 96)), masks)
    geometry = letterbox_geometry((60, 96), (64, 96))
    padded = torch.zeros(2, 64, 96, dtype=torch.bool)
    padded[:, geometry.top : geometry.top + 60] = masks
    assert torch.equal(_original_size_masks(padded, (60, 96)), masks)
    small = masks[:, ::2, ::2]  # (30, 48) original, up-scaled x2 to a (64, 96) input
    up = torch.zeros(2, 64, 96, dtype=torch.bool)
    top = letterbox_geometry((30, 48), (64, 96)).top
    up[:, top : top + 60] = small.repeat_interleave(2, 1).repeat_interleave(2, 2)
    assert torch.equal(_original_size_masks(up, (30, 48)), small)
