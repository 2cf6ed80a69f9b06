"""Classification through lucid-train: a tiny fit with accuracy validation, the accuracy scorer, ``lucid-eval`` on a
folder-per-class dataset, the cached synthetic default, and fine-tuning a reference-format classifier onto another
class count (a ``.pt`` written here the way the reference stores one: ``ClassificationModel`` → ``Sequential`` of
blocks, ``Classify`` head without ``nc``, torch leaves pickled as themselves, half-precision weights)."""

from __future__ import annotations

import json
import logging
import sys
import types
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import torch
from lucid_train_testing import recorded_losses, tiny_trainer
from torch import nn

from lucid_core.checkpoint import load, save_model
from lucid_core.models import YOLOModel, build_model
from lucid_core.tasks import get_task
from lucid_core.tasks.classify import TOP1_KEY, TOP5_KEY
from lucid_data.synth import synthesize
from lucid_train.cli import EMBEDDED_DEFAULT_CONFIG, EMBEDDED_IMAGE_LEVEL_CONFIG, with_embedded_default
from lucid_train.datamodule import DetectionDataModule, SynthConfig, shapes_dataset
from lucid_train.errors import TrainingSetupError
from lucid_train.eval import evaluate_checkpoint
from lucid_train.eval.accuracy import AccuracyScorer
from lucid_train.eval.cli import main as eval_main
from lucid_train.module import DetectionLitModule

IMGSZ = 32


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize("classify", tmp_path_factory.mktemp("cls"), n_train=12, n_val=6, imgsz=40, seed=1)


def _data(root: Path, **kwargs: Any) -> DetectionDataModule:
    return DetectionDataModule(
        root=str(root), imgsz=IMGSZ, batch_size=4, workers=0, task="classify", **kwargs
    )


def test_a_classifier_trains_and_validates_by_accuracy(folders: Path, tmp_path: Path) -> None:
    data = _data(folders)
    assert data.names == {0: "circle", 1: "square", 2: "triangle"} and data.num_classes == 3
    module = DetectionLitModule(
        task="classify", num_classes=data.num_classes, names=data.names, imgsz=data.imgsz
    )
    trainer = tiny_trainer(tmp_path / "run", max_epochs=1)
    trainer.fit(module, datamodule=data)
    losses = recorded_losses(trainer)
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(losses)))
    metrics = module.val_metrics
    assert set(metrics) >= {TOP1_KEY, TOP5_KEY, "metrics/fitness"}
    assert metrics[TOP5_KEY] == 1.0  # three classes: the label is always among the top five
    assert metrics["metrics/fitness"] == pytest.approx(get_task("classify").fitness(metrics))
    best = load(tmp_path / "run" / "best")
    assert best.task == "classify" and best.names == ["circle", "square", "triangle"] and best.imgsz == IMGSZ


def test_the_data_module_refuses_a_dense_task_and_defaults_to_224(folders: Path) -> None:
    with pytest.raises(TrainingSetupError, match=r"--model\.task classify"):
        DetectionDataModule(root=str(folders), workers=0, task="detect")
    assert DetectionDataModule(root=str(folders), workers=0, task="classify").imgsz == 224


def test_the_synthetic_default_is_cached_as_class_folders(tmp_path: Path) -> None:
    config = SynthConfig(n_train=6, n_val=3, imgsz=IMGSZ)
    root = shapes_dataset(config, cache_dir=tmp_path, task="classify")
    assert root.is_dir() and (root / "train" / "circle").is_dir() and root.name.startswith("shapes-classify-")
    stamp = (root / "train").stat().st_mtime_ns
    assert shapes_dataset(config, cache_dir=tmp_path, task="classify") == root
    assert (root / "train").stat().st_mtime_ns == stamp  # reused, not written again


class _Fixed(nn.Module):
    """A "classifier" whose probabilities are a fixed row per image, chosen by the image's first pixel."""

    task = "classify"

    def __init__(self, rows: torch.Tensor) -> None:
        super().__init__()
        self.rows = nn.Parameter(rows, requires_grad=False)
        self.num_classes = int(rows.shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rows[(x[:, 0, 0, 0] * 255).round().long()]


def test_the_accuracy_scorer_counts_top1_top5_and_each_class() -> None:
    rows = torch.tensor(
        [
            [0.50, 0.20, 0.10, 0.10, 0.05, 0.05],  # label 0: top-1
            [0.10, 0.30, 0.40, 0.10, 0.05, 0.05],  # label 1: top-5 only (second)
            [0.05, 0.05, 0.10, 0.10, 0.20, 0.50],  # label 2: top-5 only (fourth), predicted 5
            [0.60, 0.04, 0.01, 0.25, 0.05, 0.05],  # label 2: missed by top-5, predicted 0
        ]
    )
    images = torch.zeros(4, 3, 2, 2, dtype=torch.uint8)
    images[:, 0, 0, 0] = torch.arange(4, dtype=torch.uint8)
    batch = {
        "images": images,
        "cls": torch.tensor([0, 1, 2, 2]),
        "meta": [{"image_id": f"i{k}"} for k in range(4)],
    }
    scorer = AccuracyScorer(task="classify", num_classes=6, names=list("abcdef"))
    scorer.update(_Fixed(rows), batch)
    scorer.update(_Fixed(rows), batch)  # the same images again count once
    result = scorer.compute()
    assert (result.num_images, result.top1, result.top5) == (4, 0.25, 0.75)
    rows_by_name = {row[0]: row for row in result.table.rows}
    assert rows_by_name["all"] == ("all", 4, 0.25, 0.75, pytest.approx(0.5 / 3))  # mean precision of a, b, c
    assert rows_by_name["a"] == ("a", 1, 1.0, 1.0, 0.5) and rows_by_name["c"] == ("c", 2, 0.0, 0.5, 0.0)
    counts = result.confusion.counts
    assert counts.shape == (7, 7) and counts.sum() == 4
    assert counts[0, 0] == 1 and counts[1, 2] == 1 and counts[2, 5] == 1 and counts[2, 0] == 1
    assert result.metrics() == {TOP1_KEY: 0.25, TOP5_KEY: 0.75}


def test_lucid_eval_scores_a_folder_dataset(
    folders: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.manual_seed(0)
    model = build_model("yolo26", "classify", "n", num_classes=3)
    save_model(model, tmp_path / "cls", names=["circle", "square", "triangle"], imgsz=IMGSZ)
    report = evaluate_checkpoint(tmp_path / "cls", folders, output=tmp_path / "report.json")
    assert report["num_images"] == 6 and report["task"] == "classify" and report["imgsz"] == IMGSZ
    assert 0.0 <= report["top1"] <= report["top5"] == 1.0
    assert [row[0] for row in report["per_class_table"]["rows"]] == ["all", "circle", "square", "triangle"]
    assert sum(map(sum, report["confusion_matrix"]["counts"])) == 6
    assert json.loads((tmp_path / "report.json").read_text())["top1"] == report["top1"]
    code = eval_main(
        ["--weights", str(tmp_path / "cls"), "--data", str(folders), "--output", str(tmp_path / "r2.json"),
         "--plots", str(tmp_path / "plots")]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "lucid-eval: 6 images: top-1" in out and "top1_acc" in out
    assert (tmp_path / "plots" / "per_class.csv").read_text().startswith("class,images,top1_acc,top5_acc")
    with pytest.raises(ValueError, match="class count mismatch"):
        save_model(build_model("yolo26", "classify", "n", num_classes=4), tmp_path / "c4", imgsz=IMGSZ)
        evaluate_checkpoint(tmp_path / "c4", folders, output=tmp_path / "r3.json")


# -- a reference-format classification checkpoint -------------------------------------------------------------

_REFERENCE_MODULES = (
    "ultralytics",
    "ultralytics.nn",
    "ultralytics.nn.modules",
    "ultralytics.nn.modules.block",
    "ultralytics.nn.modules.head",
    "ultralytics.nn.tasks",
)


class _Node:
    """A pickled reference module: only its class name and its ``nn.Module`` state."""


def _reference_node(module: nn.Module, qualified: str, classes: dict[str, type]) -> Any:
    where, _, name = qualified.rpartition(".")
    cls = classes.setdefault(qualified, type(name, (_Node,), {"__module__": where, "__qualname__": name}))
    setattr(sys.modules[where], name, cls)
    node = cls()
    node.__dict__.update(
        _parameters=_half(module._parameters, True),
        _buffers=_half(module._buffers, False),
        _non_persistent_buffers_set=set(),
        _modules=OrderedDict((k, _reference_tree(v, classes)) for k, v in module._modules.items() if v is not None),
        training=False,
    )  # fmt: skip
    return node


def _half(tensors: dict[str, Any], parameters: bool) -> OrderedDict[str, Any]:
    out: OrderedDict[str, Any] = OrderedDict()
    for k, v in tensors.items():
        if v is not None and v.is_floating_point():
            v = nn.Parameter(v.detach().half(), requires_grad=False) if parameters else v.detach().half()
        out[k] = v
    return out


def _reference_tree(module: nn.Module, classes: dict[str, type], qualified: str | None = None) -> Any:
    if qualified is None and type(module).__module__.startswith("torch.nn"):
        leaf = type(module).__new__(type(module))  # torch's own classes are pickled as themselves
        leaf.__dict__.update(module.__dict__)
        leaf._parameters = _half(module._parameters, True)
        leaf._buffers = _half(module._buffers, False)
        leaf._modules = OrderedDict((k, _reference_tree(v, classes)) for k, v in module._modules.items())
        return leaf
    return _reference_node(
        module, qualified or f"ultralytics.nn.modules.block.{type(module).__name__}", classes
    )


def write_reference_classifier(model: YOLOModel, path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``torch.save`` a reference-format checkpoint of the classifier ``model`` (see the module docstring)."""
    for name in _REFERENCE_MODULES:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    classes: dict[str, type] = {}
    last = len(model.layers) - 1
    layers = nn.Sequential()
    layers._modules = OrderedDict(
        (
            str(i),
            _reference_tree(layer, classes, "ultralytics.nn.modules.head.Classify" if i == last else None),
        )
        for i, layer in enumerate(model.layers)
    )
    root = _reference_node(nn.Module(), "ultralytics.nn.tasks.ClassificationModel", classes)
    root._modules = OrderedDict(model=layers)
    root.__dict__.update(
        names={i: f"class{i}" for i in range(model.num_classes)},
        stride=torch.tensor([1.0]),
        yaml={
            "nc": model.num_classes,
            "scale": model.scale,
            "yaml_file": f"{model.family}{model.scale}-cls.yaml",
        },
    )
    torch.save({"model": root, "ema": None, "train_args": {"imgsz": 224}}, path)
    return path


def test_fine_tuning_a_reference_classifier_reinitialises_its_linear_layer(
    folders: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(3)
    source = build_model("yolo26", "classify", "n", num_classes=5).eval()
    weights = write_reference_classifier(source, tmp_path / "yolo26n-cls.pt", monkeypatch)
    imported = load(weights)
    assert (
        imported.source_kind == "reference"
        and imported.task == "classify"
        and imported.model.num_classes == 5
    )
    monkeypatch.undo()  # the stand-in modules are gone: the import never needed them
    data = _data(folders)
    with caplog.at_level(logging.INFO):
        module = DetectionLitModule(
            task="classify", num_classes=3, names=data.names, imgsz=data.imgsz, weights=str(weights)
        )
    notes = [r.getMessage() for r in caplog.records if "fine-tuning" in r.getMessage()]
    assert any("re-initialised for 3 classes" in n and "(the weights have 5)" in n for n in notes), notes
    assert module.model.head.linear.weight.shape == (3, 1280)
    backbone = "layers.0.conv.weight"
    torch.testing.assert_close(
        module.model.state_dict()[backbone], source.state_dict()[backbone].half().float()
    )
    trainer = tiny_trainer(tmp_path / "ft", max_epochs=1)
    trainer.fit(module, datamodule=data)
    assert recorded_losses(trainer) and all(torch.isfinite(torch.tensor(recorded_losses(trainer))))
    assert TOP1_KEY in module.val_metrics


def test_lucid_train_task_classify_alone_gets_the_image_level_embedded_default() -> None:
    assert with_embedded_default(["fit", "--model.task", "classify"])[2] == str(EMBEDDED_IMAGE_LEVEL_CONFIG)
    assert with_embedded_default(["fit", "--model.task=detect"])[2] == str(EMBEDDED_DEFAULT_CONFIG)
    assert with_embedded_default(["fit"])[2] == str(EMBEDDED_DEFAULT_CONFIG)
    # a user's own data or config is never replaced
    assert with_embedded_default(["fit", "--model.task", "classify", "--data.root", "x"]) == [
        "fit",
        "--model.task",
        "classify",
        "--data.root",
        "x",
    ]


def test_the_end_of_fit_writes_a_classifiers_confusion_matrix_and_per_class_table(
    folders: Path, tmp_path: Path
) -> None:
    data = _data(folders)
    module = DetectionLitModule(
        task="classify", num_classes=data.num_classes, names=data.names, imgsz=data.imgsz
    )
    tiny_trainer(tmp_path / "run", max_epochs=1, validation_plots=True).fit(module, datamodule=data)
    table = (tmp_path / "run" / "per_class.csv").read_text(encoding="utf-8")
    assert all(name in table for name in ("circle", "square", "triangle"))
    pytest.importorskip("lucid_viz")
    assert (tmp_path / "run" / "confusion_matrix.png").stat().st_size > 0
    summary = (tmp_path / "run" / "summary.txt").read_text(encoding="utf-8")
    assert "final accuracy_top1 " in summary and "nan" not in summary.splitlines()[0]
