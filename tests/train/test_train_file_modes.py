"""Every file a run writes has the ordinary permissions (``0o666 & ~umask``), not ``mkstemp``'s ``0o600``.

The run directory's files go through ``lucid_core.atomic`` (temporary name + ``os.replace``), which gives the final
file the mode an ordinary ``open`` would; so does the cached synthetic dataset (its marker and its folder).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from lucid_train_testing import make_shapes, tiny_data, tiny_module, tiny_trainer


@pytest.fixture
def umask_022() -> Iterator[int]:
    previous = os.umask(0o022)
    try:
        yield 0o022
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_run_directory_files_have_ordinary_permissions(umask_022: int, tmp_path: Path) -> None:
    data = tiny_data(make_shapes(tmp_path / "shapes", n_train=4, n_val=2), batch_size=2)
    run = tmp_path / "run"
    trainer = tiny_trainer(run, max_epochs=1, limit_train_batches=1)
    trainer.fit(tiny_module(data), datamodule=data)
    written = {p.name: _mode(p) for p in run.iterdir() if p.is_file()}
    expected = {"last.ckpt", "best.ckpt", "metrics.csv", "metrics.jsonl", "optimizer.json", "summary.txt"}
    assert expected <= set(written), sorted(written)
    assert {name: mode for name, mode in written.items() if mode != 0o666 & ~umask_022} == {}
    assert not [p.name for p in run.iterdir() if p.name.startswith(".")], "temporary files left behind"


def test_cached_synthetic_dataset_has_ordinary_permissions(umask_022: int, tmp_path: Path) -> None:
    from lucid_train.datamodule import SynthConfig, shapes_dataset

    yaml_path = shapes_dataset(SynthConfig(n_train=2, n_val=1, imgsz=32), cache_dir=tmp_path)
    dataset_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    assert yaml_path.is_file() and yaml_path.is_relative_to(dataset_dir)
    assert _mode(dataset_dir / "lucid-synth.json") == 0o666 & ~umask_022
    assert _mode(dataset_dir) == 0o777 & ~umask_022
