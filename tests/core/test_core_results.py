"""``Results`` for all four tasks on the shared reference checkpoints: views, indexing, drawing, JSON and the
pseudo-labelling round trip (``save_txt`` → lucid-data reads the same boxes / polygons / keypoints / corners)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
import yaml

from lucid_core.inference import predict_prepared, prepare_inference_model
from lucid_core.interop import import_checkpoint
from lucid_core.results import OBB, Boxes, Detections, Keypoints, Masks, Results
from lucid_data.cli import check_dataset
from lucid_data.readers import load_dataset

pytestmark = pytest.mark.shared

#: checkpoint -> (image, imgsz, the field its detections carry)
CASES = {
    "yolov8s-fall.pt": ("data/coco8/images/val/000000000036.jpg", 640, None),
    "yolo26n-seg-shapes.pt": ("data/shapes-seg/images/val/val_000000.jpg", 96, "masks"),
    "yolo11n-pose.pt": ("data/coco-mmpose/000000196141.jpg", 640, "keypoints"),
    "yolov8n-obb-taufibrils.pt": ("data/dota8/images/val/P1571__1024__2976___0.jpg", 640, "rboxes"),
}
ROUND_TRIP_TOL = 1e-4  # of the image size


@pytest.fixture(scope="module", params=list(CASES))
def result(request: pytest.FixtureRequest, shared_dir: Path) -> Iterator[dict[str, Any]]:
    weights: str = request.param
    image, imgsz, field = CASES[weights]
    model, config = import_checkpoint(shared_dir / "weights" / weights)
    net, mode = prepare_inference_model(model)
    bgr = cv2.imread(str(shared_dir / image))
    (det,) = predict_prepared(net, np.ascontiguousarray(bgr[..., ::-1]), mode=mode, imgsz=imgsz)
    res = Results(
        det,
        names=config.names,
        orig_img=bgr,
        orig_shape=bgr.shape[:2],
        path=str(shared_dir / image),
        speed={"preprocess": 1.0, "inference": 2.0, "postprocess": 3.0},
        task=model.task,
    )
    assert len(res) > 0
    yield {"results": res, "field": field, "model": model, "names": config.names, "image": shared_dir / image}


def test_views_follow_the_fields_present(result: dict[str, Any]) -> None:
    res: Results = result["results"]
    det: Detections = res.detections
    h, w = res.orig_shape
    assert isinstance(res.boxes, Boxes) and len(res.boxes) == len(det)
    assert torch.equal(res.boxes.xyxy, det.boxes)
    assert torch.equal(res.boxes.conf, det.scores) and torch.equal(res.boxes.cls, det.labels)
    assert res.boxes.id is None and res.probs is None
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    torch.testing.assert_close(res.boxes.xyxyn, det.boxes / scale)
    xywh = res.boxes.xywh
    torch.testing.assert_close(xywh[:, :2] - xywh[:, 2:] / 2, det.boxes[:, :2])
    torch.testing.assert_close(res.boxes.xywhn, xywh / scale)
    assert res.boxes.data.shape == (len(det), 6)
    field = result["field"]
    assert (res.masks is not None) == (field == "masks")
    assert (res.keypoints is not None) == (field == "keypoints")
    assert (res.obb is not None) == (field == "rboxes")
    if isinstance(res.masks, Masks):
        assert res.masks.data.shape == (len(det), h, w)
        assert len(res.masks.xy) == len(det) and all(p.shape[1] == 2 and len(p) >= 3 for p in res.masks.xy)
        for polygon, mask in zip(res.masks.xy, det.masks, strict=True):  # outline hull = the mask's extent
            ys, xs = torch.nonzero(mask, as_tuple=True)
            assert polygon[:, 0].min() == xs.min() and polygon[:, 1].max() == ys.max()
        np.testing.assert_allclose(res.masks.xyn[0], res.masks.xy[0] / np.array([w, h], np.float32))
    if isinstance(res.keypoints, Keypoints):
        k = res.keypoints
        assert k.xy.shape == (len(det), 17, 2) and k.conf.shape == (len(det), 17)
        torch.testing.assert_close(k.xyn, k.xy / torch.tensor([w, h], dtype=torch.float32))
    if isinstance(res.obb, OBB):
        assert res.obb.xywhr.shape == (len(det), 5) and res.obb.xyxyxyxy.shape == (len(det), 4, 2)
        corners = res.obb.xyxyxyxy
        torch.testing.assert_close(
            torch.cat((corners.amin(1), corners.amax(1)), 1), det.boxes, atol=1e-3, rtol=0
        )


def test_numpy_cpu_indexing(result: dict[str, Any]) -> None:
    res: Results = result["results"]
    as_np = res.numpy()
    assert isinstance(as_np.boxes.xyxy, np.ndarray) and isinstance(as_np.boxes.cls, np.ndarray)
    np.testing.assert_array_equal(as_np.boxes.xyxy, res.detections.boxes.numpy())
    for view in (as_np.masks, as_np.keypoints, as_np.obb):
        if view is not None:
            assert isinstance(view.xyxyxyxy if isinstance(view, OBB) else view.data, np.ndarray)
    assert torch.equal(res.cpu().boxes.xyxy, res.boxes.xyxy)
    first, rest, picked = res[0], res[1:], res[res.detections.scores > 0.5]
    assert len(first) == 1 and len(rest) == len(res) - 1
    assert torch.equal(first.boxes.xyxy, res.boxes.xyxy[:1]) and torch.equal(
        rest.boxes.conf, res.boxes.conf[1:]
    )
    assert len(picked) == int((res.detections.scores > 0.5).sum())
    assert first.path == res.path and first.names == res.names and first.orig_img is res.orig_img
    if res.masks is not None:
        assert first.masks is not None and torch.equal(first.masks.data, res.masks.data[:1])
    with pytest.raises(IndexError):
        res[len(res)]


def test_plot_draws_where_the_detections_are(result: dict[str, Any]) -> None:
    res: Results = result["results"]
    original = res.orig_img.copy()
    drawn = res.plot()
    assert drawn.shape == original.shape and drawn.dtype == np.uint8
    assert np.array_equal(res.orig_img, original)  # drawn on a copy
    changed = (drawn != original).any(2)
    inside = np.zeros_like(changed)
    for x1, y1, x2, y2 in res.detections.boxes.round().int().tolist():
        inside[max(y1 - 3, 0) : y2 + 4, max(x1 - 3, 0) : x2 + 4] = True
        assert changed[max(y1 - 3, 0) : y2 + 4, max(x1 - 3, 0) : x2 + 4].any()
    assert changed.any() and inside.any()
    plain = res.plot(labels=False)
    assert not (plain != original).any(2)[~inside].any()  # without labels nothing is drawn outside the boxes
    start = time.perf_counter()
    for _ in range(5):
        res.plot()
    assert (time.perf_counter() - start) / 5 < 0.1  # OpenCV drawing: fast enough for video


def test_json_round_trip(result: dict[str, Any]) -> None:
    res: Results = result["results"]
    text = res.to_json()
    assert "\n" not in text  # a JSONL line
    data = json.loads(text)
    assert data["orig_shape"] == list(res.orig_shape) and data["path"] == res.path
    assert data["speed"] == res.speed and len(data["detections"]) == len(res)
    back = Results.from_json(text, orig_img=res.orig_img)
    a, b = res.detections, back.detections
    assert (
        torch.equal(a.boxes, b.boxes) and torch.equal(a.scores, b.scores) and torch.equal(a.labels, b.labels)
    )
    for name in ("masks", "keypoints", "rboxes"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert torch.equal(x.float(), y.float()), name
    assert back.names == {i: n for i, n in res.names.items() if i in set(a.labels.tolist())}
    assert back.to_json() == text


def test_summary_describe_and_files(result: dict[str, Any], tmp_path: Path) -> None:
    res: Results = result["results"]
    records = res.summary()
    assert len(records) == len(res) and records[0]["name"] == res.names[records[0]["label"]]
    assert res.describe().startswith(
        f"{int(res.detections.labels.eq(res.detections.labels.mode().values).sum())}"
    )
    assert Results(Detections.empty(), names=res.names, orig_img=None, orig_shape=(4, 4)).describe() == (
        "no detections"
    )
    saved = res.save(tmp_path / "out" / "drawn.png")
    assert np.array_equal(cv2.imread(str(saved)), res.plot())
    crops = res.save_crop(tmp_path / "crops")
    assert len(crops) == len(res) and all(
        p.is_file() and p.parent.parent == tmp_path / "crops" for p in crops
    )
    x1, y1, x2, y2 = res.detections.boxes[0].tolist()
    assert cv2.imread(str(crops[0])).shape[:2] == (int(np.ceil(y2)) - int(y1), int(np.ceil(x2)) - int(x1))
    no_image = Results(res.detections, names=res.names, orig_img=None, orig_shape=res.orig_shape)
    with pytest.raises(ValueError, match="orig_img"):
        no_image.plot()
    assert no_image.plot(img=res.orig_img).shape == res.orig_img.shape


def test_to_df(result: dict[str, Any]) -> None:
    res: Results = result["results"]
    try:
        import pandas  # noqa: F401  (optional extra)
    except ImportError:
        with pytest.raises(ImportError, match=r"lucid-core\[pandas\]"):
            res.to_df()
        return
    frame = res.to_df()
    assert len(frame) == len(res) and list(frame.columns[:3]) == ["name", "label", "score"]


def test_save_txt_round_trips_through_lucid_data(result: dict[str, Any], tmp_path: Path) -> None:
    res: Results = result["results"]
    model = result["model"]
    root = tmp_path / "pseudo"
    image = root / "images" / "val" / f"frame{Path(res.path or 'x').suffix}"
    image.parent.mkdir(parents=True)
    image.write_bytes(Path(result["image"]).read_bytes())
    res.save_txt(root / "labels" / "val" / "frame.txt")
    config: dict[str, Any] = {"path": ".", "val": "images/val", "names": dict(enumerate(result["names"]))}
    config["task"] = model.task
    if res.keypoints is not None:
        config["kpt_shape"] = [17, 3]
    (root / "data.yaml").write_text(yaml.safe_dump(config))
    check = check_dataset(root / "data.yaml", splits=["val"])
    assert check.ok and check.instances == len(res), check.lines
    (record,) = load_dataset(root / "data.yaml", "val").records
    targets = record.targets
    h, w = res.orig_shape
    tol = ROUND_TRIP_TOL * max(h, w)
    assert targets.labels.tolist() == res.detections.labels.tolist()
    if res.obb is not None:
        corners = np.stack(targets.polygons)
        np.testing.assert_allclose(corners, res.obb.xyxyxyxy.numpy(), atol=tol, rtol=0)
    elif res.masks is not None:
        for read, written in zip(targets.polygons, res.masks.xy, strict=True):
            np.testing.assert_allclose(read, written, atol=tol, rtol=0)
    else:
        np.testing.assert_allclose(targets.boxes, res.detections.boxes.numpy(), atol=tol, rtol=0)
    if res.keypoints is not None:
        np.testing.assert_allclose(targets.keypoints[..., :2], res.keypoints.xy.numpy(), atol=tol, rtol=0)
        visible = res.keypoints.conf.numpy() >= 0.5
        np.testing.assert_array_equal(targets.keypoints[..., 2], np.where(visible, 2.0, 0.0))


def test_tracked_detections_show_ids_and_an_empty_result_writes_an_empty_label(tmp_path: Path) -> None:
    det = Detections(
        boxes=torch.tensor([[10.0, 10.0, 30.0, 40.0], [50.0, 5.0, 60.0, 25.0]]),
        scores=torch.tensor([0.9, 0.6]),
        labels=torch.tensor([1, 0]),
        ids=torch.tensor([7, 3]),
    )
    res = Results(
        det, names=["a", "b"], orig_img=np.zeros((64, 80, 3), np.uint8), orig_shape=(64, 80), frame=4
    )
    assert res.boxes.id.tolist() == [7, 3] and res.boxes.data.shape == (2, 7)
    assert res.numpy().boxes.id.tolist() == [7, 3]
    assert [r["id"] for r in res.summary()] == [7, 3]
    assert Results.from_json(res.to_json()).boxes.id.tolist() == [7, 3]
    assert res.describe() == "1 a, 1 b" and res.to("cpu").frame == 4
    assert res.label_lines(save_conf=True)[0].split()[-1] == "0.900000"
    empty = Results(Detections.empty(), names=["a"], orig_img=None, orig_shape=(8, 8))
    assert empty.save_txt(tmp_path / "empty.txt").read_text() == ""
    with pytest.raises(ValueError, match="orig_shape"):
        Results(det, names=["a"], orig_img=np.zeros((8, 8, 3), np.uint8), orig_shape=(64, 80))
