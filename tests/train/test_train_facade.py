"""`lucid_train.YOLO` (issue 14): each verb is a thin call into the typed function behind lucid-train / lucid-eval /
lucid-predict / lucid-export (same files as the command); `fit` runs the very command `fit_command` shows, so it gives
the CLI's run directory and weights."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lucid_train_testing import TINY_IMGSZ, make_shapes

from lucid_core.predict_cli import main as predict_cli
from lucid_train import YOLO, evaluate
from lucid_train.cli import build_cli, main
from lucid_train.errors import TrainingSetupError

TINY = {"imgsz": TINY_IMGSZ, "batch": 4, "workers": 0, "device": "cpu"}


@pytest.fixture(scope="module")
def shapes_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shapes(tmp_path_factory.mktemp("facade-shapes"), n_train=4, n_val=2)


def _cli_args(shapes_yaml: Path, run_dir: Path) -> list[str]:
    """The hand-written ``lucid-train fit`` command equivalent to ``YOLO("yolo26n").fit(..., **TINY)``."""
    return [
        "fit",
        "--model.family",
        "yolo26",
        "--model.scale",
        "n",
        "--data.root",
        str(shapes_yaml),
        "--trainer.max_epochs",
        "1",
        "--trainer.default_root_dir",
        str(run_dir),
        "--trainer.accelerator",
        "cpu",
        "--data.imgsz",
        str(TINY_IMGSZ),
        "--data.batch_size",
        "4",
        "--data.workers",
        "0",
    ]


def _config(args: list[str]) -> dict[str, Any]:
    cli = build_cli(args[1:], run=False)  # without the subcommand: parse and instantiate only
    return dict(cli.config.as_dict())


def test_fit_command_parses_to_the_cli_config(shapes_yaml: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    command = YOLO("yolo26n").fit_command(data=shapes_yaml, epochs=1, run_dir=run, **TINY)
    assert _config(command) == _config(_cli_args(shapes_yaml, run))


def test_recipe_names_map_to_their_groups(shapes_yaml: Path) -> None:
    command = YOLO("yolov8s").fit_command(
        data=shapes_yaml,
        lr0=0.02,
        optimizer="SGD",
        box=5.0,
        fliplr=0.0,
        seed=3,
        **{"trainer.precision": "32"},
    )
    text = " ".join(command)
    for expected in (
        "--model.family yolov8 --model.scale s",
        "--optimizer.lr0 0.02",
        "--optimizer.name SGD",
        "--loss.box 5.0",
        "--data.augment.fliplr 0.0",
        "--seed_everything 3 --data.seed 3",
        "--trainer.precision 32",
    ):
        assert expected in text, expected
    with pytest.raises(TypeError, match="unknown setting 'lr_0'"):
        YOLO("yolo26n").fit_command(data=shapes_yaml, lr_0=0.1)


def test_unknown_model_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"yolo99x.*registered model name"):
        YOLO("yolo99x")
    with pytest.raises(FileNotFoundError, match=r"--ckpt_path .*last\.ckpt.*best\.safetensors"):
        YOLO(tmp_path / "last.ckpt")


def test_predict_returns_detections_and_writes_lucid_predicts_json(shapes_yaml: Path, tmp_path: Path) -> None:
    images = shapes_yaml.parent / "images" / "val"
    model = YOLO("yolov8n")
    detections = model.predict(images, output=tmp_path / "facade", imgsz=TINY_IMGSZ, conf=0.0, max_det=3)
    files = sorted(p for p in images.iterdir() if p.is_file())
    assert len(detections) == len(files) and all(len(d) == 3 for d in detections)
    weights = model.weights_path()
    argv = ["--weights", str(weights), "--source", str(images), "--output", str(tmp_path / "cli")]
    assert predict_cli([*argv, "--imgsz", str(TINY_IMGSZ), "--conf", "0.0", "--max-det", "3"]) == 0
    for file in files:
        facade = json.loads((tmp_path / "facade" / f"{file.name}.json").read_text())
        assert facade == json.loads((tmp_path / "cli" / f"{file.name}.json").read_text())
        np.testing.assert_allclose(
            [d["box"] for d in facade["detections"]],
            detections[files.index(file)].detections.boxes.numpy(),
            atol=1e-5,
        )


def _count_loads_prepares_and_inferences(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counters of checkpoint reads, prepared (fused) copies and per-image inferences (forward passes), whichever
    module calls them (lucid_core.inference or lucid-predict's lucid_core.predict_cli)."""
    import importlib

    from lucid_core import checkpoint

    predicting = importlib.import_module("lucid_core.inference")
    predict_cli = importlib.import_module("lucid_core.predict_cli")
    calls = {"load": 0, "prepare": 0, "infer": 0}

    def counted(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    for kind, reader in list(checkpoint._READERS.items()):
        monkeypatch.setitem(checkpoint._READERS, kind, counted("load", reader))
    originals = {
        name: getattr(predicting, name) for name in ("prepare_inference_model", "forward_for_decode")
    }
    for module in (predicting, predict_cli):
        for attribute, name in (("prepare_inference_model", "prepare"), ("forward_for_decode", "infer")):
            if hasattr(module, attribute):
                monkeypatch.setattr(module, attribute, counted(name, originals[attribute]))
    return calls


def test_repeated_predict_calls_load_and_prepare_the_weights_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`YOLO(weights).predict(image)` in a loop: one checkpoint load and one fused copy (issue 18's reuse), the
    checkpoint's imgsz by default, and the same detections as lucid-core's predict on the loaded model."""
    from lucid_core.checkpoint import load, save_model
    from lucid_core.inference import predict
    from lucid_core.models import build_model

    save_model(
        build_model("yolov8", "detect", "n", num_classes=2), tmp_path / "w", names=["a", "b"], imgsz=96
    )
    calls = _count_loads_prepares_and_inferences(monkeypatch)
    image = np.random.default_rng(0).integers(0, 256, (120, 90, 3), dtype=np.uint8)
    model = YOLO(tmp_path / "w")
    runs = [model.predict(image, conf=0.0, max_det=5) for _ in range(3)]
    assert (calls["load"], calls["prepare"]) == (1, 1)
    (expected,) = predict(load(tmp_path / "w").model, image, imgsz=96, conf=0.0, max_det=5)
    for (result,) in runs:
        det = result.detections
        np.testing.assert_array_equal(det.boxes.numpy(), expected.detections.boxes.numpy())
        np.testing.assert_array_equal(det.scores.numpy(), expected.detections.scores.numpy())


def test_predict_with_output_loads_prepares_and_infers_once(
    shapes_yaml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`predict(folder, output=DIR)`: one checkpoint read, one fused copy and one inference per image, also when
    called again (the prepared copy is reused); the returned detections are the ones written."""
    from lucid_core.checkpoint import save_model
    from lucid_core.models import build_model

    save_model(
        build_model("yolov8", "detect", "n", num_classes=3),
        tmp_path / "w",
        names=["x", "y", "z"],
        imgsz=TINY_IMGSZ,
    )
    images = shapes_yaml.parent / "images" / "val"
    files = sorted(p for p in images.iterdir() if p.is_file())
    calls = _count_loads_prepares_and_inferences(monkeypatch)
    model = YOLO(tmp_path / "w")
    detections = model.predict(images, output=tmp_path / "out", conf=0.0, max_det=3)
    assert calls == {"load": 1, "prepare": 1, "infer": len(files)}
    for file, det in zip(files, detections, strict=True):
        written = json.loads((tmp_path / "out" / f"{file.name}.json").read_text())
        assert written["imgsz"] == TINY_IMGSZ and {d["name"] for d in written["detections"]} <= {
            "x",
            "y",
            "z",
        }
        np.testing.assert_allclose(
            [d["score"] for d in written["detections"]], det.detections.scores.numpy(), rtol=1e-6
        )
    model.predict(images, output=tmp_path / "again", conf=0.0, max_det=3)
    assert calls == {"load": 1, "prepare": 1, "infer": 2 * len(files)}


def test_export_writes_onnx_beside_the_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    from lucid_core import build_model, save_model

    save_model(build_model("yolov8", "detect", "n", num_classes=2), tmp_path / "w", imgsz=TINY_IMGSZ)
    path = YOLO(tmp_path / "w").export("onnx")
    assert path == tmp_path / "w.onnx" and path.is_file()
    assert "parity onnxruntime vs PyTorch" in capsys.readouterr().out


def test_val_and_evaluate_score_the_same_weights(shapes_yaml: Path, tmp_path: Path) -> None:
    from lucid_core import build_model, save_model
    from lucid_data import load_dataset

    names = load_dataset(shapes_yaml, split="val").names
    model = build_model("yolov8", "detect", "n", num_classes=len(names))
    save_model(model, tmp_path / "w", names=[names[i] for i in range(len(names))], imgsz=TINY_IMGSZ)
    report = YOLO(tmp_path / "w").val(data=shapes_yaml, batch=2)
    assert (tmp_path / "eval.json").is_file() and report["num_images"] == 2
    result = evaluate(tmp_path / "w", shapes_yaml, batch_size=2)
    assert result.map50_95 == pytest.approx(report["iou_types"]["bbox"]["mAP50-95"])
    with pytest.raises(TrainingSetupError, match="no data given"):
        YOLO("yolov8n").val()


@pytest.mark.shared
def test_reference_checkpoint_is_converted_once(
    shared_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUCID_CACHE_DIR", str(tmp_path / "cache"))
    model = YOLO(shared_dir / "weights" / "yolov8s-fall.pt")
    weights = model.weights_path()
    assert (
        weights.parent == tmp_path / "cache" / "converted" and weights.with_suffix(".safetensors").is_file()
    )
    assert YOLO(shared_dir / "weights" / "yolov8s-fall.pt").weights_path() == weights
    assert model.model.config.family == "yolov8" and model.model.num_classes == 2


def _files(run: Path) -> list[str]:
    """Run-directory file names; TensorBoard event names (host, pid, time) are reduced to their prefix."""
    names = []
    for path in sorted(p for p in run.rglob("*") if p.is_file()):
        rel = path.relative_to(run).as_posix()
        names.append(
            rel.split("events.out.tfevents")[0] + "events.out.tfevents" if "tfevents" in rel else rel
        )
    return sorted(names)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_fit_gives_the_cli_run_directory_and_weights(shapes_yaml: Path, tmp_path: Path) -> None:
    model = YOLO("yolo26n")
    run = model.fit(data=shapes_yaml, epochs=1, run_dir=tmp_path / "facade", **TINY)
    assert run == tmp_path / "facade" and model.weights == run / "best"
    assert main(_cli_args(shapes_yaml, tmp_path / "cli")) == 0
    assert _files(run) == _files(tmp_path / "cli")
    assert _sha256(run / "best.safetensors") == _sha256(tmp_path / "cli" / "best.safetensors")
    # the trained object continues with the run's weights
    assert model.val(batch=2)["num_images"] == 2


def test_predict_classes_and_agnostic_nms_reach_predict_and_lucid_predict(
    shapes_yaml: Path, tmp_path: Path
) -> None:
    images = shapes_yaml.parent / "images" / "val"
    model = YOLO("yolov8n")
    plain = model.predict(images, imgsz=TINY_IMGSZ, conf=0.0, max_det=5)
    seen = int(plain[0].detections.labels[0])  # a class the (random) network does report
    options = {"imgsz": TINY_IMGSZ, "conf": 0.0, "max_det": 5, "classes": [seen], "agnostic_nms": True}
    detections = model.predict(images, output=tmp_path / "facade", **options)  # type: ignore[arg-type]
    assert all(set(d.detections.labels.tolist()) == {seen} for d in detections if len(d))
    assert len(detections[0]) > 0
    for file, det in zip(sorted(p for p in images.iterdir() if p.is_file()), detections, strict=True):
        written = json.loads((tmp_path / "facade" / f"{file.name}.json").read_text())["detections"]
        assert [d["label"] for d in written] == det.detections.labels.tolist()


def test_an_exported_model_runs_through_the_facade(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    import numpy as np

    from lucid_core.checkpoint import save_model
    from lucid_core.models import build_model
    from lucid_train import YOLO

    save_model(
        build_model("yolov8", "detect", "n", num_classes=3), tmp_path / "w", names=["a", "b", "c"], imgsz=64
    )
    exported = YOLO(str(tmp_path / "w")).export("onnx", imgsz=64)
    onnx_path = Path(getattr(exported, "path", exported))
    assert onnx_path.suffix == ".onnx" and onnx_path.is_file()
    model = YOLO(str(onnx_path))
    image = np.zeros((64, 64, 3), np.uint8)
    (result,) = model.predict(image, conf=0.0, max_det=3)
    (reference,) = YOLO(str(tmp_path / "w")).predict(image, conf=0.0, max_det=3)
    assert len(result) == len(reference) == 3
    assert np.allclose(result.boxes.xyxy.numpy(), reference.boxes.xyxy.numpy(), atol=1e-2)
    with pytest.raises(FileNotFoundError, match="no such exported model"):
        YOLO(str(tmp_path / "missing.onnx"))
