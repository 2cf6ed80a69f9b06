"""The one-paragraph error contract, table-tested (issue 13 acceptance).

Every row is a bad input to a console script: the command exits with status 2, prints no traceback, and its
``<prog>: error:`` paragraph names the offending file or flag. The default run calls each script's ``main`` in
this process (fast: the console scripts call exactly these functions); the ``slow`` tests run every row through
the installed console scripts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from lucid_train_testing import make_shapes


@dataclass(frozen=True)
class Case:
    name: str
    prog: str
    argv: Callable[[dict[str, Path]], list[str]]
    names: Callable[[dict[str, Path]], str]  # what the message must name


def _fit(paths: dict[str, Path], data: str = "data", *extra: str) -> list[str]:
    return [
        "fit",
        "--data.root",
        str(paths[data]),
        "--data.workers",
        "0",
        "--trainer.default_root_dir",
        str(paths["runs"] / "r"),
        *extra,
    ]


CASES = [
    Case("bad labels", "lucid-train", lambda p: _fit(p, "bad_labels"), lambda p: str(p["bad_label_file"])),
    Case("missing val split", "lucid-train", lambda p: _fit(p, "no_val"), lambda p: "'val'"),
    Case(
        "missing labels folder",
        "lucid-train",
        lambda p: _fit(p, "no_labels"),
        lambda p: str(p["no_labels_dir"]),
    ),
    Case(
        "scale z", "lucid-train", lambda p: _fit(p, "data", "--model.scale", "z"), lambda p: "--model.scale z"
    ),
    Case(
        "family yolov99",
        "lucid-train",
        lambda p: _fit(p, "data", "--model.family", "yolov99"),
        lambda p: "yolov99",
    ),
    Case(
        "workers -1",
        "lucid-train",
        lambda p: _fit(p, "data", "--data.workers", "-1"),
        lambda p: "--data.workers",
    ),
    Case("imgsz 0", "lucid-train", lambda p: _fit(p, "data", "--data.imgsz", "0"), lambda p: "--data.imgsz"),
    Case(
        "epochs -1",
        "lucid-train",
        lambda p: _fit(p, "data", "--trainer.max_epochs", "-1"),
        lambda p: "--trainer.max_epochs",
    ),
    Case(
        "corrupt --model.weights",
        "lucid-train",
        lambda p: _fit(p, "data", "--model.weights", str(p["corrupt_weights"])),
        lambda p: str(p["corrupt_weights"]),
    ),
    Case(
        "corrupt --ckpt_path",
        "lucid-train",
        lambda p: _fit(p, "data", "--ckpt_path", str(p["corrupt_ckpt"])),
        lambda p: str(p["corrupt_ckpt"]),
    ),
    Case(
        "unwritable run directory",
        "lucid-train",
        lambda p: [*_fit(p, "data")[:-1], str(p["a_file"] / "run")],
        lambda p: str(p["a_file"]),
    ),
    Case(
        "corrupt .pt to convert",
        "lucid-convert",
        lambda p: [str(p["corrupt_pt"]), str(p["runs"] / "c")],
        lambda p: str(p["corrupt_pt"]),
    ),
    Case(
        "eval report onto its checkpoint",
        "lucid-eval",
        lambda p: [
            "--weights",
            str(p["best"]),
            "--data",
            str(p["data"]),
            "--output",
            str(p["best"]) + ".json",
        ],
        lambda p: str(p["best"]) + ".json",
    ),
    Case(
        "predict with a reference .pt",
        "lucid-predict",
        lambda p: [
            "--weights",
            str(p["corrupt_pt"]),
            "--source",
            str(p["image"]),
            "--output",
            str(p["runs"] / "p"),
        ],
        lambda p: str(p["corrupt_pt"]),
    ),
    Case(
        "check a missing dataset",
        "lucid-data",
        lambda p: ["check", str(p["runs"] / "nope.yaml")],
        lambda p: "nope.yaml",
    ),
    Case(
        "curves of a missing run",
        "lucid-viz",
        lambda p: ["curves", str(p["runs"] / "nope")],
        lambda p: "nope",
    ),
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every bad input of :data:`CASES`, built once."""
    import shutil

    from lucid_core.checkpoint import save_model
    from lucid_core.models import build_model

    root = tmp_path_factory.mktemp("contract")
    data = make_shapes(root / "shapes", n_train=2, n_val=2)
    bad = make_shapes(root / "bad", n_train=2, n_val=2)
    bad_label = sorted((bad.parent / "labels" / "train").glob("*.txt"))[0]
    bad_label.write_text("0 0.5 0.5 zero 0.2\n")
    no_val = data.parent / "no_val.yaml"
    no_val.write_text(data.read_text().replace("val:", "unused_val:"))
    no_labels = make_shapes(root / "nolabels", n_train=2, n_val=2)
    shutil.rmtree(no_labels.parent / "labels")
    corrupt_weights = root / "corrupt.safetensors"
    save_model(build_model(family="yolov8", task="detect", scale="n", num_classes=3), corrupt_weights)
    corrupt_weights.write_bytes(corrupt_weights.read_bytes()[:100])
    (root / "corrupt.ckpt").write_bytes(b"PK\x03\x04 truncated")
    (root / "corrupt.pt").write_bytes(b"\x80\x02 not a zip")
    (root / "a_file").write_text("a file, not a folder\n")
    save_model(build_model(family="yolov8", task="detect", scale="n", num_classes=3), root / "best")
    return {
        "data": data,
        "bad_labels": bad,
        "bad_label_file": bad_label,
        "no_val": no_val,
        "no_labels": no_labels,
        "no_labels_dir": no_labels.parent / "labels" / "train",
        "corrupt_weights": corrupt_weights,
        "corrupt_ckpt": root / "corrupt.ckpt",
        "corrupt_pt": root / "corrupt.pt",
        "a_file": root / "a_file",
        "best": root / "best",
        "image": next((data.parent / "images" / "val").iterdir()),
        "runs": root / "runs",
    }


def _main_of(prog: str) -> Callable[[list[str]], int]:
    if prog == "lucid-train":
        from lucid_train.cli import main
    elif prog == "lucid-eval":
        from lucid_train.eval.cli import main
    elif prog == "lucid-convert":
        from lucid_core.convert_cli import main
    elif prog == "lucid-predict":
        from lucid_core.predict_cli import main
    elif prog == "lucid-data":
        from lucid_data.cli import main
    else:
        from lucid_viz.cli import main
    return main


def _check(case: Case, paths: dict[str, Path], code: int, err: str) -> None:
    lines = [line for line in err.splitlines() if line.startswith(f"{case.prog}: error:")]
    assert code == 2, f"{case.name}: exit {code}; stderr: {err}"
    assert "Traceback" not in err, f"{case.name}: {err}"
    assert len(lines) == 1, f"{case.name}: expected one '{case.prog}: error:' paragraph; stderr: {err}"
    assert case.names(paths) in lines[0], (
        f"{case.name}: the message does not name {case.names(paths)!r}: {lines[0]}"
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_paragraph_and_exit_2(
    case: Case, paths: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    code = _main_of(case.prog)(case.argv(paths))
    _check(case, paths, code, capfd.readouterr().err)


def _run_console_script(case: Case, paths: dict[str, Path]) -> tuple[int, str]:
    script = Path(sys.executable).with_name(case.prog)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [str(script), *case.argv(paths)], capture_output=True, text=True, env=env, timeout=300
    )
    return done.returncode, done.stderr


@pytest.mark.slow
def test_the_console_script_itself_keeps_the_contract(paths: dict[str, Path]) -> None:
    case = next(c for c in CASES if c.prog == "lucid-convert")
    _check(case, paths, *_run_console_script(case, paths))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_console_script_keeps_the_contract(case: Case, paths: dict[str, Path]) -> None:
    _check(case, paths, *_run_console_script(case, paths))


def test_an_image_size_off_the_stride_is_rounded_up_with_a_note(
    paths: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    from lucid_train.validation import validate_settings

    config = {"model": {"family": "yolov8", "scale": "n"}, "data": {"imgsz": 65}, "trainer": {}}
    validate_settings(config)
    assert config["data"]["imgsz"] == 96 and "--data.imgsz 65" in capfd.readouterr().err
