"""Rectangular validation batches (issue 12, the reference's ``rect=True`` validation protocol).

The shape rule is re-derived here from the images themselves (sizes read with OpenCV): sort by h / w, cut batches,
``[max_ar, 1]`` for all-landscape, ``[1, 1 / min_ar]`` for all-portrait, else ``[1, 1]``, times imgsz / stride,
plus pad 0.5, ceiling, times stride. The imported YOLOv8s checkpoint, and an in-domain one (yolo26n-seg-shapes on
shapes-seg), then detect the same boxes (in original pixels) through rectangular and square letterboxes.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from lucid_data.dataset import DetectionDataset
from lucid_data.readers import load_dataset
from lucid_data.rect import RectBatchSampler, rect_batches

STRIDE = 32


def _expected_shapes(sizes: list[tuple[int, int]], batch: int, imgsz: int) -> list[tuple[int, int]]:
    ratios = sorted(h / w for h, w in sizes)
    shapes = []
    for start in range(0, len(ratios), batch):
        part = ratios[start : start + batch]
        unit = (part[-1], 1.0) if part[-1] < 1 else (1.0, 1.0 / part[0]) if part[0] > 1 else (1.0, 1.0)
        shapes.append(tuple(math.ceil(u * imgsz / STRIDE + 0.5) * STRIDE for u in unit))
    return shapes  # type: ignore[return-value]


@pytest.fixture(scope="module")
def coco8_val(shared_dir: Path) -> object:
    return load_dataset(shared_dir / "data" / "coco8" / "coco8.yaml", "val", None)


@pytest.mark.shared
@pytest.mark.parametrize(("batch", "imgsz"), [(2, 640), (2, 320), (4, 640), (1, 640)])
def test_coco8_batch_shapes_are_the_stride_aligned_aspect_shapes(
    coco8_val: object, batch: int, imgsz: int
) -> None:
    records = list(coco8_val.records)  # type: ignore[attr-defined]
    sizes = [tuple(cv2.imread(str(r.path)).shape[:2]) for r in records]
    batches = rect_batches(sizes, batch, imgsz)
    assert list(batches.shapes) == _expected_shapes(sizes, batch, imgsz)
    aspect = [h / w for h, w in sizes]
    for members, (h, w) in zip(batches.batches, batches.shapes, strict=True):
        assert h % STRIDE == 0 and w % STRIDE == 0
        assert [aspect[i] for i in members] == sorted(aspect[i] for i in members)  # aspect-sorted
        if all(aspect[i] < 1 for i in members) or all(aspect[i] > 1 for i in members):
            assert h != w  # a batch of one orientation is a rectangle, not a square
    order = [i for members in batches.batches for i in members]
    assert sorted(order) == list(range(len(records)))
    assert [aspect[i] for i in order] == sorted(aspect)

    dataset = DetectionDataset(coco8_val, imgsz=imgsz, augment=False)  # type: ignore[arg-type]
    assert dataset.use_rect_batches(batch) == batches
    for members, shape in zip(batches.batches, batches.shapes, strict=True):
        for i in members:
            sample = dataset[i]
            h0, w0 = sizes[i]
            info = sample["meta"]["letterbox"]
            assert tuple(sample["image"].shape[1:]) == shape == info.input_hw
            r = imgsz / max(h0, w0)  # long side resized to imgsz, then only padded
            assert info.new_unpad_wh == (min(math.ceil(w0 * r), imgsz), min(math.ceil(h0 * r), imgsz))


def test_rect_sampler_shards_whole_batches() -> None:
    sizes = [(100 + 10 * i, 200) for i in range(7)]
    batches = rect_batches(sizes, 2, 64)
    shards = [list(RectBatchSampler(batches, rank=r, world_size=2)) for r in (0, 1)]
    assert shards[0] + shards[1] != [] and len(shards[0]) == 2 and len(shards[1]) == 2
    assert sorted(tuple(b) for shard in shards for b in shard) == sorted(batches.batches)
    with pytest.raises(ValueError, match="rank 2"):
        RectBatchSampler(batches, rank=2, world_size=2)
    with pytest.raises(ValueError, match="image 1 has size"):
        rect_batches([(10, 10), (0, 5)], 2, 64)


def test_val_dataloader_is_rect_with_twice_the_training_batch(tmp_path: Path) -> None:
    from lucid_train_testing import make_shapes, tiny_data

    data = tiny_data(make_shapes(tmp_path / "shapes", n_train=4, n_val=5), batch_size=2)
    loader = data.val_dataloader()
    batches = list(loader)
    assert data.val_batch_size == 4 and [len(b["meta"]) for b in batches] == [4, 1]
    # square 64 px images: [1, 1] -> ceil(64/32 + 0.5) * 32 = 96 (pad 0.5 adds up to one stride)
    assert all(tuple(b["images"].shape[2:]) == (96, 96) for b in batches)


def _confident_box_distances(
    model: torch.nn.Module, records: object, imgsz: int, **dataset_options: object
) -> list[tuple[float, float]]:
    """Every box with conf > 0.5 through both letterboxes (square and rectangular), matched to the nearest box of
    its class by max-coordinate distance in original pixels, in both directions: (distance in px, tolerance),
    the tolerance 2 px, or 1 % of the image diagonal for a box touching the image border (see the YOLOv8s test)."""
    from lucid_core.postprocess import postprocess
    from lucid_train.eval.runner import to_original

    square = DetectionDataset(records, imgsz=imgsz, augment=False, **dataset_options)  # type: ignore[arg-type]
    rect = DetectionDataset(records, imgsz=imgsz, augment=False, **dataset_options)  # type: ignore[arg-type]
    rect.use_rect_batches(2)
    options = {"kpt_shape": tuple(model.kpt_shape)} if getattr(model, "kpt_shape", None) else {}
    found: list[tuple[float, float]] = []
    for i in range(len(square)):
        boxes = {}
        for name, dataset in (("square", square), ("rect", rect)):
            sample = dataset[i]
            with torch.no_grad():
                output = model(sample["image"][None].float() / 255.0)
            (det,) = postprocess(
                output,
                task=model.task,
                nc=int(model.num_classes),
                conf=0.001,
                iou=0.7,
                multi_label=True,
                **options,
            )
            det = to_original(det, sample["meta"]["letterbox"])
            boxes[name] = (det.boxes.numpy(), det.scores.numpy(), det.labels.numpy())
        assert tuple(rect[i]["image"].shape[1:]) != tuple(
            square[i]["image"].shape[1:]
        )  # a different letterbox
        h0, w0 = square[i]["meta"]["orig_size"]
        for ours, other in ((boxes["square"], boxes["rect"]), (boxes["rect"], boxes["square"])):
            for box, score, label in zip(*ours, strict=True):
                if score <= 0.5:
                    continue
                same = other[2] == label
                assert same.any()
                distances = np.abs(other[0][same] - box).max(axis=1)
                nearest = int(distances.argmin())
                if other[1][same][nearest] <= 0.5:
                    continue  # confident in one letterbox only (scores near 0.5 move)
                match = other[0][same][nearest]
                touches_border = any(
                    b[0] < 1 or b[1] < 1 or b[2] > w0 - 1 or b[3] > h0 - 1 for b in (box, match)
                )
                found.append(
                    (float(distances[nearest]), 0.01 * math.hypot(h0, w0) if touches_border else 2.0)
                )
    return found


@pytest.mark.shared
@pytest.mark.slow
def test_yolov8s_boxes_match_between_rect_and_square_letterbox(coco8_val: object, shared_dir: Path) -> None:
    """The imported YOLOv8s checkpoint: boxes found with conf > 0.5 through both letterboxes, mapped back to original
    pixels, agree within 2 px (border-touching boxes within 1 % of the image diagonal, see below)."""
    from lucid_core.interop import import_checkpoint

    torch.set_num_threads(1)
    model, _ = import_checkpoint(shared_dir / "weights" / "yolov8s-fall.pt")
    found = _confident_box_distances(model.float().eval(), coco8_val, 640)
    # A box touching the image border sees the input's edge in the square letterbox but half a stride of grey
    # padding in the rectangular one, so the network itself answers slightly differently (measured: 5.6 px on a
    # 340 x 490 px box); interior boxes must agree within 2 px.
    assert found and all(distance <= tolerance for distance, tolerance in found), found


@pytest.mark.shared
@pytest.mark.slow
def test_an_in_domain_checkpoint_finds_the_same_boxes_through_both_letterboxes(shared_dir: Path) -> None:
    """The imported yolo26n-seg-shapes checkpoint on its own kind of images (shapes-seg val, 96 px squares) at
    imgsz 640: every box with conf > 0.5 in both letterboxes agrees within 2 px in original pixels, border or not
    (a pad offset of half a stride mapped back wrongly would be 16 / 6.67 = 2.4 px here)."""
    from lucid_core.interop import import_checkpoint

    torch.set_num_threads(1)
    model, _ = import_checkpoint(shared_dir / "weights" / "yolo26n-seg-shapes.pt")
    records = load_dataset(shared_dir / "data" / "shapes-seg" / "data.yaml", "val", None)
    found = _confident_box_distances(model.float().eval(), records, 640, task="segment")
    assert len(found) >= 50 and max(distance for distance, _ in found) <= 2.0, found


@pytest.mark.parametrize(
    ("task", "factor"), [("detect", 2), ("segment", 2), ("pose", 2), ("obb", 1), ("classify", 2)]
)
def test_validation_batch_is_the_tasks_multiple_of_the_training_batch(task: str, factor: int) -> None:
    """The reference validates rotated boxes in batches of the training batch and every other task in twice it
    (its batch count per validation); the validation losses are per-batch means, so this is part of them."""
    from types import SimpleNamespace

    from lucid_core.tasks import get_task
    from lucid_train.datamodule import DetectionDataModule

    assert get_task(task).validation_batch_factor == factor
    module = SimpleNamespace(task=task, batch_size=3)  # the property reads only these two
    assert DetectionDataModule.val_batch_size.fget(module) == 3 * factor  # type: ignore[attr-defined]
