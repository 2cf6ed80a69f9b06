"""Classification data: the folder-per-class reader and its errors, the synthetic set, the transforms, samples and
batches (lucid_data.readers.folders, lucid_data.synth, lucid_data.augment.classify, DetectionDataset, collate)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from lucid_core.geometry.center_crop import center_crop
from lucid_data import DetectionDataset, collate, load_dataset
from lucid_data.augment.classify import (
    CROP_RATIO,
    classify_eval,
    classify_train,
    random_resized_crop_window,
)
from lucid_data.cli import check_dataset, main
from lucid_data.readers import FolderLayoutError
from lucid_data.readers.probe import detect_layout
from lucid_data.synth import SHAPE_KINDS, synthesize


def _image(path: Path, hw: tuple[int, int] = (24, 32), value: int = 100) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = np.full((*hw, 3), value, np.uint8)
    image[: hw[0] // 2] = 255 - value
    assert cv2.imwrite(str(path), image)
    return path


def _folders(root: Path, layout: dict[str, dict[str, int]]) -> Path:
    """``{split: {class: image count}}`` as a folder-per-class dataset of small PNGs."""
    for split, classes in layout.items():
        for name, count in classes.items():
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(count):
                _image(root / split / name / f"img{i}.png", value=40 * (i + 1))
    return root


def test_the_reader_takes_sorted_folder_names_as_classes(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"train": {"dog": 2, "cat": 3}, "val": {"cat": 1, "dog": 1}})
    assert detect_layout(root) == ("folders", root)
    train = load_dataset(root, "train")
    assert train.task == "classify" and train.names == {0: "cat", 1: "dog"}
    assert [int(r.targets.labels[0]) for r in train.records] == [0, 0, 0, 1, 1]
    assert [r.image_id for r in train.records][:2] == ["cat/img0.png", "cat/img1.png"]
    record = train.records[0]
    assert record.size_hw == (24, 32) and record.targets.boxes.tolist() == [[0, 0, 32, 24]]
    val = load_dataset(root, "val", "classify")
    assert len(val) == 2 and val.names == train.names


def test_val_falls_back_to_test_and_a_missing_split_names_the_folder(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"train": {"a": 1, "b": 1}, "test": {"a": 2, "b": 1}})
    assert len(load_dataset(root, "val")) == 3
    assert load_dataset(root, "test").split == "test"
    with pytest.raises(FileNotFoundError, match="extra"):
        load_dataset(root, "extra")


def test_an_empty_class_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"train": {"a": 1, "b": 1}})
    (root / "train" / "c").mkdir()
    with pytest.raises(FolderLayoutError, match=r"train/c: empty class folder"):
        load_dataset(root, "train")


def test_an_image_in_the_split_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"train": {"a": 1, "b": 1}})
    _image(root / "train" / "stray.png")
    with pytest.raises(FolderLayoutError, match=r"stray\.png: an image directly in the split folder"):
        load_dataset(root, "train")


def test_classes_that_differ_between_splits_are_an_error(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"train": {"a": 1, "b": 1}, "val": {"a": 1, "c": 1}})
    with pytest.raises(FolderLayoutError, match=r"missing \['b'\]; extra \['c'\]"):
        load_dataset(root, "val")


def test_the_layout_and_the_task_must_agree(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"train": {"a": 1, "b": 1}})
    with pytest.raises(ValueError, match="folder-per-class"):
        load_dataset(root, "train", "detect")
    detect_yaml = synthesize("detect", tmp_path / "det", n_train=2, n_val=1, imgsz=64)
    with pytest.raises(ValueError, match="reads the folder-per-class layout"):
        load_dataset(detect_yaml, "train", "classify")


def test_check_counts_images_per_class_and_lists_every_split(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"train": {"a": 2, "b": 1}, "test": {"a": 1, "b": 1}})
    check = check_dataset(root)
    assert check.ok and check.images == 5
    assert f"{root} [train]: images per class: a 2, b 1" in check.lines
    assert any(line.startswith(f"{root} [test]:") for line in check.lines)
    (root / "train" / "c").mkdir()
    assert main(["check", str(root)]) == 2


def test_synth_classify_writes_balanced_class_folders(tmp_path: Path) -> None:
    root = synthesize("classify", tmp_path / "a", n_train=7, n_val=3, imgsz=48, seed=3)
    assert root == (tmp_path / "a").resolve()
    assert sorted(p.name for p in (root / "train").iterdir()) == list(SHAPE_KINDS[:3])
    counts = {p.name: len(list(p.iterdir())) for p in (root / "train").iterdir()}
    assert counts == {"circle": 3, "square": 2, "triangle": 2}
    source = load_dataset(root, "val")
    assert [int(r.targets.labels[0]) for r in source.records] == [0, 1, 2]
    again = synthesize("classify", tmp_path / "b", n_train=7, n_val=3, imgsz=48, seed=3)
    other = synthesize("classify", tmp_path / "c", n_train=7, n_val=3, imgsz=48, seed=4)

    def files(base: Path) -> dict[str, bytes]:
        return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*.jpg"))}

    assert files(root) == files(again) and files(root) != files(other)
    with pytest.raises(ValueError, match="max_objects must be 1"):
        synthesize("classify", tmp_path / "d", n_train=1, n_val=0, max_objects=3)


def test_synth_class_folders_keep_the_class_order_when_names_do_not_sort(tmp_path: Path) -> None:
    root = synthesize("classify", tmp_path / "s", n_train=4, n_val=4, imgsz=40, num_classes=4)
    names = load_dataset(root, "train").names
    assert [names[i].split("_", 1)[1] for i in range(4)] == list(SHAPE_KINDS[:4])


def test_the_eval_transform_is_the_predict_centre_crop() -> None:
    image = np.random.default_rng(0).integers(0, 255, (50, 80, 3), dtype=np.uint8)
    crop, info = classify_eval(image, 32)
    expected, expected_info = center_crop(image, 32)
    assert crop.shape == (32, 32, 3) and info == expected_info
    assert torch.equal(torch.from_numpy(crop).permute(2, 0, 1), expected)
    assert info.new_unpad_wh == (51, 32) and info.left == -10  # shorter side 50 -> 32, centred window


def test_the_random_crop_is_seeded_and_inside_the_image() -> None:
    windows = [random_resized_crop_window((60, 90), np.random.default_rng(s)) for s in range(40)]
    for top, left, h, w in windows:
        assert top >= 0 and top + h <= 60 and left >= 0 and left + w <= 90
        assert CROP_RATIO[0] - 0.05 <= w / h <= CROP_RATIO[1] + 0.05
    assert len(set(windows)) > 30
    assert random_resized_crop_window((60, 90), np.random.default_rng(7)) == windows[7]
    image = np.random.default_rng(1).integers(0, 255, (60, 90, 3), dtype=np.uint8)
    a = classify_train(image, 40, np.random.default_rng(5))
    b = classify_train(image, 40, np.random.default_rng(5))
    assert a.shape == (40, 40, 3) and a.dtype == np.uint8 and np.array_equal(a, b)
    with pytest.raises(ValueError, match="scale"):
        random_resized_crop_window((10, 10), np.random.default_rng(0), scale=(0.5, 1.5))


def test_samples_and_batches_carry_one_class_per_image(tmp_path: Path) -> None:
    root = synthesize("classify", tmp_path / "s", n_train=6, n_val=4, imgsz=48)
    train = DetectionDataset(load_dataset(root, "train"), imgsz=32, augment=True, seed=1)
    sample = train[4]  # records are listed class by class: circle 0, 3; square 1, 4; triangle 2, 5
    assert sample["image"].shape == (3, 32, 32) and sample["label"] == 2
    assert torch.equal(train[4]["image"], sample["image"])  # a function of (seed, epoch, index, rank)
    batch = collate([train[i] for i in range(4)])
    assert batch["images"].dtype == torch.uint8 and batch["images"].shape == (4, 3, 32, 32)
    assert batch["cls"].dtype == torch.int64 and batch["cls"].tolist() == [0, 0, 1, 1]
    val = DetectionDataset(load_dataset(root, "val"), imgsz=32, augment=False)
    batches = val.use_rect_batches(3)
    assert batches.batches == ((0, 1, 2), (3,)) and set(batches.shapes) == {(32, 32)}
    item = val[2]  # circle 0, 1; square 2; triangle 3
    assert item["meta"]["letterbox"].input_hw == (32, 32) and item["targets"].labels.tolist() == [1]
