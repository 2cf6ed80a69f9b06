"""Segment training masks (`lucid_data.masks`, fixture README R1–R6) and the segment batch layout: the fixtures'
rasterisation records and batch targets, area-0 ordering, polygons following augmentation, copy-paste, and
the synthetic segment set's masks being its drawn polygons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch

from lucid_data import load_dataset, load_image
from lucid_data.augment import AugmentConfig
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.masks import (
    instance_masks,
    overlap_index_map,
    rasterize_polygon,
    resample_polygon,
    resample_polygons,
    segment_masks,
    semantic_from_instances,
)
from lucid_data.synth import synthesize

FILES = ("segment_loss_yolov8n-seg.pt", "segment_loss_yolo26n-seg.pt")


def _fixtures(shared_dir: Path) -> list[dict[str, Any]]:
    out = []
    for name in FILES:
        path = shared_dir / "fixtures" / name
        if path.is_file():
            out.append(torch.load(path, weights_only=True, map_location="cpu"))
    if not out:
        pytest.skip("no segment_loss_*.pt fixture")
    return out


def _label_polygons(lines: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
    classes, polygons = [], []
    for line in lines:
        values = line.split()
        classes.append(float(values[0]))
        polygons.append(np.array(values[1:], dtype=np.float32).reshape(-1, 2))
    return np.array(classes, np.float32), polygons


@pytest.mark.shared
def test_rasterisation_reproduces_fixture_images(shared_dir: Path) -> None:
    for fx in _fixtures(shared_dir):
        meta = fx["meta"]
        input_hw = (int(meta["imgsz_hw"][0]), int(meta["imgsz_hw"][1]))
        for image in meta["images"]:
            stem = image["stem"]
            classes, polygons = _label_polygons(image["label_lines"])
            assert np.array_equal(classes, image["cls_label_order"].numpy()), stem
            # R1: resampled in normalised coordinates, then mapped to input pixels in float32
            (_gain_h, _gain_w), (left, top) = image["letterbox_ratio_pad"]
            loaded_h, loaded_w = image["loaded_hw"]
            scale = np.array([loaded_w, loaded_h], np.float32)
            offset = np.array([left, top], np.float32)
            resampled = [p * scale + offset for p in resample_polygons(polygons)]
            segments = image["segments_px"].numpy()
            assert len(resampled) == segments.shape[0] == image["n_instances"]
            for mine, ref in zip(resampled, segments):
                assert mine.dtype == np.float32 and np.array_equal(mine, ref), stem
            # boxes from the original polygons: min/max -> centre/size -> corners -> input pixels
            boxes = []
            for p in polygons:
                x1, y1 = p.min(0)
                x2, y2 = p.max(0)
                cx, cy, w, h = (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1
                corners = np.array([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], np.float32)
                boxes.append(corners * np.tile(scale, 2) + np.tile(offset, 2))
            np.testing.assert_allclose(
                np.stack(boxes), image["bboxes_xyxy_px_label_order"].numpy(), rtol=0, atol=1e-4
            )
            for key, raster in image.items():
                if not key.startswith("raster_mask_ratio_"):
                    continue
                ratio = int(key.removeprefix("raster_mask_ratio_"))
                masks = instance_masks(list(segments), input_hw, ratio)
                assert np.array_equal(masks, raster["instance_masks_label_order"].numpy()), stem
                areas = masks.reshape(len(masks), -1).sum(1)
                assert np.array_equal(areas, raster["instance_mask_area"].numpy()), stem
                _, order, _ = overlap_index_map(masks, classes)
                assert np.array_equal(order, raster["overlap_sort_index"].numpy()), stem
                if "full_res_masks_packbits" in raster:
                    full = np.unpackbits(raster["full_res_masks_packbits"].numpy(), axis=-1)
                    mine_full = np.stack([rasterize_polygon(p, input_hw) for p in segments])
                    assert np.array_equal(mine_full, full[..., : input_hw[1]]), stem


@pytest.mark.shared
def test_segment_masks_reproduce_fixture_batch_targets(shared_dir: Path) -> None:
    for fx in _fixtures(shared_dir):
        meta = fx["meta"]
        input_hw = (int(meta["imgsz_hw"][0]), int(meta["imgsz_hw"][1]))
        height, width = input_hw
        for name, case in fx["cases"].items():
            config, targets = case["config"], case["targets"]
            overlap, ratio = bool(config["overlap_mask"]), int(config["mask_ratio"])
            masks, sems, classes, boxes = [], [], [], []
            for image in meta["images"]:
                polygons = [] if config["empty"] else list(image["segments_px"].numpy())
                labels = np.zeros(0, np.float32) if config["empty"] else image["cls_label_order"].numpy()
                xyxy = np.zeros((0, 4), np.float32)
                if not config["empty"]:
                    xyxy = image["bboxes_xyxy_px_label_order"].numpy()
                seg = segment_masks(polygons, labels, input_hw, ratio, overlap=overlap, resample=False)
                (masks.append(seg.masks[None]) if overlap else masks.append(seg.masks))
                sems.append(seg.sem_masks)
                classes.append(labels[seg.order])
                boxes.append(xyxy[seg.order])
            batch_masks = np.concatenate(masks)
            assert batch_masks.shape == tuple(targets["masks"].shape), name
            assert np.array_equal(batch_masks, targets["masks"].numpy().astype(batch_masks.dtype)), name
            assert np.array_equal(np.stack(sems), targets["sem_masks"].numpy()), name
            assert np.array_equal(np.concatenate(classes), targets["cls"].numpy().reshape(-1)), name
            b = np.concatenate(boxes).reshape(-1, 4)
            cxcywh = np.stack(
                (
                    (b[:, 0] + b[:, 2]) / 2 / width,
                    (b[:, 1] + b[:, 3]) / 2 / height,
                    (b[:, 2] - b[:, 0]) / width,
                    (b[:, 3] - b[:, 1]) / height,
                ),
                -1,
            )
            np.testing.assert_allclose(cxcywh, targets["bboxes"].numpy().reshape(-1, 4), rtol=0, atol=1e-6)


def test_resample_closes_the_outline_and_keeps_vertices() -> None:
    square = np.array([[0, 0], [4, 0], [4, 4], [0, 4]], np.float32)
    out = resample_polygon(square, 20)
    assert out.shape == (20, 2) and out.dtype == np.float32
    for vertex in np.concatenate((square, square[:1])):
        assert (np.abs(out - vertex).sum(1) == 0).any()
    assert np.array_equal(out[0], square[0]) and np.array_equal(out[-1], square[0])
    long = np.random.default_rng(0).random((1200, 2)).astype(np.float32)
    both = resample_polygons([square, long])
    assert [len(p) for p in both] == [1201, 1201]  # an image with a longer polygon uses max_len + 1
    assert np.array_equal(resample_polygon(long[:1000], 1000), long[:1000])  # exactly 1000 points: unchanged


def test_area_zero_instances_sort_first_and_smaller_instances_win() -> None:
    masks = np.zeros((3, 8, 8), np.uint8)
    masks[0, 0:6, 0:6] = 1  # large
    masks[2, 2:4, 2:4] = 1  # small, inside the large one
    # masks[1] is empty (area 0): it sorts first, before the largest
    index_map, order, sem = overlap_index_map(masks, np.array([5, 7, 9]))
    assert order.tolist() == [1, 0, 2]
    assert index_map[0, 0] == 2 and index_map[2, 2] == 3 and index_map[7, 7] == 0
    assert sem[2, 2] == 9 and sem[0, 0] == 5 and sem[7, 7] == 9  # map 0: the last sorted instance's class
    plain = semantic_from_instances(masks, np.array([5, 7, 9]))
    assert plain[2, 2] == 9 and plain[0, 0] == 5 and plain[7, 7] == 0
    empty = segment_masks([], np.zeros(0), (16, 16), 4)
    assert empty.masks.shape == (4, 4) and not empty.masks.any() and not empty.sem_masks.any()


def test_rasterize_clips_far_away_and_border_vertices() -> None:
    poly = np.array([[-50.7, -3.2], [20.9, -3.2], [20.9, 10.0], [-50.7, 10.0]], np.float32)
    mask = rasterize_polygon(poly, (8, 8))
    assert mask.shape == (8, 8) and mask.all()  # covers the whole (clipped) image
    with pytest.raises(ValueError, match="non-finite"):
        rasterize_polygon(np.array([[0, 0], [np.nan, 1], [2, 2]]), (4, 4))
    with pytest.raises(ValueError, match="must divide"):
        segment_masks([poly], np.zeros(1), (10, 10), 4)


@pytest.fixture(scope="module")
def segment_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synth_seg")
    return synthesize(
        "segment", root / "s", n_train=6, n_val=2, imgsz=64, seed=11, noise=0, image_format="png"
    )


def _saturation(image: np.ndarray) -> np.ndarray:
    values: np.ndarray = image.max(-1).astype(int) - image.min(-1).astype(int)
    return values


@pytest.mark.parametrize("overlap", [True, False])
def test_polygons_follow_mosaic_affine_and_flip(segment_set: Path, overlap: bool) -> None:
    """Masks rasterised from the augmented polygons lie on the augmented shapes' (saturated) pixels."""
    config = AugmentConfig(degrees=20, shear=5, fliplr=0.5, flipud=0.5, hsv_h=0, hsv_s=0, hsv_v=0)
    ds = DetectionDataset(
        segment_set, imgsz=64, augment=True, augment_config=config, seed=3, mask_ratio=1, overlap_mask=overlap
    )
    batch = collate([ds[i] for i in range(len(ds))])
    n = batch["batch_idx"].shape[0]
    assert batch["sem_masks"].shape == (len(ds), 64, 64)
    if overlap:
        assert batch["masks"].shape == (len(ds), 64, 64)
    else:
        assert batch["masks"].shape == (n, 64, 64)
    row = 0
    inside_sat, outside_sat = [], []
    for i, targets in enumerate(batch["targets"]):
        image = batch["images"][i].permute(1, 2, 0).numpy()
        sat = _saturation(image)
        for k in range(len(targets)):
            mask = (batch["masks"][i] == k + 1) if overlap else batch["masks"][row + k].bool()
            mask_np = mask.numpy()
            if mask_np.sum() < 20:
                continue
            eroded = cv2.erode(mask_np.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
            inside_sat.append(np.median(sat[eroded]) if eroded.any() else np.median(sat[mask_np]))
            ys, xs = np.nonzero(mask_np)
            x1, y1, x2, y2 = targets.boxes[k]
            assert xs.min() >= x1 - 1 and xs.max() <= x2 + 1 and ys.min() >= y1 - 1 and ys.max() <= y2 + 1
            assert int(batch["sem_masks"][i][mask].unique().numel()) == 1
            assert float(batch["sem_masks"][i][mask][0]) == float(targets.labels[k])
        covered = (
            (batch["masks"][i] > 0) if overlap else batch["masks"][row : row + len(targets)].bool().any(0)
        )
        outside_sat.append(np.median(sat[~covered.numpy()]))
        row += len(targets)
    assert inside_sat and min(inside_sat) > 2 * max(outside_sat)


def test_copy_paste_on_segments_adds_masked_instances(segment_set: Path) -> None:
    config = AugmentConfig(
        mosaic=0, copy_paste=1.0, fliplr=0, hsv_h=0, hsv_s=0, hsv_v=0, translate=0, scale=0
    )
    plain = DetectionDataset(
        segment_set,
        imgsz=64,
        augment=True,
        augment_config=AugmentConfig(mosaic=0, fliplr=0, hsv_h=0, hsv_s=0, hsv_v=0, translate=0, scale=0),
        seed=1,
    )
    pasted = DetectionDataset(segment_set, imgsz=64, augment=True, augment_config=config, seed=1)
    assert AugmentConfig().copy_paste == 0.0  # off by default, as the reference
    gained = 0
    for i in range(len(plain)):
        a, b = plain[i], pasted[i]
        gained += len(b["targets"]) - len(a["targets"])
        assert len(b["targets"].polygons) == len(b["targets"])
        assert int(b["masks"].max()) == len(b["targets"])  # every instance, pasted ones too, has a mask
    assert gained > 0


def test_synthetic_segment_masks_are_the_drawn_polygons(segment_set: Path) -> None:
    """`lucid-data synth --task segment`: the label polygons are the drawn outlines (pixel-exact interiors)."""
    source = load_dataset(segment_set, "train")
    ds = DetectionDataset(segment_set, imgsz=64, augment=False, mask_ratio=1, overlap_mask=False)
    for index, record in enumerate(source.records):
        image = load_image(record.path)
        sample = ds[index]
        masks = sample["masks"].astype(bool)
        assert masks.shape[0] == len(record.targets)
        for k, polygon in enumerate(record.targets.polygons or []):
            centre = np.round(polygon.mean(0)).astype(int)
            colour = image[centre[1], centre[0]]
            drawn = (image == colour).all(-1)
            # R2 truncates the vertices toward zero (up to 1 px up/left) and the outline is anti-aliased: ±2 px
            grown = cv2.dilate(masks[k].astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
            shrunk = cv2.erode(masks[k].astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
            assert not (drawn & ~grown).any()  # no pixel of the shape's colour outside the polygon
            assert (drawn | ~shrunk).all()  # the polygon's interior is the shape's colour
            assert drawn.sum() >= 0.5 * masks[k].sum()


@pytest.mark.parametrize("family", ["yolov8", "yolo26"])
@pytest.mark.parametrize("overlap", [True, False])
def test_collated_segment_batch_trains_a_real_model(segment_set: Path, family: str, overlap: bool) -> None:
    """Smoke: data pipeline → real segment model in train mode → task objective → finite loss, gradients."""
    from lucid_core.models import build_model
    from lucid_core.outputs import TrainOutput
    from lucid_core.tasks import build_objective

    ds = DetectionDataset(segment_set, imgsz=64, augment=True, seed=0, overlap_mask=overlap)
    batch = collate([ds[i] for i in range(2)])
    torch.manual_seed(0)
    model = build_model(family, "segment", "n", num_classes=3).train()
    objective = build_objective(model, epochs=3, overlap_mask=overlap)
    output = model(batch["images"].float() / 255)
    assert isinstance(output, TrainOutput) and output.proto is not None
    assert (output.semseg is not None) == (family == "yolo26")
    total, items = objective(output, batch)
    assert torch.isfinite(total) and torch.isfinite(items).all()
    assert items.shape == (5,) and float(items[1]) > 0  # the mask term is active
    assert (float(items[4]) > 0) == (family == "yolo26")  # semantic term only for YOLO26
    total.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert model.head.proto.cv1.conv.weight.grad is not None  # type: ignore[union-attr]
