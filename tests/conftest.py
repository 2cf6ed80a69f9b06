"""Test-suite wiring: markers `gpu`, `slow`, `shared` and the location of ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("LUCID_SHARED_DIR", REPO_ROOT.parent / "shared"))


def _has_cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # pragma: no cover - torch is a hard dependency
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_shared = pytest.mark.skip(reason=f"needs ../shared (looked for {SHARED_DIR})")
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    has_shared = SHARED_DIR.is_dir()
    has_cuda = None
    for item in items:
        if "shared" in item.keywords and not has_shared:
            item.add_marker(skip_shared)
        if "gpu" in item.keywords:
            if has_cuda is None:
                has_cuda = _has_cuda()
            if not has_cuda:
                item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """Path of ../shared; skips the test when it is absent (mark such tests `shared` too)."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"needs ../shared (looked for {SHARED_DIR})")
    return SHARED_DIR


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
