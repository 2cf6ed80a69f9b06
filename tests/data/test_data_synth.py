"""Synthetic shapes: YOLO layout read back by the readers, exact annotations, seeded determinism."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from lucid_data import load_dataset, load_image
from lucid_data.synth import FLIP_IDX, SHAPE_KINDS, synthesize


@pytest.mark.parametrize("task", ["detect", "segment", "pose", "obb"])
def test_synth_reads_back_with_exact_annotations(tmp_path: Path, task: str) -> None:
    yaml_path = synthesize(task, tmp_path / task, n_train=12, n_val=3, imgsz=96, num_classes=4, seed=5)
    data = yaml.safe_load(yaml_path.read_text())
    assert data["names"] == {i: SHAPE_KINDS[i] for i in range(4)}
    train = load_dataset(yaml_path, "train")
    val = load_dataset(yaml_path, "val")
    assert train.task == task and len(train) == 12 and len(val) == 3
    counts = [len(r.targets) for r in train.records]
    assert min(counts) >= 1 and max(counts) <= 4
    for record in train.records:
        t = record.targets
        assert record.size_hw == (96, 96)
        assert load_image(record.path).shape == (96, 96, 3)
        assert (t.boxes >= 0).all() and (t.boxes <= 96).all()
        side = np.maximum(t.boxes[:, 2] - t.boxes[:, 0], t.boxes[:, 3] - t.boxes[:, 1])
        assert (side >= 0.15 * 96 * 0.5).all()  # large objects (rotated shapes keep ≥ half their side)
        assert set(t.labels.tolist()) <= set(range(4))
        if task == "segment":
            for box, poly in zip(t.boxes, t.polygons):
                np.testing.assert_allclose([*poly.min(0), *poly.max(0)], box, atol=1e-3)
        if task == "pose":
            assert train.kpt_shape == (5, 3) and train.flip_idx == FLIP_IDX
            k = t.keypoints
            assert (k[..., 2] == 2).all()
            inside = (k[..., 0] >= t.boxes[:, None, 0] - 1e-3) & (k[..., 0] <= t.boxes[:, None, 2] + 1e-3)
            assert inside.all()
            # keypoint 0 is the leftmost point, 1 the rightmost (so flip_idx swaps them)
            np.testing.assert_allclose(k[:, 0, 0], t.boxes[:, 0], atol=1e-3)
            np.testing.assert_allclose(k[:, 1, 0], t.boxes[:, 2], atol=1e-3)
        if task == "obb":
            r = t.rboxes
            # canonical form of the reference (fixture README, label convention): w > h, θ ∈ [−π/4, 3π/4)
            assert ((r[:, 4] >= -math.pi / 4 - 1e-6) & (r[:, 4] < 3 * math.pi / 4)).all()
            assert (r[:, 3] <= 0.76 * r[:, 2]).all()  # squashed shapes: never a square (direction visible)
            assert ((r[:, :2] > 0) & (r[:, :2] < 96)).all()


def test_synth_boxes_match_drawn_pixels(tmp_path: Path) -> None:
    yaml_path = synthesize(
        "detect",
        tmp_path / "d",
        n_train=4,
        n_val=0,
        imgsz=96,
        seed=1,
        noise=0,
        image_format="png",
        max_objects=1,
    )
    for record in load_dataset(yaml_path, "train").records:
        assert record.path.suffix == ".png"
        image = load_image(record.path).astype(int)
        x1, y1, x2, y2 = record.targets.boxes[0]
        # the shape's colour is saturated; the background is not: the most saturated pixels lie in the box
        sat = image.max(-1) - image.min(-1)
        ys, xs = np.nonzero(sat > sat.max() * 0.8)
        assert xs.min() >= x1 - 1 and xs.max() <= x2 + 1 and ys.min() >= y1 - 1 and ys.max() <= y2 + 1


def test_synth_is_seeded(tmp_path: Path) -> None:
    def files(seed: int, name: str) -> dict[str, bytes]:
        root = synthesize("segment", tmp_path / name, n_train=3, n_val=1, imgsz=64, seed=seed).parent
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    a, b, c = files(0, "a"), files(0, "b"), files(1, "c")
    assert a == b
    assert a.keys() == c.keys() and a != c


def test_synth_rejects_bad_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="task"):
        synthesize("no-such-task", tmp_path)
    with pytest.raises(ValueError, match="num_classes"):
        synthesize("detect", tmp_path, num_classes=99)
    with pytest.raises(TypeError, match="colour"):
        synthesize("detect", tmp_path, colour=1)
