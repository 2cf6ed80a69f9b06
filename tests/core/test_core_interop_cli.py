"""``lucid-convert``: reference checkpoint → safetensors + JSON that ``lucid_core.load`` reads back identically."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from lucid_core.checkpoint import checkpoint_paths, load
from lucid_core.convert_cli import main
from lucid_core.interop import import_checkpoint


@pytest.mark.shared
def test_convert_writes_a_checkpoint_that_loads_back_identically(
    tmp_path: Path, shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = shared_dir / "weights" / "yolov8n-obb-taufibrils.pt"
    destination = tmp_path / "out" / "fibrils"
    assert main([str(source), str(destination)]) == 0
    assert "yolov8n obb" in capsys.readouterr().out
    weights, config_path = checkpoint_paths(destination)
    assert weights.is_file() and config_path.is_file()
    assert not [p for p in weights.parent.iterdir() if p.name.startswith(".")]  # no temporary files left

    imported, config = import_checkpoint(source)
    loaded = load(destination).model
    fixture = torch.load(
        shared_dir / "fixtures" / "import_yolov8n-obb-taufibrils.pt", weights_only=True, map_location="cpu"
    )
    for case in fixture["cases"].values():
        x = case["input_uint8"].float() / 255
        with torch.no_grad():
            assert torch.equal(loaded(x), imported(x))

    record = load(destination)
    assert record.names == config.names and record.imgsz == config.imgsz
    stored: dict[str, Any] = json.loads(config_path.read_text())
    assert stored["extra"]["imported_from"]["sha256"] == config.sha256
    assert stored["extra"]["imported_from"]["head_class"] == config.head_class


class _SystemCall:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (self.command,))


def test_convert_refuses_a_malicious_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sentinel = tmp_path / "sentinel"
    source = tmp_path / "evil.pt"
    torch.save({"model": _SystemCall(f"touch {sentinel}")}, source)
    assert main([str(source), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{os.system.__module__}.system" in err and "evil.pt" in err
    assert not sentinel.exists()
    assert not list(tmp_path.glob("out*"))


def test_convert_reports_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "absent.pt"), str(tmp_path / "out")]) == 2
    assert "absent.pt" in capsys.readouterr().err
