"""Sliced inference: small objects on a large image are found by tiles and missed by whole-image inference, objects
cut by tile borders are reported once, and the merge maps every field (boxes, rotated boxes, keypoints, masks)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from torch import Tensor

from lucid_core.geometry.rotated import rboxes_to_xyxy
from lucid_core.inference import predict, predict_prepared, prepare_inference_model
from lucid_core.interop import import_checkpoint
from lucid_core.models import YOLOModel, build_model
from lucid_core.results import Detections
from lucid_core.slicing import (
    TileDetections,
    merge_tiles,
    polygon_nms,
    predict_sliced,
    slice_windows,
    tile_windows,
)

MIN_AREA = 9  # network-input pixels a blob needs to be seen by the stand-in network
SLOTS = 64


class BlobModel(YOLOModel):
    """Stand-in network: one box per bright blob (red > 0.5) of at least MIN_AREA input pixels, class 0, p = 0.9."""

    def forward(self, x: Tensor) -> Any:  # type: ignore[override]
        out = torch.zeros((x.shape[0], 4 + self.num_classes, SLOTS))
        for b in range(x.shape[0]):
            mask = (x[b, 0] > 0.5).cpu().numpy().astype(np.uint8)
            count, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
            slot = 0
            for left, top, width, height, area in stats[1:count].tolist():
                if area >= MIN_AREA and slot < SLOTS:
                    out[b, :4, slot] = torch.tensor([left + width / 2, top + height / 2, width, height])
                    out[b, 4, slot] = 0.9
                    slot += 1
        return out


@pytest.fixture(scope="module")
def blob_net() -> tuple[YOLOModel, str]:
    model = build_model("yolov8", "detect", "n", num_classes=2)
    model.__class__ = BlobModel
    net, mode = prepare_inference_model(model)
    return net, mode


def _scene() -> tuple[np.ndarray, list[tuple[int, int, int, int]]]:
    """A 2560×2560 black image with white objects (x1, y1, x2, y2 exclusive) a few pixels wide; some are cut by tile
    borders (slice 640, overlap 0.2: windows start at 0, 512, 1024, 1536, 1920)."""
    objects = [
        (100, 100, 106, 106),  # inside one tile
        (2000, 300, 2006, 306),
        (1300, 2200, 1306, 2206),
        (600, 900, 606, 906),  # in the overlap of two tiles, whole in both
        (636, 1400, 642, 1406),  # cut by the right edge of the first column of tiles
        (1149, 700, 1189, 706),  # 40 px long, 3 px of it inside the second column of tiles
        (1148, 1148, 1154, 1154),  # cut by a tile corner
    ]
    image = np.zeros((2560, 2560, 3), np.uint8)
    for x1, y1, x2, y2 in objects:
        image[y1:y2, x1:x2] = 255
    return image, objects


def test_sliced_inference_finds_small_objects_once(blob_net: tuple[YOLOModel, str]) -> None:
    net, mode = blob_net
    image, objects = _scene()
    (whole,) = predict_prepared(net, image, mode=mode, imgsz=640)  # type: ignore[arg-type]
    # a 6 px object is 1.5 px at 640, too small for the network: whole-image inference sees the long one only
    assert whole.boxes[:, 2].sub(whole.boxes[:, 0]).gt(30).all() and len(whole) <= 1
    (sliced,) = predict_sliced(net, image, mode=mode, imgsz=640, slice=640, overlap=0.2, batch=4)  # type: ignore[arg-type]
    assert len(sliced) == len(objects)  # each object once, cut ones included
    expected = torch.tensor(objects, dtype=torch.float32)
    found = sliced.boxes[torch.argsort(sliced.boxes[:, 0] * 10000 + sliced.boxes[:, 1])]
    torch.testing.assert_close(found, expected[torch.argsort(expected[:, 0] * 10000 + expected[:, 1])])
    assert sliced.labels.eq(0).all() and torch.allclose(sliced.scores, torch.tensor(0.9))
    # without the inner-edge rule the 3 px stub of the long object would survive NMS (IoU 0.075 < 0.1)
    (batched,) = predict_sliced(net, image, mode=mode, imgsz=640, batch=1)  # type: ignore[arg-type]
    assert torch.equal(batched.boxes, sliced.boxes)


def test_predict_with_slice_is_sliced_inference_on_every_frame(blob_net: tuple[YOLOModel, str]) -> None:
    net, mode = blob_net
    image, objects = _scene()
    (expected,) = predict_sliced(net, image, mode=mode, imgsz=640, slice=640, overlap=0.2, batch=4)  # type: ignore[arg-type]
    (result,) = predict(net, image, imgsz=640, decode=mode, slice=640, overlap=0.2, batch=4)  # type: ignore[arg-type]
    assert len(result.detections) == len(objects)
    assert torch.equal(result.detections.boxes, expected.boxes)
    assert torch.equal(result.detections.scores, expected.scores)
    with pytest.raises(ValueError, match="overlap"):
        predict(net, image, imgsz=640, slice=640, overlap=1.5)


def test_an_image_within_one_slice_is_predict_prepared(blob_net: tuple[YOLOModel, str]) -> None:
    net, mode = blob_net
    image = np.zeros((300, 500, 3), np.uint8)
    image[50:70, 80:120] = 255
    (single,) = predict_prepared(net, image, mode=mode, imgsz=320)  # type: ignore[arg-type]
    (sliced,) = predict_sliced(net, image, mode=mode, imgsz=320, slice=640)  # type: ignore[arg-type]
    assert len(single) == 1 and torch.equal(single.boxes, sliced.boxes)


def test_windows_and_arguments() -> None:
    assert slice_windows(2560, 2560, 640, 0.2) == tile_windows(2560, 2560, 640, 128)
    assert [w[0] for w in slice_windows(100, 2560, 640, 0.2)][:6] == [0, 512, 1024, 1536, 1920]
    assert slice_windows(300, 500, 640, 0.2) == [(0, 0, 500, 300)]
    with pytest.raises(ValueError, match="overlap"):
        slice_windows(10, 10, 640, 1.0)
    with pytest.raises(ValueError, match="slice"):
        slice_windows(10, 10, 0, 0.2)


def test_merge_maps_every_field_and_pastes_masks() -> None:
    mask_a = torch.zeros((1, 40, 40), dtype=torch.bool)
    mask_a[0, 5:10, 30:40] = True  # touches the inner right edge at x = 40 of tile A
    mask_b = torch.zeros((1, 40, 40), dtype=torch.bool)
    mask_b[0, 5:10, 10:20] = True
    rb = torch.tensor([[35.0, 7.5, 10.0, 5.0, 0.0]])
    kp = torch.tensor([[[32.0, 6.0, 0.9]]])
    a = Detections(
        torch.tensor([[30.0, 5.0, 40.0, 10.0]]), torch.tensor([0.8]), torch.tensor([0]), mask_a, kp, rb
    )
    rb_b = torch.tensor([[15.0, 7.5, 10.0, 5.0, 0.0]])
    kp_b = torch.tensor([[[12.0, 6.0, 0.9]]])
    b = Detections(
        torch.tensor([[10.0, 5.0, 20.0, 10.0]]), torch.tensor([0.7]), torch.tensor([0]), mask_b, kp_b, rb_b
    )
    tiles = [TileDetections((0, 0, 40, 40), a), TileDetections((25, 0, 65, 40), b)]
    merged = merge_tiles(tiles, (40, 65))
    # a's detection touches its inner edge and lies inside tile b: only b's (shifted by 25) remains
    assert len(merged) == 1
    torch.testing.assert_close(merged.boxes, torch.tensor([[35.0, 5.0, 45.0, 10.0]]))
    torch.testing.assert_close(merged.rboxes, torch.tensor([[40.0, 7.5, 10.0, 5.0, 0.0]]))
    torch.testing.assert_close(merged.keypoints, torch.tensor([[[37.0, 6.0, 0.9]]]))
    assert merged.masks is not None and merged.masks.shape == (1, 40, 65)
    expected = torch.zeros((40, 65), dtype=torch.bool)
    expected[5:10, 35:45] = True
    assert torch.equal(merged.masks[0], expected)
    # inside both tiles but touching no inner edge: both kept by the edge rule, NMS keeps the better one
    c = Detections(torch.tensor([[28.0, 20.0, 34.0, 26.0]]), torch.tensor([0.6]), torch.tensor([1]))
    d = Detections(torch.tensor([[3.0, 20.0, 9.0, 26.0]]), torch.tensor([0.65]), torch.tensor([1]))
    merged = merge_tiles([TileDetections((0, 0, 40, 40), c), TileDetections((25, 0, 65, 40), d)], (40, 65))
    assert len(merged) == 1 and float(merged.scores[0]) == pytest.approx(0.65)
    assert merge_tiles([TileDetections((0, 0, 40, 40), Detections.empty())], (40, 40)).boxes.shape == (0, 4)


def test_polygon_nms_is_greedy() -> None:
    square = np.array([[0, 0], [10, 0], [10, 10], [0, 10]], np.float64)
    shifts = np.array(
        [[0, 0], [1, 0], [20, 0], [9, 0]], np.float64
    )  # row 3: IoU 0.11 with the suppressed row 1
    polys = square[None] + shifts[:, None]
    assert polygon_nms(polys, np.array([0.9, 0.8, 0.7, 0.6]), 0.1).tolist() == [0, 2, 3]


@pytest.mark.shared
@pytest.mark.parametrize(
    ("weights", "image", "slice_size"),
    [
        ("yolov8n-obb-taufibrils.pt", "data/dota8/images/val/P1571__1024__2976___0.jpg", 640),
        ("yolo26n-seg-shapes.pt", "data/shapes-seg/images/val/val_000000.jpg", 64),
    ],
)
def test_rotated_boxes_and_masks_come_back_in_image_pixels(
    shared_dir: Path, weights: str, image: str, slice_size: int
) -> None:
    model, _ = import_checkpoint(shared_dir / "weights" / weights)
    net, mode = prepare_inference_model(model)
    rgb = np.ascontiguousarray(cv2.imread(str(shared_dir / image))[..., ::-1])
    h, w = rgb.shape[:2]
    imgsz = 96 if slice_size < 96 else 640
    (det,) = predict_sliced(net, rgb, mode=mode, imgsz=imgsz, slice=slice_size, overlap=0.25)
    assert len(det) > 0 and bool((det.scores[:-1] >= det.scores[1:]).all())
    if det.rboxes is not None:
        torch.testing.assert_close(det.boxes, rboxes_to_xyxy(det.rboxes))
        assert bool(
            (det.rboxes[:, :2] >= 0).all() and (det.rboxes[:, 0] <= w).all() and (det.rboxes[:, 1] <= h).all()
        )
    else:
        assert det.masks is not None and det.masks.shape == (len(det), h, w)
        for box, mask in zip(det.boxes, det.masks, strict=True):
            ys, xs = torch.nonzero(mask, as_tuple=True)
            assert len(xs) > 0
            x1, y1, x2, y2 = box.tolist()
            assert xs.min() >= math.floor(x1) - 2 and xs.max() <= math.ceil(x2) + 2
            assert ys.min() >= math.floor(y1) - 2 and ys.max() <= math.ceil(y2) + 2
