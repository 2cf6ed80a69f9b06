"""``predict(model, image)`` prepares (copies + fuses) the model once and reuses it until its weights change: the
reuse is keyed by every tensor's identity and version counter, not by a flag. A path is read once while its files
are unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lucid_core import inference as predict_module
from lucid_core.checkpoint import CheckpointError, save_model
from lucid_core.inference import cached_inference_model, parameter_signature, predict
from lucid_core.models import build_model
from lucid_core.results import Results


def _image() -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (3, 64, 80), dtype=torch.uint8, generator=generator)


def test_repeated_calls_reuse_the_prepared_copy_until_a_weight_changes() -> None:
    model = build_model("yolov8", "detect", "n", num_classes=3).eval()
    first, _ = cached_inference_model(model)
    again, _ = cached_inference_model(model)
    assert again is first
    explicit, mode = cached_inference_model(model, decode="nms")  # an explicit decode is its own entry
    assert mode == "nms" and cached_inference_model(model, decode="nms")[0] is explicit


def test_an_in_place_update_or_a_loaded_state_prepares_a_fresh_copy() -> None:
    model = build_model("yolo26", "detect", "n", num_classes=3).eval()
    before = parameter_signature(model)
    first, _ = cached_inference_model(model)
    with torch.no_grad():
        next(model.parameters()).add_(0.5)  # what an optimizer step does
    assert parameter_signature(model) != before
    second, _ = cached_inference_model(model)
    assert second is not first
    model.load_state_dict(model.state_dict())
    assert cached_inference_model(model)[0] is not second


def test_cached_predictions_equal_a_fresh_preparation() -> None:
    model = build_model("yolov8", "detect", "n", num_classes=3).eval()
    image = _image()
    (warm,) = predict(model, image, imgsz=64, conf=0.0)
    (again,) = predict(model, image, imgsz=64, conf=0.0)
    torch.testing.assert_close(again.detections.boxes, warm.detections.boxes, rtol=0, atol=0)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.01)
    (changed,) = predict(model, image, imgsz=64, conf=0.0)
    fresh = build_model("yolov8", "detect", "n", num_classes=3).eval()
    fresh.load_state_dict(model.state_dict())
    (reference,) = predict(fresh, image, imgsz=64, conf=0.0)
    torch.testing.assert_close(changed.detections.boxes, reference.detections.boxes, rtol=0, atol=0)
    torch.testing.assert_close(changed.detections.scores, reference.detections.scores, rtol=0, atol=0)


def test_replacing_a_parameter_or_a_submodule_changes_the_signature() -> None:
    model = build_model("yolov8", "detect", "n", num_classes=3).eval()
    first, _ = cached_inference_model(model)
    conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    conv.weight = torch.nn.Parameter(conv.weight.detach().clone())  # same values, a new tensor
    second, _ = cached_inference_model(model)
    assert second is not first
    parent, name = next((m, n) for m in model.modules() for n, c in m.named_children() if c is conv)
    setattr(
        parent,
        name,
        torch.nn.Conv2d(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            conv.padding,
            bias=conv.bias is not None,
        ),
    )
    assert cached_inference_model(model)[0] is not second


def test_the_signature_covers_every_parameter_and_buffer_once_per_owner() -> None:
    model = build_model("yolo26", "detect", "n", num_classes=3).eval()
    tensors = {id(t) for t in [*model.parameters(), *model.buffers()]}
    assert {entry[0] for entry in parameter_signature(model)} == tensors


def test_the_signature_walks_a_shared_or_cyclic_module_once() -> None:
    shared = torch.nn.Conv2d(3, 4, 3)
    outer = torch.nn.Sequential(shared, torch.nn.Sequential(shared))
    outer.add_module("loop", outer)  # a cycle: named_modules() tolerates it, so must the signature
    assert [entry[0] for entry in parameter_signature(outer)] == [id(shared.weight), id(shared.bias)]


def _counting_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    loads: list[str] = []
    real = predict_module.load

    def counted(path, **kwargs):  # type: ignore[no-untyped-def]
        loads.append(str(path))
        return real(path, **kwargs)

    monkeypatch.setattr(predict_module, "load", counted)
    monkeypatch.setattr(predict_module, "_LOADED", type(predict_module._LOADED)())
    return loads


def _saved(model: torch.nn.Module, path: Path) -> Path:
    save_model(model, path, names=["a", "b", "c"], imgsz=64)
    return path


def _setup(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], torch.Tensor, torch.nn.Module]:
    """An empty path cache whose loads are counted, the test image and a fresh yolov8n (3 classes)."""
    return _counting_loads(monkeypatch), _image(), build_model("yolov8", "detect", "n", num_classes=3).eval()


def _assert_same_detections(a: Results, b: Results) -> None:
    torch.testing.assert_close(a.detections.boxes, b.detections.boxes, rtol=0, atol=0)
    torch.testing.assert_close(a.detections.scores, b.detections.scores, rtol=0, atol=0)


def test_a_checkpoint_path_is_read_once_while_its_files_are_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads, image, model = _setup(monkeypatch)
    weights = _saved(model, tmp_path / "w")
    runs = [predict(weights, image, imgsz=64, conf=0.0)[0] for _ in range(3)]
    assert loads == [str(weights)]
    (direct,) = predict(model, image, imgsz=64, conf=0.0)
    for run in runs:
        _assert_same_detections(run, direct)
    # the stem and the .safetensors name the same checkpoint, each its own key: read once each
    predict(weights.with_suffix(".safetensors"), image, imgsz=64)
    predict(weights.with_suffix(".safetensors"), image, imgsz=64)
    assert len(loads) == 2


def test_a_rewritten_checkpoint_is_read_again_and_its_weights_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads, image, first = _setup(monkeypatch)
    weights = _saved(first, tmp_path / "w")
    predict(weights, image, imgsz=64, conf=0.0)
    torch.manual_seed(1)
    second = build_model("yolov8", "detect", "n", num_classes=3).eval()
    _saved(second, weights)  # save_model replaces the files atomically: new inodes
    (after,) = predict(weights, image, imgsz=64, conf=0.0)
    assert len(loads) == 2
    _assert_same_detections(after, predict(second, image, imgsz=64, conf=0.0)[0])


def test_only_the_most_recent_paths_stay_loaded_and_errors_are_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads, image, model = _setup(monkeypatch)
    paths = [_saved(model, tmp_path / f"w{i}") for i in range(predict_module.LOADED_PATHS_KEPT + 1)]
    for path in paths:
        predict(path, image, imgsz=64)
    assert len(predict_module._LOADED) == predict_module.LOADED_PATHS_KEPT
    predict(paths[-1], image, imgsz=64)  # still kept
    predict(paths[0], image, imgsz=64)  # the oldest was let go: read again
    assert loads == [str(p) for p in paths] + [str(paths[0])]
    missing = tmp_path / "absent"
    for _ in range(2):
        with pytest.raises(CheckpointError, match="absent"):
            predict(missing, image, imgsz=64)
    assert all("absent" not in key for key in predict_module._LOADED)


def test_a_run_directory_is_kept_by_the_files_of_its_best_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads, image, first = _setup(monkeypatch)
    _saved(first, tmp_path / "run" / "best")
    predict(tmp_path / "run", image, imgsz=64)
    predict(tmp_path / "run", image, imgsz=64)
    assert len(loads) == 1
    torch.manual_seed(1)
    second = build_model("yolov8", "detect", "n", num_classes=3).eval()
    _saved(second, tmp_path / "run" / "best")  # the run exports a new best: read again
    (after,) = predict(tmp_path / "run", image, imgsz=64, conf=0.0)
    assert len(loads) == 2
    _assert_same_detections(after, predict(second, image, imgsz=64, conf=0.0)[0])
