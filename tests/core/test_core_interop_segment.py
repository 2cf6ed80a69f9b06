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
        (det,) = predict(model, image, decode="nms", **common)
        _check_pred(det, case["pred"], "masks", name)
        if "pred_retina" in case:
            (retina,) = predict(model, image, decode="nms", retina_masks=True, **common)
            _check_pred(retina, case["pred_retina"], "masks", name)
        e2e = case.get("pred_e2e")
        if e2e is not None:
            (one2one,) = predict(model, image, decode="topk", **common)
            key = "masks" if "masks" in e2e else "masks_input"
            if key == "masks_input" and tuple(e2e[key].shape[1:]) != tuple(case["orig_shape_hw"]):
                pytest.fail(f"{name}: pred_e2e has no original-size masks to compare with")
            _check_pred(one2one, e2e, key, name)
