"""Atomic writes: the target is replaced whole or not at all, with ordinary permissions."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from lucid_core.atomic import atomic_path, atomic_write_json, atomic_write_text


def test_write_replaces_whole_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "report.json"
    atomic_write_json(target, {"a": 1})
    atomic_write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_failure_keeps_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "last.ckpt"
    atomic_write_text(target, "good")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


def test_permissions_follow_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        target = atomic_write_text(tmp_path / "x.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
