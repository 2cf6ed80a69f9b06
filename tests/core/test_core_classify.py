"""The classify task end to end in lucid-core: model modes, the cross-entropy objective, ``Results.probs`` from
``predict``, save/load, and import of a reference-shaped classification checkpoint (a stand-in tree built from
our own model the way the reference stores one: ``Classify`` head without ``nc``, placeholder stride 1)."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lucid_core
from lucid_core.interop.reference import import_reference_tree
from lucid_core.interop.unpickler import StandInModule, standin_class
from lucid_core.models import YOLOModel, build_model, get_family
from lucid_core.postprocess import postprocess
from lucid_core.results import Detections, Probs
from lucid_core.tasks import IMAGE_LABEL, ClassificationLoss, build_objective, get_task

NC = 3


@pytest.fixture(scope="module")
def model() -> YOLOModel:
    torch.manual_seed(0)
    return build_model("yolo26", "classify", "n", num_classes=NC)


def test_the_task_is_registered_with_its_markers() -> None:
    task = get_task("classify")
    assert (task.suffix, task.iou_types, task.target_fields, task.reference_head) == (
        "-cls",
        (),
        (IMAGE_LABEL,),
        "Classify",
    )
    assert task.fitness({"metrics/accuracy_top1": 0.5, "metrics/accuracy_top5": 1.0}) == pytest.approx(0.75)


def test_dense_tasks_keep_the_family_graph() -> None:
    family = get_family("yolo11")
    for name in ("detect", "segment", "pose", "obb"):
        task = get_task(name)
        assert task.layer_graph(family) == (family.layers, family.head_sources)
        assert task.scale_row(family, "x") == family.scales["x"]


def test_the_classifier_is_the_backbone_without_sppf() -> None:
    for family in ("yolov8", "yolo11", "yolo26"):
        layers, sources = get_task("classify").layer_graph(get_family(family))
        assert [layer.kind for layer in layers if layer.kind in ("SPPF", "Upsample", "Concat")] == []
        assert sources == (len(layers) - 1,)
    assert get_task("classify").scale_row(get_family("yolov8"), "x").max_channels == 1024


def test_train_mode_gives_logits_and_eval_mode_probabilities(model: YOLOModel) -> None:
    x = torch.rand(2, 3, 64, 96)
    model.train()
    logits = model(x)
    model.eval()
    with torch.no_grad():
        probs = model(x)
    assert isinstance(logits, torch.Tensor) and logits.shape == (2, NC)
    assert isinstance(probs, torch.Tensor) and probs.shape == (2, NC)
    torch.testing.assert_close(probs.sum(1), torch.ones(2))
    assert model.strides == (32,) and not model.end2end and model.reg_max == 0
    with pytest.raises(ValueError, match="to_deployed"):
        model.to_deployed()


def test_the_objective_is_cross_entropy(model: YOLOModel) -> None:
    objective = build_objective(model, gains={"box": 7.5}, epochs=3)
    assert isinstance(objective, ClassificationLoss) and objective.loss_names == ("loss",)
    logits = torch.randn(4, NC, requires_grad=True)
    labels = torch.tensor([0, 2, 1, 2])
    total, items = objective(logits, {"cls": labels.reshape(-1, 1).float()})
    torch.testing.assert_close(total, F.cross_entropy(logits, labels))
    assert items.shape == (1,) and not items.requires_grad
    total.backward()
    assert logits.grad is not None

    smoothed, _ = build_objective(model, label_smoothing=0.1)(logits, {"cls": labels})
    torch.testing.assert_close(smoothed, F.cross_entropy(logits, labels, label_smoothing=0.1))
    with pytest.raises(ValueError, match="class labels"):
        objective(logits, {"cls": labels[:3]})
    with pytest.raises(ValueError, match="label_smoothing"):
        ClassificationLoss(label_smoothing=1.0)


def test_postprocess_uses_the_task_decode() -> None:
    probs = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3]])
    dets = postprocess(probs, task="classify", nc=NC)
    assert [len(d) for d in dets] == [0, 0]
    assert all(d.probs is not None for d in dets)
    torch.testing.assert_close(torch.stack([d.probs for d in dets if d.probs is not None]), probs)
    with pytest.raises(ValueError, match=r"expects probabilities \(B, 3\)"):
        postprocess(probs[:, :2], task="classify", nc=NC)


def test_probs_view() -> None:
    probs = Probs(torch.tensor([0.05, 0.4, 0.1, 0.3, 0.15, 0.0]))
    assert probs.top1 == 1 and probs.top5 == [1, 3, 4, 2, 0]
    assert float(probs.top1conf) == pytest.approx(0.4)
    torch.testing.assert_close(probs.top5conf, torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05]))
    assert Probs(torch.tensor([0.2, 0.8])).top5 == [1, 0]
    assert isinstance(Probs(torch.tensor([0.2, 0.8]), as_numpy=True).data, np.ndarray)


def test_predict_returns_probs_and_no_boxes(model: YOLOModel, tmp_path: Path) -> None:
    image = np.random.default_rng(0).integers(0, 255, (40, 56, 3), dtype=np.uint8)
    (result,) = lucid_core.predict(model, image, imgsz=64)
    assert result.probs is not None and result.task == "classify"
    assert 0 <= result.probs.top1 < NC and float(result.probs.data.sum()) == pytest.approx(1.0, abs=1e-5)
    assert len(result.boxes) == 0 and result.masks is None and result.keypoints is None and result.obb is None
    assert result.numpy().probs is not None and isinstance(result.numpy().probs.data, np.ndarray)  # type: ignore[union-attr]

    lucid_core.save_model(model, tmp_path / "cls", names=["a", "b", "c"], imgsz=64)
    loaded = lucid_core.load(tmp_path / "cls").model
    assert loaded.task == "classify" and loaded.num_classes == NC
    (again,) = lucid_core.predict(loaded, image, imgsz=64)
    assert again.probs is not None
    torch.testing.assert_close(again.probs.data, result.probs.data, rtol=1e-4, atol=1e-5)


def _standin(module: nn.Module, reference_class: str | None = None) -> StandInModule:
    if reference_class is None:
        origin = type(module).__module__
        prefix = origin if origin.startswith("torch.nn") else "ultralytics.nn.modules.block"
        reference_class = f"{prefix}.{type(module).__name__}"
    node = standin_class(reference_class)()
    node.__setstate__(
        {
            "_parameters": OrderedDict(
                (k, v.detach().half()) for k, v in module._parameters.items() if v is not None
            ),
            "_buffers": OrderedDict(
                (k, v.detach().half() if v.is_floating_point() else v.detach())
                for k, v in module._buffers.items()
                if v is not None
            ),
            "_non_persistent_buffers_set": set(module._non_persistent_buffers_set),
            "_modules": OrderedDict((k, _standin(v)) for k, v in module._modules.items() if v is not None),
            **(
                {"eps": module.eps, "momentum": module.momentum} if isinstance(module, nn.BatchNorm2d) else {}
            ),
        }
    )
    return node


def reference_classifier(model: YOLOModel, yaml_file: str) -> dict[str, Any]:
    """A reference-shaped classification checkpoint dict of ``model`` (head ``Classify``, no ``nc``, stride 1)."""
    last = len(model.layers) - 1
    layers = OrderedDict(
        (str(i), _standin(layer, "ultralytics.nn.modules.head.Classify" if i == last else None))
        for i, layer in enumerate(model.layers)
    )
    sequence = standin_class("torch.nn.modules.container.Sequential")()
    sequence.__setstate__({"_parameters": OrderedDict(), "_buffers": OrderedDict(), "_modules": layers})
    root = standin_class("ultralytics.nn.tasks.ClassificationModel")()
    root.__setstate__(
        {
            "_parameters": OrderedDict(),
            "_buffers": OrderedDict(),
            "_modules": OrderedDict(model=sequence),
            "names": {i: f"class{i}" for i in range(model.num_classes)},
            "stride": torch.tensor([1.0]),
            "yaml": {"nc": model.num_classes, "scale": model.scale, "yaml_file": yaml_file},
        }
    )
    return {"model": root, "ema": None, "train_args": {"imgsz": 224}}


@pytest.mark.parametrize(("family", "scale"), [("yolo26", "n"), ("yolo11", "s"), ("yolov8", "n")])
def test_a_reference_classification_checkpoint_imports(family: str, scale: str) -> None:
    torch.manual_seed(1)
    ours = build_model(family, "classify", scale, num_classes=5).eval()
    with torch.no_grad():
        for module in ours.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)  # type: ignore[union-attr]
                module.running_var.uniform_(0.5, 1.5)  # type: ignore[union-attr]
        for p in ours.parameters():
            p.copy_(p.half().float())  # the checkpoint stores float16
    imported, config = import_reference_tree(reference_classifier(ours, f"{family}{scale}-cls.yaml"))
    assert (config.model.family, config.model.task, config.model.scale, config.model.num_classes) == (
        family,
        "classify",
        scale,
        5,
    )
    assert config.strides == (32,) and config.imgsz == 224 and config.names[0] == "class0"
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(imported(x), ours(x))


def test_classifiers_keep_pytorch_batch_norm_constants() -> None:
    """The reference's classification checkpoints store eps 1e-5 / momentum 0.1 on every BatchNorm (its detection
    models 1e-3 / 0.03): a classifier is built that way, the dense tasks are not."""
    for task, expected in (("classify", (1e-5, 0.1)), ("detect", (1e-3, 0.03))):
        model = build_model("yolo26", task, "n", num_classes=3)
        assert {(m.eps, m.momentum) for m in model.modules() if isinstance(m, nn.BatchNorm2d)} == {expected}


def test_an_import_adopts_the_batch_norm_constants_the_checkpoint_stores() -> None:
    """A state dict carries no eps: the importer takes it from the pickled BatchNorms, so the imported model gives
    the stored model's outputs even where they differ from the task's defaults."""
    torch.manual_seed(2)
    ours = build_model("yolo26", "classify", "n", num_classes=4).eval()
    with torch.no_grad():
        for module in ours.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.eps, module.momentum = 0.25, 0.03  # an eps that moves the outputs visibly
                module.running_var.uniform_(0.5, 1.5)  # type: ignore[union-attr]
        for p in ours.parameters():
            p.copy_(p.half().float())
    imported, _ = import_reference_tree(reference_classifier(ours, "yolo26n-cls.yaml"))
    assert {(m.eps, m.momentum) for m in imported.modules() if isinstance(m, nn.BatchNorm2d)} == {
        (0.25, 0.03)
    }
    unadopted, _ = import_reference_tree(reference_classifier(ours, "yolo26n-cls.yaml"))
    for module in unadopted.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.eps = 1e-5
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():  # train mode: logits, normalised by batch statistics and eps
        logits = ours.train()(x)
        torch.testing.assert_close(imported.train()(x), logits)
        assert (unadopted.train()(x) - logits).abs().max() > 1e-3  # the constant matters


def test_detections_carry_probs_through_select_and_to() -> None:
    det = Detections.empty()
    det.probs = torch.tensor([0.3, 0.7])
    assert det.select(torch.zeros(0, dtype=torch.int64)).probs is det.probs
    moved = det.to("cpu").probs
    assert moved is not None and torch.equal(moved, det.probs)
