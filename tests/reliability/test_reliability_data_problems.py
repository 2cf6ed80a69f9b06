"""Data problems in fit are reported, not swallowed (issue 13).

A split without one labelled instance (a missing ``labels/`` folder, empty label files) is an error unless
``allow_empty``; images fit leaves out are listed in ``excluded.txt`` and counted in the summary line; a UTF-8 BOM
in a label file is accepted; ``lucid-data check`` fails a split without instances.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from lucid_train_testing import make_shapes, tiny_data, tiny_module, tiny_trainer


@pytest.fixture
def shapes_yaml(tmp_path: Path) -> Path:
    return make_shapes(tmp_path / "shapes", n_train=4, n_val=2)


def _labels(yaml_path: Path, split: str) -> Path:
    return yaml_path.parent / "labels" / split


def test_a_bom_in_a_label_file_is_accepted(shapes_yaml: Path) -> None:
    from lucid_data import load_dataset

    label = sorted(_labels(shapes_yaml, "train").glob("*.txt"))[0]
    before = len(load_dataset(shapes_yaml, split="train").records[0].targets)
    label.write_bytes(b"\xef\xbb\xbf" + label.read_bytes())
    source = load_dataset(shapes_yaml, split="train")  # strict: a bad line would raise LabelError
    assert len(source.records[0].targets) == before and not source.problems


@pytest.mark.parametrize("damage", ["missing labels folder", "empty label files"])
def test_a_split_without_instances_is_an_error_unless_allowed(
    damage: str, shapes_yaml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lucid_data.cli import main as data_main
    from lucid_train.errors import TrainingSetupError

    labels = _labels(shapes_yaml, "val")
    if damage == "missing labels folder":
        shutil.rmtree(labels)
    else:
        for label in labels.glob("*.txt"):
            label.write_text("")
    with pytest.raises(TrainingSetupError, match="no labelled instance") as info:
        tiny_data(shapes_yaml)
    assert "'val'" in str(info.value) and "--data.allow_empty" in str(info.value)
    if damage == "missing labels folder":
        assert str(labels) in str(info.value)
    assert tiny_data(shapes_yaml, allow_empty=True).num_classes >= 1

    assert data_main(["check", str(shapes_yaml), "--no-images"]) == 1
    out = capsys.readouterr().out
    assert "no labelled instance" in out and "FAILED" in out


def test_fit_lists_excluded_images_and_its_checkpoints_load_weights_only(
    shapes_yaml: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images, labels = shapes_yaml.parent / "images" / "train", _labels(shapes_yaml, "train")
    template = sorted(labels.glob("*.txt"))[0].read_text()
    bad = {"empty.jpg": b"", "html.jpg": b"<!DOCTYPE html><html><body>404</body></html>"}
    for name, content in bad.items():
        (images / name).write_bytes(content)
        (labels / name.replace(".jpg", ".txt")).write_text(template)
    data = tiny_data(shapes_yaml, batch_size=2)
    run = tmp_path / "run"
    tiny_trainer(run).fit(tiny_module(data), datamodule=data)

    listed = (run / "excluded.txt").read_text().splitlines()
    assert sorted(Path(line.split(": ", 1)[0]).name for line in listed) == sorted(bad)
    summary = (run / "summary.txt").read_text()
    assert f"{len(bad)} image(s) excluded (excluded.txt)" in summary
    for name in ("last.ckpt", "best.ckpt"):  # allow-listable: Lightning resumes them with weights_only=True
        loaded = torch.load(run / name, map_location="cpu", weights_only=True)
        assert "state_dict" in loaded
