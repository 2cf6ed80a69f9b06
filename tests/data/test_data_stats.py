"""Dataset statistics: per-class counts, normalised boxes, instances per image; `lucid-data stats` / `check`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lucid_data.cli import main
from lucid_data.readers import load_dataset
from lucid_data.stats import LABELS_NPZ, label_statistics


def _dataset(root: Path) -> Path:
    for split in ("train",):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
    for name, lines in {
        "a": "0 0.5 0.5 0.5 0.25\n1 0.25 0.75 0.1 0.2\n0 0.1 0.1 0.2 0.2\n",
        "b": "",
        "c": "1 0.5 0.5 1 1\n",
    }.items():
        Image.fromarray(np.zeros((20, 40, 3), np.uint8)).save(root / "images/train" / f"{name}.png")
        (root / "labels/train" / f"{name}.txt").write_text(lines)
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nval: images/train\nnames: [x, y, z]\n")
    return root / "data.yaml"


def test_statistics_count_classes_images_and_normalised_boxes(tmp_path: Path) -> None:
    stats = label_statistics(load_dataset(_dataset(tmp_path), "train"))
    assert stats.class_counts.tolist() == [2, 2, 0]
    assert stats.images_per_class.tolist() == [1, 2, 0]
    assert sorted(stats.instances_per_image.tolist()) == [0, 1, 3]
    np.testing.assert_allclose(sorted(stats.boxes[:, 2].tolist()), [0.1, 0.2, 0.5, 1.0], atol=1e-6)
    summary = stats.summary()
    assert summary["images"] == 3 and summary["instances"] == 4 and summary["images_without_instances"] == 1


def test_stats_command_writes_the_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _dataset(tmp_path / "d")
    assert main(["stats", str(data), "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "3 images, 4 instances" in out and "1 class(es) without instances" in out
    saved = json.loads((tmp_path / "out/stats.json").read_text())
    assert [c["instances"] for c in saved["classes"]] == [2, 2, 0]
    assert (tmp_path / "out/per_class.csv").read_text().splitlines()[1] == "0,x,1,2"
    with np.load(tmp_path / "out" / LABELS_NPZ) as arrays:
        assert arrays["classes"].tolist() == label_statistics(load_dataset(data, "train")).classes.tolist()


def test_check_prints_instances_per_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(_dataset(tmp_path)), "--split", "train"]) == 0
    assert "instances per class: x 2, y 2; 1 class(es) without instances" in capsys.readouterr().out


def test_lucid_viz_draws_labels_png_from_the_stats_folder(tmp_path: Path) -> None:
    viz = pytest.importorskip("lucid_viz.cli")
    from matplotlib.image import imread

    assert main(["stats", str(_dataset(tmp_path / "d")), "--output", str(tmp_path / "out")]) == 0
    assert viz.main(["labels", str(tmp_path / "out")]) == 0
    pixels = imread(tmp_path / "out" / "labels.png")[..., :3]
    assert pixels.shape[0] > 200 and (pixels < 0.95).any(axis=-1).mean() > 0.01
