"""Pose data (issue 16): `kpt_sigmas` from the data YAML (validated, exposed for loss and metric), flip_idx rules,
keypoints that follow mosaic / affine / letterbox / flips exactly on the pixels (coloured markers), visibility
flags kept, out-of-canvas keypoints invisible, OKS unchanged by a flip, and a synthetic pose dataset feeding the
pose objective of real YOLO11 / YOLO26 models."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from lucid_data.augment import AugmentConfig
from lucid_data.augment.flip import flip_horizontal
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.readers import load_dataset
from lucid_data.targets import Targets

# Keypoint i has colour PALETTE[i] on the images; FLIP swaps 1 <-> 2 and 3 <-> 4 (0 has no side).
PALETTE = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [255, 0, 255]], np.uint8)
FLIP = [0, 2, 1, 4, 3]
FLAGS = [2, 1, 2, 2, 1]  # labelled visibility flag of keypoint i (0 = unlabelled is tested separately)
BACKGROUND = 40
RADIUS = 5
SIZE = 96


def _write_pose_dataset(root: Path, yaml_extra: str = "", n_images: int = 4, flip: bool = True) -> Path:
    """Images with one person each whose 5 keypoints are coloured discs; labels normalised (x y v)."""
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(n_images):
            image = np.full((SIZE, SIZE + 16, 3), BACKGROUND, np.uint8)  # not square: letterbox pads
            h, w = image.shape[:2]
            cx, cy = rng.uniform(36, w - 36), rng.uniform(36, h - 36)
            points = np.array(
                [[cx, cy], [cx - 22, cy - 8], [cx + 22, cy - 8], [cx - 14, cy + 20], [cx + 14, cy + 20]]
            )
            points = np.round(points) + 0.5  # pixel centres: mirrored exactly onto pixel centres
            for k, (x, y) in enumerate(points):
                cv2.circle(image, (int(x), int(y)), RADIUS, tuple(int(c) for c in PALETTE[k][::-1]), -1)
            cv2.imwrite(str(root / "images" / split / f"{i:03d}.png"), image)
            x1, y1 = points.min(0) - RADIUS
            x2, y2 = points.max(0) + RADIUS
            box = [(x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h]
            kpts = [v for k, (x, y) in enumerate(points) for v in (x / w, y / h, FLAGS[k])]
            line = " ".join(f"{v:.6f}" for v in [0, *box, *kpts])
            (root / "labels" / split / f"{i:03d}.txt").write_text(line + "\n")
    flip_line = f"flip_idx: {FLIP}\n" if flip else ""
    text = (
        f"path: .\ntrain: images/train\nval: images/val\nnames: {{0: person}}\nkpt_shape: [5, 3]\n{flip_line}"
    )
    yaml_path = root / "data.yaml"
    yaml_path.write_text(text + yaml_extra)
    return yaml_path


def _marker_index(image_hwc: np.ndarray, x: float, y: float) -> int | None:
    """The keypoint whose colour is at (x, y) (nearest palette entry, None when it is background-like)."""
    col, row = int(np.floor(x)), int(np.floor(y))
    h, w = image_hwc.shape[:2]
    if not (0 <= row < h and 0 <= col < w):
        return None
    pixel = image_hwc[row, col].astype(np.float64)
    distances = np.abs(PALETTE.astype(np.float64) - pixel).sum(1)
    best = int(distances.argmin())
    return best if distances[best] < 120 else None


# ------------------------------------------------------------------------------------------- YAML sigmas
def test_kpt_sigmas_are_read_validated_and_exposed(tmp_path: Path) -> None:
    sigmas = [0.1, 0.2, 0.2, 0.3, 0.3]
    yaml_path = _write_pose_dataset(tmp_path / "a", f"kpt_sigmas: {sigmas}\n", n_images=1)
    source = load_dataset(yaml_path, "train")
    assert source.kpt_sigmas == sigmas and source.data_yaml == yaml_path
    dataset = DetectionDataset(yaml_path, imgsz=64, augment=False)
    assert dataset.kpt_sigmas == sigmas
    alias = _write_pose_dataset(tmp_path / "b", f"kpt_oks_sigmas: {sigmas}\n", n_images=1)
    assert load_dataset(alias, "train").kpt_sigmas == sigmas
    plain = _write_pose_dataset(tmp_path / "c", n_images=1)
    assert load_dataset(plain, "train").kpt_sigmas is None

    bad = {
        "kpt_sigmas: [0.1, 0.2]\n": "has 2 values for kpt_shape's 5 keypoints",
        "kpt_sigmas: [0.1, 0.2, 0.0, 0.3, 0.3]\n": "finite number > 0",
        "kpt_sigmas: [0.1, 0.2, -1, 0.3, 0.3]\n": "finite number > 0",
        "kpt_sigmas: [a, 0.2, 0.2, 0.3, 0.3]\n": "must be a list of 5 positive numbers",
        "kpt_sigmas: 0.1\n": "must be a list of 5 positive numbers",
        f"kpt_sigmas: {sigmas}\nkpt_oks_sigmas: [1, 1, 1, 1, 1]\n": "disagree",
    }
    for i, (extra, message) in enumerate(bad.items()):
        path = _write_pose_dataset(tmp_path / f"bad{i}", extra, n_images=1)
        with pytest.raises(ValueError, match=message) as info:
            load_dataset(path, "train")
        assert str(path) in str(info.value) and "sigmas" in str(info.value)
    detect = tmp_path / "detect.yaml"
    detect.write_text("path: .\ntrain: images\nnames: [a]\nkpt_sigmas: [0.1]\n")
    (tmp_path / "images").mkdir()
    with pytest.raises(ValueError, match="no `kpt_shape`"):
        load_dataset(detect, "train")


def test_pose_sigmas_reach_the_objective_and_defaults_follow_the_readme(tmp_path: Path) -> None:
    from lucid_core.loss.terms.pose import resolve_keypoint_sigmas

    yaml_path = _write_pose_dataset(tmp_path, "kpt_sigmas: [0.1, 0.2, 0.2, 0.3, 0.3]\n", n_images=1)
    dataset = DetectionDataset(yaml_path, imgsz=64, augment=False)
    assert resolve_keypoint_sigmas(dataset.kpt_shape, dataset.kpt_sigmas).tolist() == pytest.approx(
        [0.1, 0.2, 0.2, 0.3, 0.3]
    )
    assert torch.equal(resolve_keypoint_sigmas((5, 3), None), torch.full((5,), 0.2))


# ------------------------------------------------------------------------------------------------ flip_idx
def test_pose_without_flip_idx_and_fliplr_is_an_error_naming_the_yaml(tmp_path: Path) -> None:
    yaml_path = _write_pose_dataset(tmp_path, n_images=1, flip=False)
    with pytest.raises(ValueError, match="without `flip_idx`") as info:
        DetectionDataset(yaml_path, imgsz=64, augment=True, augment_config=AugmentConfig(fliplr=0.5))
    assert str(yaml_path) in str(info.value) and "fliplr=0.5" in str(info.value)
    DetectionDataset(yaml_path, imgsz=64, augment=True, augment_config=AugmentConfig(fliplr=0.0))
    DetectionDataset(yaml_path, imgsz=64, augment=False)


def test_flip_swaps_left_and_right_by_flip_idx_and_keeps_the_oks() -> None:
    """Acceptance: a flipped image's keypoint i sits on the marker of keypoint flip_idx[i]; OKS is unchanged."""
    from lucid_core.assign.keypoint_aware import KeypointAwareAssigner
    from lucid_core.loss.terms.pose import default_keypoint_sigmas

    image = np.full((SIZE, SIZE + 16, 3), BACKGROUND, np.uint8)
    points = np.array([[50.5, 40.5], [28.5, 32.5], [72.5, 32.5], [36.5, 60.5], [64.5, 60.5]])
    for k, (x, y) in enumerate(points):
        cv2.circle(image, (int(x), int(y)), RADIUS, tuple(int(c) for c in PALETTE[k]), -1)
    labels = Targets(
        boxes=[[20, 25, 80, 68]],
        labels=[0],
        keypoints=np.concatenate((points, np.array(FLAGS, np.float64)[:, None]), 1)[None],
    )
    flipped_image, flipped = flip_horizontal(image, labels, FLIP)
    assert flipped.keypoints is not None
    for i, (x, y, v) in enumerate(flipped.keypoints[0]):
        assert _marker_index(flipped_image, x, y) == FLIP[i], i
        assert v == FLAGS[FLIP[i]]  # the flag travels with its point
    np.testing.assert_allclose(flipped.keypoints[0, 1, :2], [image.shape[1] - 72.5, 32.5])

    # a prediction near the labels, flipped the same way: the OKS (metric and assigner) is unchanged
    rng = np.random.default_rng(1)
    pred = labels.copy()
    assert pred.keypoints is not None
    pred.keypoints[..., :2] += rng.normal(0, 2.0, size=(1, 5, 2))
    _, pred_flipped = flip_horizontal(image, pred, FLIP)
    sigmas = np.array([0.026, 0.025, 0.025, 0.035, 0.035])  # symmetric under FLIP (like COCO's)

    def oks_metric(p: Targets, g: Targets) -> float:
        from lucid_train.eval.vectorized import _oks

        assert p.keypoints is not None and g.keypoints is not None
        box = g.boxes[0]
        xywh = np.array([box[0], box[1], box[2] - box[0], box[3] - box[1]])
        return float(
            _oks(p.keypoints[0].reshape(1, -1), g.keypoints[0].reshape(-1), xywh, xywh[2] * xywh[3], sigmas)[
                0
            ]
        )

    def oks_assigner(p: Targets, g: Targets) -> float:
        assigner = KeypointAwareAssigner(
            torch.tensor(sigmas, dtype=torch.float32), (8, 16, 32), num_classes=1
        )
        assert p.keypoints is not None and g.keypoints is not None
        extras = {
            "pred_kpts_px": torch.tensor(p.keypoints[None, :, :, :2], dtype=torch.float32),
            "gt_kpts_px": torch.tensor(g.keypoints[None], dtype=torch.float32),
        }
        boxes = torch.tensor(g.boxes[None], dtype=torch.float32)
        return float(
            assigner.keypoint_similarity(boxes, extras, torch.ones(1, 1, 1, dtype=torch.bool))[0, 0, 0]
        )

    for oks in (oks_metric, oks_assigner):
        before, after = oks(pred, labels), oks(pred_flipped, flipped)
        assert 0.05 < before < 0.999
        assert after == pytest.approx(before, rel=1e-6, abs=1e-9), oks.__name__
    assert torch.equal(default_keypoint_sigmas((17, 3))[1::2][:8], default_keypoint_sigmas((17, 3))[2::2][:8])


# -------------------------------------------------------------------------------- geometry on the pixels
@pytest.mark.parametrize(("fliplr", "expected"), [(0.0, list(range(5))), (1.0, FLIP)])
def test_keypoints_follow_mosaic_affine_and_letterbox_on_the_pixels(
    tmp_path: Path, fliplr: float, expected: list[int]
) -> None:
    """Every visible keypoint of an augmented sample lies on its own marker (mosaic, rotation, scale, translate,
    letterbox, flip) with its flag; keypoints that left the canvas are invisible (v = 0, x = y = 0)."""
    yaml_path = _write_pose_dataset(tmp_path, n_images=4)
    config = AugmentConfig(
        mosaic=1.0, degrees=15, translate=0.2, scale=0.3, fliplr=fliplr, hsv_h=0, hsv_s=0, hsv_v=0
    )
    dataset = DetectionDataset(yaml_path, imgsz=128, augment=True, augment_config=config, seed=1)
    visible = invisible = 0
    for index in range(len(dataset)):
        sample = dataset[index]
        image = sample["image"].numpy().transpose(1, 2, 0)
        kpts = sample["targets"].keypoints
        assert kpts is not None and kpts.shape[1:] == (5, 3)
        for person in kpts:
            for i, (x, y, v) in enumerate(person):
                if v == 0:
                    assert x == 0 and y == 0
                    invisible += 1
                    continue
                assert 0 <= x <= image.shape[1] and 0 <= y <= image.shape[0]
                assert _marker_index(image, x, y) == expected[i], (index, i, x, y)
                assert v == FLAGS[expected[i]]
                visible += 1
    assert visible >= 20


def test_evaluation_letterbox_moves_keypoints_with_the_image(tmp_path: Path) -> None:
    yaml_path = _write_pose_dataset(tmp_path, n_images=2)
    dataset = DetectionDataset(yaml_path, imgsz=160, augment=False)
    for index in range(len(dataset)):
        sample = dataset[index]
        image = sample["image"].numpy().transpose(1, 2, 0)
        kpts = sample["targets"].keypoints
        assert kpts is not None
        for i, (x, y, v) in enumerate(kpts[0]):
            assert v == FLAGS[i] and _marker_index(image, x, y) == i


def test_unlabelled_keypoints_stay_unlabelled_through_augmentation(tmp_path: Path) -> None:
    root = tmp_path / "u"
    yaml_path = _write_pose_dataset(root, n_images=2)
    for label in (root / "labels" / "train").glob("*.txt"):
        values = label.read_text().split()
        values[5 + 3 * 2 + 2] = "0"  # keypoint 2 not labelled
        label.write_text(" ".join(values) + "\n")
    dataset = DetectionDataset(
        yaml_path, imgsz=96, augment=True, augment_config=AugmentConfig(fliplr=1.0), seed=2
    )
    for index in range(len(dataset)):
        kpts = dataset[index]["targets"].keypoints
        assert kpts is not None
        # after the flip the unlabelled keypoint 2 sits in slot FLIP.index(2) = 1
        assert bool((kpts[:, 1, 2] == 0).all())
        assert set(np.unique(kpts[..., 2]).tolist()) <= {0.0, 1.0, 2.0}


# ------------------------------------------------------------------------------ synthetic pose -> objective
def test_synth_pose_cli_writes_a_pose_dataset(tmp_path: Path) -> None:
    import yaml

    from lucid_data.cli import main

    assert (
        main(
            [
                "synth",
                "--task",
                "pose",
                "--output",
                str(tmp_path),
                "--n-train",
                "2",
                "--n-val",
                "1",
                "--imgsz",
                "64",
            ]
        )
        == 0
    )
    raw = yaml.safe_load((tmp_path / "data.yaml").read_text())
    assert raw["kpt_shape"] == [5, 3] and sorted(raw["flip_idx"]) == list(range(5))
    dataset = DetectionDataset(tmp_path / "data.yaml", imgsz=64, augment=True)
    assert dataset.task == "pose" and dataset.flip_idx == raw["flip_idx"]


@pytest.mark.parametrize("family", ["yolo11", "yolo26"])
def test_synthetic_pose_batch_trains_yolo_pose_models(tmp_path: Path, family: str) -> None:
    """Smoke: a collated synthetic pose batch → build_objective(model, sigmas=dataset sigmas) → finite loss,
    finite gradients (YOLO26: the flow model is trained too)."""
    from lucid_core.models import build_model
    from lucid_core.tasks import build_objective
    from lucid_data.synth import synthesize

    yaml_path = synthesize("pose", tmp_path / "synth", n_train=4, n_val=1, imgsz=64, seed=0)
    dataset = DetectionDataset(yaml_path, imgsz=64, augment=True, seed=0)
    assert dataset.kpt_shape is not None
    batch = collate([dataset[i] for i in range(len(dataset))])
    assert batch["keypoints"].shape[1:] == (5, 3) and batch["keypoints"].shape[0] == batch["bboxes"].shape[0]
    torch.manual_seed(0)
    model = build_model(family, "pose", "n", len(dataset.names), kpt_shape=tuple(dataset.kpt_shape)).train()
    objective = build_objective(model, epochs=2, sigmas=dataset.kpt_sigmas)
    output = model(batch["images"].float() / 255)
    total, items = objective(output, batch)
    assert torch.isfinite(total) and bool(torch.isfinite(items).all())
    assert float(items[1]) > 0  # the pose term sees the labelled keypoints
    total.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    if family == "yolo26":
        assert objective.loss_names[-1] == "rle_loss"
        assert any(p.grad is not None and bool(p.grad.any()) for p in model.head.flow_model.parameters())


def test_eval_cli_scores_keypoints_with_the_loss_sigmas(tmp_path: Path) -> None:
    """lucid-eval uses the same OKS sigmas as the pose loss: the dataset's, else COCO's (17, 3), else 1/K."""
    from types import SimpleNamespace

    from lucid_train.eval.cli import EvalInputError, _pose_kpt_sigmas

    pose = SimpleNamespace(task="pose", kpt_shape=(5, 3))
    own = SimpleNamespace(kpt_sigmas=[0.1, 0.2, 0.2, 0.3, 0.3], kpt_shape=(5, 3))
    assert _pose_kpt_sigmas(pose, own, tmp_path) == pytest.approx(own.kpt_sigmas)
    assert _pose_kpt_sigmas(pose, SimpleNamespace(kpt_sigmas=None), tmp_path) == pytest.approx([0.2] * 5)
    coco = _pose_kpt_sigmas(SimpleNamespace(task="pose", kpt_shape=(17, 3)), SimpleNamespace(), tmp_path)
    assert coco is not None and coco[0] == pytest.approx(0.026) and coco[-1] == pytest.approx(0.089)
    assert _pose_kpt_sigmas(SimpleNamespace(task="detect"), own, tmp_path) is None
    with pytest.raises(EvalInputError, match="--data"):
        _pose_kpt_sigmas(pose, SimpleNamespace(kpt_sigmas=[0.1, 0.2]), tmp_path)
