"""The best export (``best.safetensors`` + ``best.json``) is one atomic unit; stale temporaries are removed (issue 13).

A crash is simulated at every file rename ``save_model`` makes: after each, the pair loads as either the old or
the new model, and :func:`repair_checkpoint` leaves a consistent pair with no pending file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch


class _Killed(BaseException):
    """Raised in place of the N-th rename: the writer dies there."""


def _model(seed: int) -> torch.nn.Module:
    from lucid_core.models import build_model

    torch.manual_seed(seed)
    return build_model(family="yolov8", task="detect", scale="n", num_classes=2)


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sb = b.state_dict()
    return all(torch.equal(v, sb[k]) for k, v in a.state_dict().items())


def _renames_in_one_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    from lucid_core.checkpoint import save_model

    count = 0
    real = os.replace

    def counting(src: object, dst: object) -> None:
        nonlocal count
        count += 1
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", counting)
    save_model(_model(0), tmp_path / "count" / "best")
    monkeypatch.setattr(os, "replace", real)
    return count


def test_a_crash_at_any_rename_leaves_a_loadable_best(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lucid_core.checkpoint import (
        load_checkpoint,
        pending_weights_path,
        repair_checkpoint,
        save_model,
    )

    old, new = _model(1), _model(2)
    renames = _renames_in_one_save(tmp_path, monkeypatch)
    assert renames >= 2
    real = os.replace
    for crash_at in range(1, renames + 1):
        stem = tmp_path / f"crash{crash_at}" / "best"
        save_model(old, stem)
        calls = 0

        def dying(src: object, dst: object, crash_at: int = crash_at) -> None:
            nonlocal calls
            calls += 1
            if calls == crash_at:
                raise _Killed
            real(src, dst)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "replace", dying)
        with pytest.raises(_Killed):
            save_model(new, stem)
        monkeypatch.setattr(os, "replace", real)

        loaded = load_checkpoint(stem).model
        assert _same(loaded, old) or _same(loaded, new), f"crash at rename {crash_at}: neither old nor new"
        repair_checkpoint(stem)
        assert not pending_weights_path(stem.with_suffix(".safetensors")).exists()
        repaired = load_checkpoint(stem).model
        assert _same(repaired, loaded), f"crash at rename {crash_at}: repair changed the model"


def test_stale_temporaries_of_our_own_naming_are_removed_and_nothing_else(tmp_path: Path) -> None:
    from lucid_core.atomic import atomic_path
    from lucid_core.checkpoint import remove_stale_temporaries

    with atomic_path(tmp_path / "last.ckpt") as tmp:  # the naming atomic_path really uses
        ours = tmp.name
    stale = [
        tmp_path / ours,
        tmp_path / ".best.safetensors.pending.k3j_9x0a.tmp",
        tmp_path / ".metrics.csv.abcd1234.tmp",
    ]
    for path in stale:
        path.write_bytes(b"x" * 10)
    kept = [
        tmp_path / "notes.tmp",
        tmp_path / ".hidden.tmp",
        tmp_path / "last.ckpt",
        tmp_path / ".x.TOOLONGNAME.tmp",
    ]
    for path in kept:
        path.write_bytes(b"keep")
    removed = remove_stale_temporaries(tmp_path)
    assert sorted(removed) == sorted(stale)
    assert all(path.exists() for path in kept) and not any(path.exists() for path in stale)
