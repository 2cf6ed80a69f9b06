"""Every notebook source runs top to bottom through a real Jupyter kernel under the fast contract (issue 20).

``LUCID_NOTEBOOK_FAST=1`` shrinks each notebook to a probe (tiny data, 1 epoch, a few batches). The figures a
notebook displays must be real pictures (decodable PNGs that are not one flat colour). A planted broken copy
(a renamed library call) must fail, so a notebook that rots fails ``make gate``; ``.ipynb`` files are build
products and never tracked.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from notebook_runner import REPO, NotebookFailed, execute_notebook, notebook_sources
from PIL import Image

SOURCES = notebook_sources()
EXPECTED = {"demo_detect", "demo_segment", "demo_pose", "demo_obb", "development_gates"}


def _displayed_pngs(notebook: Path) -> list[np.ndarray]:
    cells = json.loads(notebook.read_text())["cells"]
    images = []
    for cell in cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get("image/png")
            if data:
                raw = base64.b64decode("".join(data) if isinstance(data, list) else data)
                images.append(np.asarray(Image.open(io.BytesIO(raw)).convert("RGB")))
    return images


def _error_outputs(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text())["cells"]
    return [
        f"{o.get('ename')}: {o.get('evalue')}"
        for cell in cells
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]


def test_every_expected_notebook_source_exists() -> None:
    assert {p.stem for p in SOURCES} >= EXPECTED


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_notebook_runs_in_the_fast_contract(source: Path, tmp_path: Path) -> None:
    notebook = execute_notebook(source, tmp_path / f"{source.stem}.ipynb", fast=True)
    assert _error_outputs(notebook) == []
    if source.stem.startswith("demo_"):
        images = _displayed_pngs(notebook)
        assert images, f"{source.name} displayed no figure"
        for image in images:
            assert image.size > 0 and float(image.reshape(-1, 3).std(0).max()) > 1.0, "a blank figure"


def test_a_planted_broken_notebook_fails(tmp_path: Path) -> None:
    source = next(p for p in SOURCES if p.stem == "demo_detect")
    broken = tmp_path / "demo_broken.py"
    text = source.read_text()
    assert "lucid_data.synthesize(" in text
    broken.write_text(text.replace("lucid_data.synthesize(", "lucid_data.synthesise_renamed("))
    with pytest.raises(NotebookFailed, match="synthesise_renamed"):
        execute_notebook(broken, tmp_path / "demo_broken.ipynb", fast=True)


def test_no_notebook_build_product_is_tracked() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        ["git", "ls-files", "*.ipynb"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked == [], f"tracked .ipynb files (build products of `make notebooks`): {tracked}"
    assert "*.ipynb" in (REPO / ".gitignore").read_text().split()
