"""Every console script is a thin parser over a typed function: the facade and the typed functions run with the
argument parsers patched to fail, and each typed function's keyword defaults equal its command's flag defaults."""

from __future__ import annotations

import argparse
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lucid_train_testing import TINY_IMGSZ, make_shapes

from lucid_core.checkpoint import save_model
from lucid_core.convert_cli import build_parser as convert_parser
from lucid_core.convert_cli import convert
from lucid_core.export_cli import build_parser as export_parser
from lucid_core.export_cli import export
from lucid_core.models import build_model
from lucid_core.predict_cli import build_parser as predict_parser
from lucid_core.predict_cli import predict_to_dir
from lucid_data import load_dataset
from lucid_data.cli import build_parser as data_parser
from lucid_data.cli import check_dataset
from lucid_train import YOLO, evaluate
from lucid_train.eval import evaluate_checkpoint, score_dota
from lucid_train.eval.cli import _parser as eval_parser


@pytest.fixture(scope="module")
def shapes_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shapes(tmp_path_factory.mktemp("typed-shapes"), n_train=2, n_val=2)


@pytest.fixture(scope="module")
def weights(shapes_yaml: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    names = load_dataset(shapes_yaml, split="val").names
    stem = tmp_path_factory.mktemp("typed-weights") / "w"
    model = build_model("yolov8", "detect", "n", num_classes=len(names))
    save_model(model, stem, names=[names[i] for i in range(len(names))], imgsz=TINY_IMGSZ)
    return stem


@pytest.fixture
def no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any argparse parsing fails the test: a library path must not build or parse a command line."""

    def refuse(*args: object, **kwargs: object) -> Any:
        raise AssertionError("an argument parser ran on a library code path")

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", refuse)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", refuse)


@pytest.mark.usefixtures("no_parsing")
def test_facade_val_and_evaluate_parse_no_command_line(
    shapes_yaml: Path, weights: Path, tmp_path: Path
) -> None:
    report = YOLO(weights).val(data=shapes_yaml, batch=2, output=tmp_path / "eval.json")
    assert report["num_images"] == 2 and json.loads((tmp_path / "eval.json").read_text()) == report
    result = evaluate(weights, shapes_yaml, batch_size=2)
    assert result.map50_95 == pytest.approx(report["iou_types"]["bbox"]["mAP50-95"])


@pytest.mark.usefixtures("no_parsing")
def test_facade_predict_with_output_parses_no_command_line(
    shapes_yaml: Path, weights: Path, tmp_path: Path
) -> None:
    images = shapes_yaml.parent / "images" / "val"
    files = sorted(p for p in images.iterdir() if p.is_file())
    detections = YOLO(weights).predict(images, output=tmp_path / "out", conf=0.0, max_det=3)
    assert len(detections) == len(files) and all(len(d) == 3 for d in detections)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"{p.name}.json" for p in files]
    run = predict_to_dir(weights, images, tmp_path / "typed", conf=0.0, max_det=3)
    assert [item.image for item in run.written] == files
    for item in run.written:
        assert item.json_path.read_bytes() == (tmp_path / "out" / item.json_path.name).read_bytes()


@pytest.mark.usefixtures("no_parsing")
def test_facade_export_parses_no_command_line(weights: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    path = YOLO(weights).export("onnx", output=tmp_path / "model.onnx", check=False)
    assert path == tmp_path / "model.onnx" and path.is_file()
    result = export(weights, output=tmp_path / "typed.onnx", check=False)
    assert result.path.is_file() and result.parity is None and result.passed


@pytest.mark.usefixtures("no_parsing")
def test_dota_scoring_and_dataset_check_parse_no_command_line(shapes_yaml: Path, tmp_path: Path) -> None:
    labels, dets = tmp_path / "labelTxt", tmp_path / "dets"
    labels.mkdir()
    dets.mkdir()
    (labels / "img1.txt").write_text("0 0 10 0 10 10 0 10 plane 0\n", encoding="utf-8")
    (dets / "Task1_plane.txt").write_text("img1 0.9 0 0 10 0 10 10 0 10\n", encoding="utf-8")
    scoring = score_dota(labels, detections=dets, output=tmp_path / "dota.json")
    assert scoring.result.map07 == pytest.approx(1.0)
    assert json.loads((tmp_path / "dota.json").read_text()) == scoring.report
    check = check_dataset(shapes_yaml, decode_images=False)
    assert check.ok and check.images == 4 and check.summary().startswith("OK: 4 images")


@pytest.mark.shared
@pytest.mark.usefixtures("no_parsing")
def test_facade_conversion_of_a_reference_pt_parses_no_command_line(
    shared_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUCID_CACHE_DIR", str(tmp_path / "cache"))
    source = shared_dir / "weights" / "yolov8s-fall.pt"
    weights = YOLO(source).weights_path()
    assert weights.with_suffix(".safetensors").is_file()
    done = convert(source, tmp_path / "typed")
    assert done.weights.read_bytes() == weights.with_suffix(".safetensors").read_bytes()


def _defaults(function: Callable[..., Any]) -> dict[str, Any]:
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _flag_defaults(parser: argparse.ArgumentParser) -> dict[str, Any]:
    return {action.dest: action.default for action in parser._actions if action.dest != "help"}


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]  # type: ignore[no-any-return]


#: typed function, its command's parser, and the flags whose keyword has another name or sense
ENTRY_POINTS: list[tuple[Callable[..., Any], Callable[[], argparse.ArgumentParser], dict[str, str]]] = [
    (evaluate_checkpoint, eval_parser, {}),
    (score_dota, eval_parser, {"dota_dets": "detections"}),
    (predict_to_dir, predict_parser, {}),
    (export, export_parser, {"no_check": "not check"}),
    (convert, convert_parser, {}),
    (
        check_dataset,
        lambda: _subcommand(data_parser(), "check"),
        {"split": "splits", "no_images": "not decode_images"},
    ),
]


@pytest.mark.parametrize(
    ("function", "parser", "renamed"), ENTRY_POINTS, ids=lambda v: getattr(v, "__name__", "")
)
def test_typed_defaults_equal_the_flag_defaults(
    function: Callable[..., Any], parser: Callable[[], argparse.ArgumentParser], renamed: dict[str, str]
) -> None:
    keywords = _defaults(function)
    compared = 0
    for dest, default in _flag_defaults(parser()).items():
        name = renamed.get(dest, dest)
        negated = name.startswith("not ")
        name = name.removeprefix("not ")
        if name not in keywords:
            continue
        expected = (not default) if negated else default
        got = keywords[name]
        assert (list(got) if isinstance(got, tuple) else got) == expected, (function.__name__, dest)
        compared += 1
    assert compared >= min(3, len(keywords)), function.__name__


def test_no_library_function_takes_a_namespace() -> None:
    """The typed entry points and the facade's verbs are annotated with plain values, never a Namespace."""
    functions = [entry[0] for entry in ENTRY_POINTS] + [YOLO.val, YOLO.predict, YOLO.export, evaluate]
    for function in functions:
        hints = " ".join(str(p.annotation) for p in inspect.signature(function).parameters.values())
        assert "Namespace" not in hints, function.__name__
