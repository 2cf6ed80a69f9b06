"""`pip install lucid-core` gives inference with no Lightning, plotting or COCO tooling (issue #2 acceptance)."""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = ("lightning", "pytorch-lightning", "matplotlib", "pycocotools", "faster-coco-eval", "triton")


@pytest.fixture(scope="module")
def core_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [uv, "build", "--package", "lucid-core", "--wheel", "-o", str(out)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("lucid_core-*.whl")
    return wheel


def test_core_wheel_requires_no_heavy_tiers(core_wheel: Path) -> None:
    with zipfile.ZipFile(core_wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(zf.read(meta_name).decode())
        names = zf.namelist()
    requires = [r.split(";")[0].strip().lower() for r in meta.get_all("Requires-Dist") or []]
    assert requires, "lucid-core must declare torch & co."
    for req in requires:
        assert not req.startswith(FORBIDDEN), f"lucid-core wheel requires {req}"
    assert any(n.endswith("lucid_core/py.typed") for n in names)


def test_core_wheel_imports_in_fresh_venv(core_wheel: Path, tmp_path: Path) -> None:
    uv = shutil.which("uv")
    assert uv is not None
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {**os.environ, "UV_LINK_MODE": os.environ.get("UV_LINK_MODE", "hardlink")}
    subprocess.run([uv, "pip", "install", "-q", "--python", str(py), str(core_wheel)], check=True, env=env)
    code = (
        "import sys, lucid_core\n"
        "import lucid_core.geometry\n"
        "bad = [m for m in ('lightning', 'matplotlib', 'pycocotools', 'faster_coco_eval', 'lucid_train')"
        " if m in sys.modules]\n"
        "assert not bad, bad\n"
        "for m in ('lightning', 'matplotlib', 'pycocotools', 'faster_coco_eval'):\n"
        "    try:\n"
        "        __import__(m)\n"
        "    except ImportError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit(m + ' is installed in the core-only venv')\n"
        "import numpy as np\n"
        "from lucid_core.models import build_model\n"
        "from lucid_core.inference import predict\n"
        "model = build_model('yolo26', 'detect', 'n', num_classes=3)\n"
        "det = predict(model, [np.full((50, 70, 3), 114, np.uint8)], imgsz=64, conf=0.0)[0].detections\n"
        "assert det.boxes.shape[1] == 4 and bool((det.boxes[:, 2] <= 70).all())\n"
        "bad = [m for m in ('lightning', 'matplotlib', 'pycocotools', 'faster_coco_eval') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "print(lucid_core.__version__)\n"
    )
    res = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "0.1.0"
