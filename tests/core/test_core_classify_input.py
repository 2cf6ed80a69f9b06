"""A classifier's input is the shorter-side resize + centre crop, not the letterbox (``Task.letterbox``): the crop
geometry, ``predict`` on arrays, a folder and a video, and ``Results.probs`` through ``to_dict``/``to_json``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import lucid_core
from lucid_core.geometry.center_crop import center_crop, center_crop_geometry
from lucid_core.geometry.letterbox import scale_boxes_back
from lucid_core.inference import center_crop_frame, letterbox_frame, predict_prepared, prepare_inference_model
from lucid_core.models import YOLOModel, build_model
from lucid_core.results import Results
from lucid_core.tasks import get_task
from media_testing import write_video

NC = 4


@pytest.fixture(scope="module")
def model() -> YOLOModel:
    torch.manual_seed(0)
    return build_model("yolo26", "classify", "n", num_classes=NC).eval()


def test_task_attributes_choose_the_input_and_the_default_size() -> None:
    classify, detect = get_task("classify"), get_task("detect")
    assert classify.image_level and not classify.letterbox and classify.default_imgsz == 224
    assert not detect.image_level and detect.letterbox and detect.default_imgsz == 640


@pytest.mark.parametrize(
    ("hw", "size"), [((40, 100), 32), ((100, 40), 32), ((33, 33), 64), ((7, 300), (16, 24))]
)
def test_the_crop_window_is_centred_and_maps_back(hw: tuple[int, int], size: int | tuple[int, int]) -> None:
    info = center_crop_geometry(hw, size)
    th, tw = (size, size) if isinstance(size, int) else size
    new_w, new_h = info.new_unpad_wh
    assert info.input_hw == (th, tw) and new_w >= tw and new_h >= th
    assert min(new_w / tw, new_h / th) == pytest.approx(
        1.0, abs=0.5 / min(th, tw) + 1e-9
    )  # the crop spans it
    assert abs(-info.left - (new_w - tw - -info.left)) <= 1 and abs(-info.top - (new_h - th - -info.top)) <= 1
    # the window's corners map back inside the original image, and its centre onto the image centre
    window = scale_boxes_back(torch.tensor([[0.0, 0.0, tw, th]]), info, clip=False)[0]
    assert (
        window[0] >= -1e-4 and window[1] >= -1e-4 and window[2] <= hw[1] + 1e-4 and window[3] <= hw[0] + 1e-4
    )
    centre = ((window[0] + window[2]) / 2, (window[1] + window[3]) / 2)
    assert centre[0] == pytest.approx(hw[1] / 2, abs=hw[1] / new_w + 1e-6)
    assert centre[1] == pytest.approx(hw[0] / 2, abs=hw[0] / new_h + 1e-6)
    with pytest.raises(ValueError, match="crop_fraction"):
        center_crop_geometry(hw, size, crop_fraction=1.5)


def test_the_frame_crop_equals_the_tensor_crop() -> None:
    bgr = np.random.default_rng(2).integers(0, 255, (45, 70, 3), dtype=np.uint8)
    frame, info = center_crop_frame(bgr, 32)
    crop, crop_info = center_crop(bgr[..., ::-1].copy(), 32)
    assert info == crop_info and frame.shape == (32, 32, 3)
    assert torch.equal(frame.permute(2, 0, 1), crop)
    boxed, _ = letterbox_frame(bgr, 32)
    assert boxed.shape[:2] != (32, 32) or not torch.equal(boxed, frame)  # a letterbox pads instead


def test_predict_feeds_the_centre_crop(model: YOLOModel) -> None:
    bgr = np.random.default_rng(3).integers(0, 255, (48, 96, 3), dtype=np.uint8)
    (result,) = lucid_core.predict(model, bgr, imgsz=64)
    crop, _ = center_crop(bgr[..., ::-1].copy(), 64)
    net, mode = prepare_inference_model(model)
    with torch.no_grad():
        expected = net(crop[None].float() / 255)[0]
    assert result.probs is not None
    torch.testing.assert_close(result.probs.data, expected, rtol=1e-4, atol=1e-5)
    (prepared,) = predict_prepared(net, bgr[..., ::-1].copy(), mode=mode, imgsz=64)
    assert prepared.probs is not None
    torch.testing.assert_close(prepared.probs, expected, rtol=1e-4, atol=1e-5)


def test_predict_on_a_folder_and_a_video_gives_probs(model: YOLOModel, tmp_path: Path) -> None:
    cv2 = pytest.importorskip("cv2")
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(4)
    for i, hw in enumerate([(40, 60), (64, 32), (50, 50)]):
        cv2.imwrite(str(folder / f"im{i}.png"), rng.integers(0, 255, (*hw, 3), dtype=np.uint8))
    images = lucid_core.predict(model, folder, imgsz=32)
    assert [Path(r.path or "").name for r in images] == ["im0.png", "im1.png", "im2.png"]
    assert all(r.probs is not None and len(r.boxes) == 0 for r in images)
    assert [r.orig_shape for r in images] == [(40, 60), (64, 32), (50, 50)]
    video = write_video(tmp_path / "clip.mp4", 5, size_wh=(64, 48))
    frames = list(lucid_core.predict(model, video, imgsz=32, stream=True, batch=2))
    assert [r.frame for r in frames] == list(range(5))
    for r in frames:
        assert r.probs is not None and r.orig_shape == (48, 64)
        assert float(r.probs.data.sum()) == pytest.approx(1.0, abs=1e-5)


def test_results_json_carries_probs(model: YOLOModel) -> None:
    image = np.random.default_rng(5).integers(0, 255, (30, 40, 3), dtype=np.uint8)
    (result,) = lucid_core.predict(model, image, imgsz=32, names=["a", "b", "c", "d"])
    assert result.probs is not None
    data = result.to_dict()
    probs = data["probs"]
    assert probs["top1"] == result.probs.top1 and probs["top1_name"] == "abcd"[result.probs.top1]
    assert probs["top5"] == result.probs.top5 and len(probs["data"]) == NC
    assert probs["top1conf"] == pytest.approx(float(result.probs.top1conf))
    assert data["detections"] == []
    again = Results.from_json(result.to_json(), names=["a", "b", "c", "d"])
    assert again.probs is not None and again.probs.top5 == result.probs.top5
    torch.testing.assert_close(again.probs.data, result.probs.data.float())
    json.loads(result.to_json())  # one JSON line
    detector = build_model("yolo26", "detect", "n", num_classes=2).eval()
    (boxes,) = lucid_core.predict(detector, image, imgsz=32)
    assert "probs" not in boxes.to_dict()  # the other tasks' records are unchanged
