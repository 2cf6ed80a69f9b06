"""Loading a checkpoint never executes code (issue 13): a planted malicious file on every command that takes a path.

Each malicious file is a ``torch.save`` zip whose pickle would create a marker file when unpickled unsafely; every
command must refuse it (exit status 2, one paragraph naming the file) and the marker must never appear. A URL to
the file, served from 127.0.0.1, is refused before anything is fetched (the server sees no request).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from lucid_train_testing import make_shapes
from reliability_testing import plant_malicious_checkpoint, serve_file_once_on_localhost


@pytest.fixture(scope="module")
def shapes_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shapes(tmp_path_factory.mktemp("safety-shapes"), n_train=2, n_val=2)


def _train(*args: str) -> int:
    from lucid_train.cli import main

    return main(list(args))


def _convert(*args: str) -> int:
    from lucid_core.convert_cli import main

    return main(list(args))


def _predict(*args: str) -> int:
    from lucid_core.predict_cli import main

    return main(list(args))


def _eval(*args: str) -> int:
    from lucid_train.eval.cli import main

    return main(list(args))


def _viz(*args: str) -> int:
    from lucid_viz.cli import main

    return main(list(args))


def _commands(evil: Path, data: Path, tmp: Path) -> list[tuple[str, Callable[..., int], list[str]]]:
    """(name, main, argv) of every command given the malicious file ``evil`` as its checkpoint path."""
    image = next((data.parent / "images" / "val").iterdir())
    fit = ["--data.root", str(data), "--data.workers", "0", "--trainer.default_root_dir", str(tmp / "run")]
    return [
        ("fit --ckpt_path", _train, ["fit", *fit, "--ckpt_path", str(evil)]),
        ("validate --ckpt_path", _train, ["validate", *fit, "--ckpt_path", str(evil)]),
        ("fit --model.weights", _train, ["fit", *fit, "--model.weights", str(evil)]),
        ("lucid-convert", _convert, [str(evil), str(tmp / "converted")]),
        (
            "lucid-predict",
            _predict,
            ["--weights", str(evil), "--source", str(image), "--output", str(tmp / "p")],
        ),
        ("lucid-eval", _eval, ["--weights", str(evil), "--data", str(data), "--output", str(tmp / "r.json")]),
        (
            "lucid-viz predict",
            _viz,
            ["predict", "--weights", str(evil), "--source", str(image), "-o", str(tmp / "v.png")],
        ),
    ]


@pytest.mark.parametrize("suffix", [".ckpt", ".pt"])
def test_a_malicious_checkpoint_is_refused_by_every_command_and_never_runs(
    suffix: str, shapes_yaml: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "PWNED"
    evil = plant_malicious_checkpoint(tmp_path / f"evil{suffix}", marker)
    for name, command, argv in _commands(evil, shapes_yaml, tmp_path):
        code = command(*argv)
        err = capfd.readouterr().err
        assert code == 2, f"{name}: exit {code}: {err}"
        assert not marker.exists(), f"{name}: the pickle's code ran"
        assert "Traceback" not in err and str(evil) in err, f"{name}: {err}"


def test_a_checkpoint_url_is_refused_before_anything_is_fetched(
    shapes_yaml: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "PWNED"
    evil = plant_malicious_checkpoint(tmp_path / "evil.ckpt", marker)
    fit = [
        "--data.root",
        str(shapes_yaml),
        "--data.workers",
        "0",
        "--trainer.default_root_dir",
        str(tmp_path / "r"),
    ]
    with serve_file_once_on_localhost(evil) as (url, requested):
        for argv in (
            ["fit", *fit, "--ckpt_path", url],
            ["validate", *fit, "--ckpt_path", url],
            ["fit", "--ckpt_path", url],  # only a checkpoint: the URL is refused, not looked up
            ["fit", *fit, "--model.weights", url],
        ):
            assert _train(*argv) == 2, argv
            err = capfd.readouterr().err
            assert "URL" in err and url in err and "Traceback" not in err, err
        assert requested == [] and not marker.exists()


def test_weights_only_false_is_refused_with_the_reason(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert _train("fit", "--weights_only", "false", "--ckpt_path", str(tmp_path / "x.ckpt")) == 2
    err = capfd.readouterr().err
    assert "--weights_only" in err and "weights_only=True" in err and "Traceback" not in err
