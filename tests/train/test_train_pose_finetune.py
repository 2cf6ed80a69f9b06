"""Pose fine-tuning (issue 16, "Fine-tuning"): ``lucid-train fit --model.task pose --model.weights <pose weights>``.

The head is re-initialised only where the class count differs; a keypoint layout (``kpt_shape``) that differs from
the weights' is a one-paragraph setup error. Fast cases use tiny lucid checkpoints written here; the shared cases use
the real imported ``weights/yolo11n-pose.pt`` and ``data/coco8-pose`` (the CLI end to end is ``slow``).
"""

from __future__ import annotations

import csv
import functools
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from lucid_train_testing import tiny_cli_args

from lucid_train.cli import main
from lucid_train.errors import TrainingSetupError

POSE_WEIGHTS = Path("weights") / "yolo11n-pose.pt"
COCO8_POSE = Path("data") / "coco8-pose" / "coco8-pose.yaml"


def _pose_checkpoint(
    tmp_path: Path, *, num_classes: int, kpt_shape: tuple[int, int]
) -> tuple[Path, dict[str, torch.Tensor]]:
    """A tiny lucid pose checkpoint written here: (its path, its tensors)."""
    from lucid_core.checkpoint import save_model
    from lucid_core.models import build_model

    torch.manual_seed(0)
    model = build_model(family="yolo11", task="pose", scale="n", num_classes=num_classes, kpt_shape=kpt_shape)
    path = tmp_path / f"pose-nc{num_classes}-k{kpt_shape[0]}"
    save_model(model, path)
    return path.with_suffix(".safetensors"), {k: v.detach().clone() for k, v in model.state_dict().items()}


def _pose_module(weights: Path, *, num_classes: int, kpt_shape: list[int] | None) -> Any:
    from lucid_train.module import YOLOLitModule

    options = {"kpt_shape": kpt_shape} if kpt_shape is not None else {}
    return YOLOLitModule(task="pose", num_classes=num_classes, weights=str(weights), task_options=options)


@functools.lru_cache(maxsize=4)
def _loaded(weights: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The weights' stored config and own tensors (loaded with their own class count and keypoints), once."""
    from lucid_core.checkpoint import load_for_training

    config = dict(load_for_training(weights, num_classes=1).source_config)
    start = load_for_training(weights, num_classes=int(config["num_classes"]))
    return config, {k: v.detach().clone() for k, v in start.model.state_dict().items()}


def _source_state(weights: Path) -> dict[str, torch.Tensor]:
    return _loaded(weights)[1]


def _stored_config(weights: Path) -> dict[str, Any]:
    return _loaded(weights)[0]


def _assert_only_class_layers_reinitialised(module: Any, source: dict[str, torch.Tensor]) -> None:
    """Every tensor equals the weights' except those of the head's class-count-dependent layers."""
    loaded = module.model.state_dict()
    differing = sorted(k for k, v in loaded.items() if k not in source or v.shape != source[k].shape)
    assert differing, "a class count change re-initialises the class-dependent head layers"
    changed_modules = {k.rpartition(".")[0] for k in differing}
    assert all(int(v.shape[0]) == int(module.model.num_classes) for k, v in loaded.items() if k in differing)
    kept = [k for k in loaded if k not in differing]
    assert all(torch.equal(loaded[k], source[k]) for k in kept)
    head = max(int(k.split(".")[1]) for k in loaded)
    assert all(name.startswith(f"layers.{head}.") for name in changed_modules)
    # the keypoint and box branches are the weights' own
    assert not any(".kpt" in name or "keypoint" in name for name in changed_modules), changed_modules


def test_pose_weights_with_the_same_layout_load_unchanged(tmp_path: Path) -> None:
    weights, source = _pose_checkpoint(tmp_path, num_classes=1, kpt_shape=(5, 3))
    module = _pose_module(weights, num_classes=1, kpt_shape=[5, 3])
    assert module.model.training and tuple(module.model.head.kpt_shape) == (5, 3)
    loaded = module.model.state_dict()
    assert loaded.keys() == source.keys() and all(torch.equal(loaded[k], source[k]) for k in source)


def test_pose_weights_onto_another_class_count_reinitialise_only_the_class_layers(tmp_path: Path) -> None:
    weights, source = _pose_checkpoint(tmp_path, num_classes=1, kpt_shape=(5, 3))
    module = _pose_module(weights, num_classes=3, kpt_shape=[5, 3])
    assert int(module.model.num_classes) == 3 and tuple(module.model.head.kpt_shape) == (5, 3)
    _assert_only_class_layers_reinitialised(module, source)


@pytest.mark.parametrize("kpt_shape", [[17, 3], [5, 2]])
def test_pose_weights_onto_another_kpt_shape_are_a_clear_error(kpt_shape: list[int], tmp_path: Path) -> None:
    weights, _ = _pose_checkpoint(tmp_path, num_classes=1, kpt_shape=(5, 3))
    with pytest.raises(TrainingSetupError) as caught:
        _pose_module(weights, num_classes=1, kpt_shape=kpt_shape)
    message = str(caught.value)
    assert str(weights) in message and "\n" not in message
    assert "kpt_shape [5, 3]" in message and f"kpt_shape is {kpt_shape}" in message


@pytest.mark.shared
def test_cli_refuses_the_imported_pose_weights_on_a_dataset_with_other_keypoints(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real YOLO11n-pose (its kpt_shape read from the checkpoint) onto synthetic pose shapes (their own YAML
    kpt_shape): ``lucid-train fit`` exits 2 with one paragraph naming the weights and both layouts."""
    from lucid_data.synth import synthesize

    weights = shared_dir / POSE_WEIGHTS
    if not weights.is_file():
        pytest.skip(f"needs {weights}")
    data_yaml = Path(synthesize("pose", tmp_path / "data", n_train=2, n_val=1, imgsz=64, num_classes=1))
    data_kpt = [int(v) for v in yaml.safe_load(data_yaml.read_text())["kpt_shape"]]
    stored_kpt = [int(v) for v in _stored_config(weights)["kpt_shape"]]
    if data_kpt == stored_kpt:
        pytest.skip(f"the synthetic pose data has the weights' kpt_shape {stored_kpt}")
    code = main(
        [
            "fit",
            "--model.task",
            "pose",
            "--model.weights",
            str(weights),
            "--data.root",
            str(data_yaml),
            "--data.workers",
            "0",
            "--trainer.accelerator",
            "cpu",
            "--trainer.default_root_dir",
            str(tmp_path / "run"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert str(weights) in err and "\n" not in err
    assert f"kpt_shape {stored_kpt}" in err and f"kpt_shape is {data_kpt}" in err


def _coco8_pose_with_classes(shared_dir: Path, tmp_path: Path, num_classes: int) -> Path:
    """coco8-pose's YAML with ``num_classes`` names (its labels use class 0), pointing at the shared images."""
    source = shared_dir / COCO8_POSE
    config = yaml.safe_load(source.read_text())
    config["path"] = str(source.parent)
    config["names"] = {i: config["names"].get(i, f"extra{i}") for i in range(num_classes)}
    target = tmp_path / f"coco8-pose-{num_classes}.yaml"
    target.write_text(yaml.safe_dump(config))
    return target


@pytest.mark.shared
def test_imported_pose_weights_onto_more_classes_reinitialise_only_the_class_layers(
    shared_dir: Path, tmp_path: Path
) -> None:
    from lucid_train.datamodule import YOLODataModule

    weights = shared_dir / POSE_WEIGHTS
    if not weights.is_file() or not (shared_dir / COCO8_POSE).is_file():
        pytest.skip(f"needs {weights} and {shared_dir / COCO8_POSE}")
    stored = _stored_config(weights)
    data_yaml = _coco8_pose_with_classes(shared_dir, tmp_path, int(stored["num_classes"]) + 1)
    data = YOLODataModule(root=str(data_yaml), imgsz=64, workers=0, task="pose")
    module = _pose_module(weights, num_classes=data.num_classes, kpt_shape=data.task_options["kpt_shape"])
    assert int(module.model.num_classes) == data.num_classes
    assert list(module.model.head.kpt_shape) == [int(v) for v in stored["kpt_shape"]]
    _assert_only_class_layers_reinitialised(module, _source_state(weights))


@pytest.mark.slow
@pytest.mark.shared
def test_cli_fine_tunes_the_imported_pose_weights_on_coco8_pose(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The common real workflow end to end: one epoch from the imported checkpoint, nothing re-initialised (the
    class count and keypoints match), finite losses, box and pose metrics, best weights that keep the keypoints."""
    from lucid_core.checkpoint import load_checkpoint

    weights, data_yaml = shared_dir / POSE_WEIGHTS, shared_dir / COCO8_POSE
    if not weights.is_file() or not data_yaml.is_file():
        pytest.skip(f"needs {weights} and {data_yaml}")
    run = tmp_path / "run"
    extra = [
        "--model.task",
        "pose",
        "--model.weights",
        str(weights),
        "--data.imgsz",
        "160",
        "--data.batch_size",
        "2",
    ]
    code = main(
        ["fit", *tiny_cli_args(data_yaml, run, *extra, "--optimizer.name", "SGD", "--optimizer.lr0", "0.002")]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "re-initialised" not in captured.out + captured.err
    with (run / "metrics.csv").open(newline="") as handle:
        epochs = list(csv.DictReader(handle))
    assert len(epochs) == 1
    for key in ("metrics/mAP50-95", "metrics/pose/mAP50-95", "metrics/fitness"):
        assert 0.0 <= float(epochs[0][key]) <= 2.0, (key, epochs[0])
    loss_keys = [k for k in epochs[0] if k.startswith("train/") and k.endswith("_loss")]
    assert loss_keys and all(math.isfinite(float(epochs[0][k])) for k in loss_keys)
    best = load_checkpoint(run / "best.safetensors")
    stored = _stored_config(weights)
    assert best.model.task == "pose" and list(best.model.kpt_shape) == [int(v) for v in stored["kpt_shape"]]
    assert int(best.model.num_classes) == int(stored["num_classes"])
    source = _source_state(weights)
    trained = best.model.state_dict()
    assert trained.keys() == source.keys()
    moved = [k for k in source if source[k].is_floating_point() and not torch.equal(source[k], trained[k])]
    assert len(moved) > len(source) // 2, f"only {len(moved)} of {len(source)} tensors moved"
    assert all(bool(torch.isfinite(v).all()) for v in trained.values() if v.is_floating_point())
