"""DetectionDataset + collate: batch layout per task, reproducibility across worker counts, corrupt images,
evaluation letterbox, close_mosaic."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from lucid_data.augment import AugmentConfig
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.synth import synthesize

IMGSZ = 64


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("synth")
    return {
        task: synthesize(task, root / task, n_train=8, n_val=2, imgsz=48, seed=3)
        for task in ("detect", "segment", "pose", "obb")
    }


def _batches(ds: DetectionDataset, workers: int, epoch: int) -> list[dict]:
    ds.set_epoch(epoch)
    loader = DataLoader(ds, batch_size=3, shuffle=False, num_workers=workers, collate_fn=collate)
    return list(loader)


def _assert_batches_equal(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert set(x) == set(y)
        for key in x:
            if isinstance(x[key], torch.Tensor):
                assert x[key].dtype == y[key].dtype
                assert torch.equal(x[key], y[key]), key
        for tx, ty in zip(x["targets"], y["targets"]):
            assert np.array_equal(tx.boxes, ty.boxes)


@pytest.mark.parametrize("task", ["detect", "pose"])
def test_same_seed_gives_identical_batches_with_0_and_2_workers(datasets: dict[str, Path], task: str) -> None:
    cfg = AugmentConfig(mixup=0.3, degrees=5)
    ds = DetectionDataset(datasets[task], imgsz=IMGSZ, augment=True, augment_config=cfg, seed=7)
    serial = _batches(ds, 0, epoch=2)
    parallel = _batches(ds, 2, epoch=2)
    _assert_batches_equal(serial, parallel)
    other_epoch = _batches(ds, 0, epoch=3)
    assert not torch.equal(serial[0]["images"], other_epoch[0]["images"])
    ds.rank = 1
    other_rank = _batches(ds, 0, epoch=2)
    assert not torch.equal(serial[0]["images"], other_rank[0]["images"])


@pytest.mark.parametrize("task", ["detect", "segment", "pose", "obb"])
@pytest.mark.parametrize("augment", [True, False])
def test_batch_layout_matches_the_interfaces_table(
    datasets: dict[str, Path], task: str, augment: bool
) -> None:
    ds = DetectionDataset(datasets[task], imgsz=IMGSZ, augment=augment)
    batch = collate([ds[i] for i in range(4)])
    assert batch["images"].shape == (4, 3, IMGSZ, IMGSZ) and batch["images"].dtype == torch.uint8
    n = batch["batch_idx"].shape[0]
    assert n == sum(len(t) for t in batch["targets"]) > 0
    assert batch["batch_idx"].dtype == torch.float32
    assert torch.equal(batch["batch_idx"], batch["batch_idx"].sort().values)
    assert batch["cls"].shape == (n, 1) and batch["bboxes"].shape == (n, 4)
    assert batch["bboxes"].min() >= 0 and batch["bboxes"].max() <= 1
    # normalised cxcywh ↔ the per-image pixel targets
    t0 = batch["targets"][0]
    b0 = batch["bboxes"][: len(t0)] * IMGSZ
    np.testing.assert_allclose(b0[:, 0].numpy(), (t0.boxes[:, 0] + t0.boxes[:, 2]) / 2, atol=1e-4)
    assert ("keypoints" in batch) == (task == "pose")
    assert ("rboxes" in batch) == (task == "obb")
    assert ("masks" in batch) == (task == "segment")
    if task == "pose":
        assert batch["keypoints"].shape == (n, 5, 3)
        vis = batch["keypoints"][..., 2] > 0
        assert (batch["keypoints"][..., :2][vis] <= 1).all()
    if task == "obb":
        assert batch["rboxes"].shape == (n, 5)
    if task == "segment":  # overlap_mask (default): one index map per image, values 1..n_i
        assert batch["masks"].shape == (4, IMGSZ // 4, IMGSZ // 4)
        assert batch["sem_masks"].shape == (4, IMGSZ // 4, IMGSZ // 4)
        assert len(batch["segments"]) == n
        for i, t in enumerate(batch["targets"]):
            assert int(batch["masks"][i].max()) <= len(t)
    meta = batch["meta"][0]
    assert {"image_id", "path", "orig_size", "letterbox"} <= set(meta)
    assert (meta["letterbox"] is None) == augment


def test_eval_letterbox_maps_back_to_original_pixels(datasets: dict[str, Path]) -> None:
    from lucid_core.geometry.letterbox import scale_boxes_back

    ds = DetectionDataset(datasets["detect"], imgsz=IMGSZ, augment=False)
    sample = ds[0]
    info = sample["meta"]["letterbox"]
    assert info.orig_hw == (48, 48) and info.input_hw == (IMGSZ, IMGSZ)
    back = scale_boxes_back(torch.from_numpy(sample["targets"].boxes), info).numpy()
    np.testing.assert_allclose(back, ds.records[0].targets.boxes, atol=1e-3)


def test_truncated_jpeg_is_excluded_reported_once_and_iteration_goes_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    yaml_path = synthesize("detect", tmp_path / "d", n_train=6, n_val=1, imgsz=48, seed=1)
    bad = tmp_path / "d" / "images" / "train" / "train_000002.jpg"
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    with caplog.at_level(logging.WARNING, logger="lucid_data.dataset"):
        ds = DetectionDataset(yaml_path, imgsz=IMGSZ, augment=True)
    assert [e.path.name for e in ds.excluded] == ["train_000002.jpg"]
    assert "truncated JPEG" in ds.excluded[0].reason
    warnings = [r for r in caplog.records if "excluded" in r.getMessage()]
    assert len(warnings) == 1 and "train_000002.jpg" in warnings[0].getMessage()
    assert len(ds) == 5
    batches = list(DataLoader(ds, batch_size=2, collate_fn=collate))
    assert sum(b["images"].shape[0] for b in batches) == 5


def test_image_corrupted_after_listing_is_replaced_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    yaml_path = synthesize("detect", tmp_path / "d", n_train=4, n_val=1, imgsz=48, seed=2)
    ds = DetectionDataset(yaml_path, imgsz=IMGSZ, augment=False)
    ds.records[1].path.write_bytes(b"")  # broken after the dataset was built
    with caplog.at_level(logging.WARNING, logger="lucid_data.dataset"):
        first = ds[1]
        second = ds[1]
    assert first["meta"]["index"] == second["meta"]["index"] == 2
    assert [e.path for e in ds.excluded] == [ds.records[1].path]
    assert sum("excluded corrupt image" in r.getMessage() for r in caplog.records) == 1


def test_close_mosaic_switches_for_the_last_epochs(datasets: dict[str, Path]) -> None:
    ds = DetectionDataset(
        datasets["detect"], imgsz=IMGSZ, augment=True, augment_config=AugmentConfig(close_mosaic=2)
    )
    ds.set_epoch(7, epochs=10)
    assert ds.mosaic_enabled
    ds.set_epoch(8, epochs=10)
    assert not ds.mosaic_enabled
    ds2 = DetectionDataset(datasets["detect"], imgsz=IMGSZ, augment=True)
    ds2.close_mosaic()
    assert not ds2.mosaic_enabled


def test_bad_arguments_are_named(datasets: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="cache"):
        DetectionDataset(datasets["detect"], cache="disk")  # type: ignore[arg-type]
    ds = DetectionDataset(datasets["detect"], imgsz=IMGSZ)
    with pytest.raises(IndexError, match="out of range"):
        ds[len(ds)]


def test_crowd_instances_are_not_training_targets(datasets: dict[str, Path]) -> None:
    from lucid_data import load_dataset

    source = load_dataset(datasets["detect"], "train")
    for record in source.records:
        record.targets.iscrowd = np.ones(len(record.targets), dtype=bool)
    train = DetectionDataset(source, imgsz=IMGSZ, augment=True)
    assert all(len(train[i]["targets"]) == 0 for i in range(len(train)))
    val = DetectionDataset(source, imgsz=IMGSZ, augment=False)
    assert len(val[0]["targets"]) == len(source.records[0].targets) and val[0]["targets"].iscrowd.all()


@pytest.mark.shared
@pytest.mark.parametrize(
    "folder,yaml_name",
    [("coco8-seg", "coco8-seg.yaml"), ("coco8-pose", "coco8-pose.yaml"), ("dota8", "dota8.yaml")],
)
def test_real_samples_augment_inside_the_canvas(shared_dir: Path, folder: str, yaml_name: str) -> None:
    ds = DetectionDataset(shared_dir / "data" / folder / yaml_name, imgsz=320, augment=True, seed=11)
    batch = collate([ds[i] for i in range(len(ds))])
    assert batch["images"].shape == (len(ds), 3, 320, 320)
    xyxy = torch.cat(
        [
            batch["bboxes"][:, :2] - batch["bboxes"][:, 2:] / 2,
            batch["bboxes"][:, :2] + batch["bboxes"][:, 2:] / 2,
        ],
        1,
    )
    assert xyxy.min() >= -1e-5 and xyxy.max() <= 1 + 1e-5
    if "keypoints" in batch:
        vis = batch["keypoints"][..., 2] > 0
        assert (batch["keypoints"][..., :2][vis] >= 0).all() and (batch["keypoints"][..., :2][vis] <= 1).all()
    for seg in batch.get("segments", []):
        assert seg.min() >= -1e-5 and seg.max() <= 1 + 1e-5
