"""Model behaviour: output layout per task and branch, registry, init, fusion, state-dict layout, config."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from lucid_core.models import TrainOutput, YOLOModel, build_model, list_models
from lucid_core.nn.fuse import fuse_model

TASK_EXTRAS = {"detect": {}, "segment": {"mask_coef": 32}, "pose": {"keypoints": 51}, "obb": {"angle": 1}}
EVAL_EXTRA_ROWS = {"detect": 0, "segment": 32, "pose": 51, "obb": 1}
H, W = 64, 96  # level shapes (8, 12), (4, 6), (2, 3)
A = 8 * 12 + 4 * 6 + 2 * 3


@pytest.fixture(scope="module")
def models() -> dict[tuple[str, str], YOLOModel]:
    torch.manual_seed(0)
    return {
        (f, t): build_model(f, t, "n", num_classes=3)
        for f in ("yolov8", "yolo11", "yolo26")
        for t in TASK_EXTRAS
    }


def test_registry_lists_three_families_five_tasks_five_scales() -> None:
    keys = list_models()
    assert {k.family for k in keys} == {"yolo26", "yolo11", "yolov8"}
    assert len(keys) == 75
    assert len({k.name for k in keys}) == 75
    assert len([k for k in keys if k.task != "classify"]) == 60  # the dense tasks; classify has 15


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="yolo99"):
        build_model("yolo99")
    with pytest.raises(ValueError, match="'q'"):
        build_model("yolo26", "detect", "q")
    with pytest.raises(ValueError, match="kpt_shape"):
        build_model("yolo26", "detect", "n", kpt_shape=(17, 3))
    with pytest.raises(ValueError, match="num_classes"):
        build_model("yolo26", "detect", "n", num_classes=0)


@pytest.mark.parametrize("family", ["yolov8", "yolo11", "yolo26"])
@pytest.mark.parametrize("task", list(TASK_EXTRAS))
def test_train_and_eval_output_layout(
    models: dict[tuple[str, str], YOLOModel], family: str, task: str
) -> None:
    model = models[(family, task)]
    x = torch.rand(2, 3, H, W)
    model.train()
    out = model(x)
    assert isinstance(out, TrainOutput)
    assert out.level_shapes == [(8, 12), (4, 6), (2, 3)]
    assert out.strides == (8, 16, 32)
    assert out.imgsz_hw == (H, W)
    branches = [out.one2many] + ([out.one2one] if family == "yolo26" else [])
    assert (out.one2one is not None) == (family == "yolo26")
    for branch in branches:
        assert branch is not None
        assert branch.boxes.shape == (2, 4 * model.reg_max, A)
        assert branch.scores.shape == (2, 3, A)
        expected = dict(TASK_EXTRAS[task])
        if family == "yolo26" and task == "pose":
            expected["kpt_sigma"] = 34
        assert {k: v.shape for k, v in branch.extras.items()} == {k: (2, c, A) for k, c in expected.items()}
    assert (out.proto is not None) == (task == "segment")
    if out.proto is not None:
        assert out.proto.shape == (2, 32, H // 4, W // 4)
    assert (out.semseg is not None) == (family == "yolo26" and task == "segment")
    if out.semseg is not None:
        assert out.semseg.shape == (2, 3, H // 8, W // 8)
    model.eval()
    with torch.no_grad():
        pred = model(x)
    if task == "segment":
        assert isinstance(pred, tuple)
        pred, proto = pred
        assert proto.shape == (2, 32, H // 4, W // 4)
    assert isinstance(pred, torch.Tensor)
    assert pred.shape == (2, 4 + 3 + EVAL_EXTRA_ROWS[task], A)
    probs = pred[:, 4:7]
    assert bool(((probs >= 0) & (probs <= 1)).all())


def test_eval_decode_matches_the_reference_rules() -> None:
    """DFL expectation + centre/size x stride, keypoints (2·raw + grid − 0.5)·stride (fixtures README)."""
    model = build_model("yolo11", "pose", "n", num_classes=3)
    x = torch.rand(1, 3, H, W)
    for module in model.modules():  # raw branch outputs with the running statistics eval mode uses
        if isinstance(module, torch.nn.BatchNorm2d):
            module.eval()
    with torch.no_grad():
        raw = model(x)
        model.eval()
        pred = model(x)
    assert isinstance(raw, TrainOutput) and isinstance(pred, torch.Tensor)
    dist = (raw.one2many.boxes.view(1, 4, 16, A).softmax(2) * torch.arange(16.0).view(1, 1, 16, 1)).sum(2)
    # first anchor: cell (0, 0) of stride 8, anchor point (0.5, 0.5)
    lt, rb = dist[0, :2, 0], dist[0, 2:, 0]
    x1y1, x2y2 = 0.5 - lt, 0.5 + rb
    expected_box = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1)) * 8
    torch.testing.assert_close(pred[0, :4, 0], expected_box, rtol=1e-5, atol=1e-4)
    kpt = raw.one2many.extras["keypoints"][0, :, 13]  # anchor 13 = row 1, col 1 of stride 8
    rows = 4 + 3  # box, 3 class probabilities, then keypoints (x, y, v)
    torch.testing.assert_close(pred[0, rows, 13], (2 * kpt[0] + 1.0) * 8, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(pred[0, rows + 1, 13], (2 * kpt[1] + 1.0) * 8, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(pred[0, rows + 2, 13], kpt[2].sigmoid())


def test_yolo26_decode_branch_selects_the_branch(models: dict[tuple[str, str], YOLOModel]) -> None:
    model = models[("yolo26", "detect")]
    with torch.no_grad():
        model.head.one2one_cv3[0][-1].bias.add_(3.0)  # type: ignore[index]
        model.eval()
        x = torch.rand(1, 3, H, W)
        default = model(x)
        one2one = model(x, branch="one2one")
        one2many = model(x, branch="one2many")
        model.head.one2one_cv3[0][-1].bias.sub_(3.0)  # type: ignore[index]
    assert isinstance(one2one, torch.Tensor) and isinstance(one2many, torch.Tensor)
    assert isinstance(default, torch.Tensor) and torch.equal(default, one2one)
    assert bool((one2one[:, 4:, :96] > one2many[:, 4:, :96]).all())


def test_yolo26_one2one_branch_does_not_train_the_backbone() -> None:
    torch.manual_seed(0)
    model = build_model("yolo26", "detect", "n", num_classes=2)
    out = model(torch.rand(1, 3, 64, 64))
    assert isinstance(out, TrainOutput) and out.one2one is not None
    out.one2one.scores.sum().backward()
    assert model.layers[0].conv.weight.grad is None  # type: ignore[union-attr]
    assert model.head.one2one_cv3[0][-1].weight.grad is not None  # type: ignore[index]
    assert model.head.cv3[0][-1].weight.grad is None


@pytest.mark.parametrize(
    ("family", "task"),
    sorted({(k.family, k.task) for k in list_models() if k.scale == "n" and k.task != "classify"}),
)
@pytest.mark.parametrize("nc", [3, 80])
def test_initial_biases(family: str, task: str, nc: int) -> None:
    """Reference 8.4.190's fresh model (measured black-box): every box output 2.0 (not the older 1.0), class
    logits ``log(5 / nc / (640 / stride)²)``, in the one-to-one copies too."""
    model = build_model(family, task, "n", num_classes=nc)
    head = model.head
    names = ["cv2", "cv3"] + (["one2one_cv2", "one2one_cv3"] if model.end2end else [])
    for name in names:
        for level, stride in enumerate(model.strides):
            bias = getattr(head, name)[level][-1].bias
            expected = 2.0 if name.endswith("cv2") else math.log(5 / nc / (640 / stride) ** 2)
            torch.testing.assert_close(bias, torch.full_like(bias, expected))


@pytest.mark.parametrize(("family", "task"), [("yolov8", "obb"), ("yolo11", "segment"), ("yolo26", "pose")])
def test_fused_matches_unfused(family: str, task: str) -> None:
    torch.manual_seed(1)
    model = build_model(family, task, "n", num_classes=4)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)  # type: ignore[union-attr]
                module.running_var.uniform_(0.5, 2.0)  # type: ignore[union-attr]
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    model.eval()
    x = torch.rand(1, 3, 96, 64)
    with torch.no_grad():
        before = model(x)
        fuse_model(model)
        after = model(x)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    pairs = list(zip(before, after, strict=True)) if isinstance(before, tuple) else [(before, after)]
    for a, b in pairs:
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-4)


def test_config_rebuilds_the_same_architecture() -> None:
    model = build_model("yolo26", "pose", "n", num_classes=2, kpt_shape=(5, 2))
    config = asdict(model.config)
    json.dumps(config)
    rebuilt = build_model(**config)
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {
        k: v.shape for k, v in model.state_dict().items()
    }
    assert rebuilt.kpt_shape == (5, 2)


def test_cls_branch_parameter_names() -> None:
    model = build_model("yolo26", "segment", "n", num_classes=3)
    names = model.cls_branch_parameter_names()
    head_prefix = f"layers.{len(model.layers) - 1}."
    assert any(n.startswith(head_prefix + "cv3.") for n in names)
    assert any(n.startswith(head_prefix + "one2one_cv3.") for n in names)
    assert any(n.startswith(head_prefix + "proto.semseg.") for n in names)
    assert not any(".cv2." in n or ".cv4." in n for n in names)
    assert len(names) == sum(1 for n, _ in model.named_parameters() if n in names)


CHECKPOINT_BUILDS = {
    "yolo11n-pose.pt": ("yolo11", "pose", "n", 1),
    "yolov8n-obb-taufibrils.pt": ("yolov8", "obb", "n", 1),
    "yolov8s-fall.pt": ("yolov8", "detect", "s", 2),
}


@pytest.mark.shared
@pytest.mark.parametrize("checkpoint", list(CHECKPOINT_BUILDS))
def test_state_dict_layout_matches_reference_checkpoints(shared_dir: Path, checkpoint: str) -> None:
    spec = json.loads((shared_dir / "weights" / "checkpoints.json").read_text())[checkpoint]
    expected = {"layers." + key.removeprefix("model."): list(shape) for key, shape, _ in spec["state_dict"]}
    family, task, scale, nc = CHECKPOINT_BUILDS[checkpoint]
    assert spec["nc"] == nc
    with torch.device("meta"):
        model = build_model(family, task, scale, num_classes=nc)
    got = {key: list(value.shape) for key, value in model.state_dict().items()}
    assert got == expected
