"""save_model / load: bit-exact round trip, atomic files, clear errors for truncated or mismatched files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import safetensors.torch
import torch

from lucid_core.checkpoint import CheckpointError, checkpoint_paths, load, save_model
from lucid_core.models import YOLOModel, build_model


@pytest.fixture(scope="module")
def model() -> YOLOModel:
    torch.manual_seed(0)
    m = build_model("yolo26", "pose", "n", num_classes=2, kpt_shape=(5, 3))
    # make BN statistics non-trivial so that buffers are part of what the round trip must keep
    with torch.no_grad():
        for buf in m.buffers():
            if buf.is_floating_point():
                buf.uniform_(0.5, 1.5)
    return m.eval()


def _rewrite_config(config_path: Path, **changes: object) -> None:
    record = json.loads(config_path.read_text())
    for key, value in changes.items():
        if key == "num_classes":
            record["model"]["num_classes"] = value
        else:
            record[key] = value
    config_path.write_text(json.dumps(record))


def _resign(weights: Path, config_path: Path) -> None:
    """Update the stored hash/size after a deliberate edit of the weights (to reach the later checks)."""
    import hashlib

    record = json.loads(config_path.read_text())
    record["weights_sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    record["weights_bytes"] = weights.stat().st_size
    config_path.write_text(json.dumps(record))


def test_round_trip_is_bit_exact(model: YOLOModel, tmp_path: Path) -> None:
    weights = save_model(model, tmp_path / "best", names=["a", "b"], imgsz=320, extra={"epoch": 3})
    assert weights == tmp_path / "best.safetensors"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best.json",
        "best.safetensors",
    ]  # no temp files left
    ckpt = load(tmp_path / "best.json")
    loaded = ckpt.model
    assert isinstance(loaded, YOLOModel) and not loaded.training
    assert loaded.config == model.config
    assert (ckpt.names, ckpt.imgsz, ckpt.extra) == (["a", "b"], 320, {"epoch": 3})
    assert (ckpt.task, ckpt.family, ckpt.scale, ckpt.source_kind) == ("pose", "yolo26", "n", "lucid")
    assert ckpt.weights_path == weights
    ref, got = model.state_dict(), loaded.state_dict()
    assert ref.keys() == got.keys()
    for key in ref:
        assert ref[key].dtype == got[key].dtype and torch.equal(ref[key], got[key]), key
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(model(x), loaded(x))  # type: ignore[arg-type]
    record = json.loads((tmp_path / "best.json").read_text())
    assert (
        record["task"] == "pose"
        and record["kpt_shape"] == [5, 3]
        and record["versions"]["torch"] == torch.__version__
    )


def test_paths_accept_stem_weights_or_json(tmp_path: Path) -> None:
    expected = (tmp_path / "m.safetensors", tmp_path / "m.json")
    assert checkpoint_paths(tmp_path / "m") == expected
    assert checkpoint_paths(tmp_path / "m.safetensors") == expected
    assert checkpoint_paths(tmp_path / "m.json") == expected


def test_truncated_weights_name_the_file(model: YOLOModel, tmp_path: Path) -> None:
    weights = save_model(model, tmp_path / "w")
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"w\.safetensors.*truncated"):
        load(weights)
    # even with a re-signed config, the safetensors parser's failure is reported against the file
    _resign(weights, tmp_path / "w.json")
    with pytest.raises(CheckpointError, match=r"w\.safetensors: cannot read safetensors"):
        load(weights)


def test_modified_weights_fail_the_hash(model: YOLOModel, tmp_path: Path) -> None:
    weights = save_model(model, tmp_path / "w")
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"w\.safetensors: sha256 .* does not match"):
        load(weights)


def test_wrong_class_count_reports_the_shape_mismatch(model: YOLOModel, tmp_path: Path) -> None:
    save_model(model, tmp_path / "w")
    config = tmp_path / "w.json"
    _rewrite_config(config, num_classes=3)
    with pytest.raises(
        CheckpointError, match=r"w\.json: class count mismatch: 2 names but model\.num_classes = 3"
    ):
        load(config)
    _rewrite_config(config, names=["a", "b", "c"])
    with pytest.raises(CheckpointError, match=r"w\.safetensors: .*shape mismatch.*cv3.*file \(2,"):
        load(config)


def test_missing_and_unexpected_keys_are_listed(model: YOLOModel, tmp_path: Path) -> None:
    weights = save_model(model, tmp_path / "w")
    tensors = safetensors.torch.load_file(str(weights))
    dropped = sorted(tensors)[0]
    del tensors[dropped]
    tensors["bogus.weight"] = torch.zeros(1)
    safetensors.torch.save_file(tensors, str(weights))
    _resign(weights, tmp_path / "w.json")
    with pytest.raises(
        CheckpointError,
        match=rf"1 missing key\(s\) \['{dropped}'\].*1 unexpected key\(s\) \['bogus.weight'\]",
    ):
        load(weights)


def test_missing_config_and_bad_names(model: YOLOModel, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"nothere\.json: checkpoint config not found"):
        load(tmp_path / "nothere")
    with pytest.raises(ValueError, match="3 class names given for a model with 2 classes"):
        save_model(model, tmp_path / "w", names=["a", "b", "c"])
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"bad\.json: not valid JSON"):
        load(tmp_path / "bad.json")


def test_a_run_directory_loads_its_best_checkpoint(model: YOLOModel, tmp_path: Path) -> None:
    save_model(model, tmp_path / "run" / "best", names=["a", "b"], imgsz=96)
    (tmp_path / "run" / "last.ckpt").write_bytes(b"not read")
    ckpt = load(tmp_path / "run")
    assert ckpt.weights_path == tmp_path / "run" / "best.safetensors" and ckpt.imgsz == 96
    save_model(model, tmp_path / "run", names=["x", "y"], imgsz=64)  # a stem beside the folder wins
    assert load(tmp_path / "run").names == ["x", "y"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"empty: not a model lucid_core\.load reads; it reads a lucid"):
        load(tmp_path / "empty")


def test_other_kinds_of_file_name_the_path_and_what_is_supported(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"model\.onnx: an exported model \(\.onnx\).*reference \.pt"):
        load(tmp_path / "model.onnx")
    (tmp_path / "weights.bin").write_bytes(b"\0" * 16)
    with pytest.raises(CheckpointError, match=r"weights\.bin: not a model .*lucid checkpoint.*\.pt/\.pth"):
        load(tmp_path / "weights.bin")
    with pytest.raises(CheckpointError, match=r"last\.ckpt: a Lightning training checkpoint"):
        load(tmp_path / "last.ckpt")


def test_load_places_the_model_on_the_device(model: YOLOModel, tmp_path: Path) -> None:
    save_model(model, tmp_path / "w", names=["a", "b"])
    ckpt = load(tmp_path / "w", device="meta")
    assert {p.device.type for p in ckpt.model.parameters()} == {"meta"} and not ckpt.model.training
