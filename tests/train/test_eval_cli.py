"""``lucid-eval``: the report (fields, hash, atomic write) equals `evaluate_model`; bad inputs fail before inference."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from lucid_core.checkpoint import load, save_model
from lucid_core.models import build_model
from lucid_train.eval import evaluate_model, runner
from lucid_train.eval.cli import main

pytestmark = pytest.mark.shared

IMGSZ = 64  # tiny input: the test checks plumbing, not accuracy


@pytest.fixture(scope="module")
def coco8_names(shared_dir: Path) -> list[str]:
    names = yaml.safe_load((shared_dir / "data" / "coco8" / "coco8.yaml").read_text())["names"]
    return [names[i] for i in range(len(names))]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, coco8_names: list[str]) -> Path:
    torch.manual_seed(0)
    model = build_model(family="yolo26", task="detect", scale="n", num_classes=len(coco8_names))
    path = tmp_path_factory.mktemp("ckpt") / "y26"
    save_model(model, path, names=coco8_names, imgsz=IMGSZ)
    return path


def test_report_fields_and_scores_equal_evaluate_model(
    shared_dir: Path, checkpoint: Path, tmp_path: Path
) -> None:
    data = shared_dir / "data" / "coco8" / "coco8.yaml"
    out = tmp_path / "reports" / "report.json"
    rc = main(
        [
            "--weights",
            str(checkpoint),
            "--data",
            str(data),
            "--decode",
            "both",
            "--conf",
            "0.2",
            "--output",
            str(out),
        ]
    )
    assert rc == 0
    assert [p.name for p in out.parent.iterdir()] == ["report.json"]  # no temporary file left behind
    report = json.loads(out.read_text())
    weights = checkpoint.with_suffix(".safetensors")
    assert report["weights_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert report["num_images"] == len(list((shared_dir / "data" / "coco8" / "images" / "val").iterdir()))
    assert report["decode"] == "nms" and set(report["other_decodes"]) == {"topk"}
    assert report["imgsz"] == IMGSZ and report["versions"]["torch"] == torch.__version__.split("+")[0]
    bbox = report["iou_types"]["bbox"]
    assert len(bbox["stats"]) == 12 and len(bbox["per_class"]) == 80

    from lucid_data.readers import load_dataset

    result = evaluate_model(
        load(checkpoint).model, load_dataset(data, "val"), imgsz=IMGSZ, conf=0.2, decode="both"
    )
    assert report["mAP50-95"] == result.map50_95 and report["mAP50"] == result.map50
    assert [c["AP50-95"] for c in bbox["per_class"]] == list(result.per_type["bbox"].ap_per_class)
    assert report["other_decodes"]["topk"]["mAP50-95"] == result.other_decodes["topk"].map50_95


@pytest.fixture
def no_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("inference ran although the inputs are bad")

    monkeypatch.setattr(runner, "evaluate_model", fail)


def _run_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    return capsys.readouterr().err


@pytest.mark.usefixtures("no_inference")
def test_class_mismatch_fails_before_inference(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], coco8_names: list[str]
) -> None:
    data = str(shared_dir / "data" / "coco8" / "coco8.yaml")
    renamed = tmp_path / "renamed"
    save_model(
        build_model(family="yolov8", task="detect", scale="n", num_classes=80),
        renamed,
        names=["cat0", *coco8_names[1:]],
        imgsz=IMGSZ,
    )
    err = _run_error(
        ["--weights", str(renamed), "--data", data, "--output", str(tmp_path / "r.json")], capsys
    )
    assert "class 0 is 'cat0'" in err and repr(coco8_names[0]) in err
    three = tmp_path / "three"
    save_model(
        build_model(family="yolov8", task="detect", scale="n", num_classes=3), three, names=["a", "b", "c"]
    )
    err = _run_error(["--weights", str(three), "--data", data, "--output", str(tmp_path / "r.json")], capsys)
    assert "class count mismatch" in err and "3 classes" in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.usefixtures("no_inference")
def test_missing_image_and_unparsable_annotations_fail_before_inference(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "coco"
    shutil.copytree(shared_dir / "data" / "coco-mmpose", folder)
    ann = folder / "test_coco.json"
    raw = json.loads(ann.read_text())
    weights = tmp_path / "person"
    save_model(
        build_model(family="yolov8", task="detect", scale="n", num_classes=1), weights, names=["person"]
    )
    args = ["--weights", str(weights), "--data", str(ann), "--output", str(tmp_path / "r.json")]
    missing = folder / raw["images"][0]["file_name"]
    missing.unlink()
    err = _run_error(args, capsys)
    assert "missing" in err and missing.name in err
    ann.write_text(ann.read_text()[:-20])  # truncated JSON
    err = _run_error(args, capsys)
    assert "--data" in err and str(ann) in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.usefixtures("no_inference")
def test_bad_label_line_fails_before_inference(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], checkpoint: Path
) -> None:
    folder = tmp_path / "coco8"
    shutil.copytree(shared_dir / "data" / "coco8", folder)
    label = sorted((folder / "labels" / "val").glob("*.txt"))[0]
    label.write_text(label.read_text() + "0 0.5 0.5 oops\n")
    err = _run_error(
        [
            "--weights",
            str(checkpoint),
            "--data",
            str(folder / "coco8.yaml"),
            "--output",
            str(tmp_path / "r.json"),
        ],
        capsys,
    )
    assert label.name in err


@pytest.mark.shared
def test_lucid_eval_scores_a_reference_pt_as_its_converted_checkpoint(
    shared_dir: Path, tmp_path: Path
) -> None:
    """The report of `lucid-eval --weights X.pt` equals the converted checkpoint's but for the weights fields."""
    from lucid_core.convert_cli import main as convert_main

    pose = [p for p in sorted((shared_dir / "weights").glob("*.pt")) if load(p).task == "pose"]
    data = shared_dir / "data" / "coco8-pose" / "coco8-pose.yaml"
    if not pose or not data.is_file():
        pytest.skip("needs a pose reference checkpoint and coco8-pose")
    source = pose[0]
    converted = tmp_path / source.stem
    assert convert_main([str(source), str(converted)]) == 0
    reports = []
    for weights in (source, converted):
        out = tmp_path / f"report-{weights.suffix or 'lucid'}.json"
        assert (
            main(["--weights", str(weights), "--data", str(data), "--imgsz", "320", "--output", str(out)])
            == 0
        )
        reports.append(json.loads(out.read_text()))
    assert reports[0]["weights_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    drop = {"weights", "weights_sha256", "total_seconds", "seconds"}
    assert {k: v for k, v in reports[0].items() if k not in drop} == {
        k: v for k, v in reports[1].items() if k not in drop
    }
