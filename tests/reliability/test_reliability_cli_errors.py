"""lucid_core.cli_errors: the shared error boundary and the output-overwrite guard (issue 13)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from lucid_core.cli_errors import OutputOverwriteError, UsageError, refuse_overwrite, run_cli


def test_known_errors_are_one_paragraph_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from lucid_core.checkpoint import CheckpointError

    def bad() -> int:
        raise CheckpointError("runs/x/best.json: checkpoint config not found\n  (second line)")

    assert run_cli("lucid-x", bad) == 2
    assert (
        capsys.readouterr().err
        == "lucid-x: error: runs/x/best.json: checkpoint config not found (second line)\n"
    )


def test_a_full_disk_names_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    def full() -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "runs/train/last.ckpt")

    assert run_cli("lucid-x", full) == 2
    err = capsys.readouterr().err
    assert "runs/train/last.ckpt" in err and "No space left" in err and "free disk space" in err


def test_an_unexpected_exception_keeps_its_traceback() -> None:
    def bug() -> int:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        run_cli("lucid-x", bug)
    with pytest.raises(OSError):  # an OS error that names no file of the user's is a bug too
        run_cli("lucid-x", lambda: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))


def test_an_output_never_replaces_an_input_or_a_checkpoint(tmp_path: Path) -> None:
    from lucid_core.checkpoint import save_model
    from lucid_core.models import build_model

    save_model(build_model(family="yolov8", task="detect", scale="n", num_classes=1), tmp_path / "best")
    for output in ("best.json", "best.safetensors", "sub/../best.json"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(OutputOverwriteError, match="input of the command"):
            refuse_overwrite("--output", tmp_path / output, [tmp_path / "best"])
    (tmp_path / "other.ckpt").write_bytes(b"x")
    with pytest.raises(OutputOverwriteError, match="existing checkpoint"):
        refuse_overwrite("--output", tmp_path / "other.ckpt", [])
    (tmp_path / "report.json").write_text('{"mAP50": 1}')
    refuse_overwrite(
        "--output", tmp_path / "report.json", [tmp_path / "best"]
    )  # an old report may be replaced
    assert issubclass(OutputOverwriteError, UsageError)


def test_a_failed_checkpoint_write_names_the_file_and_keeps_the_old_one(tmp_path: Path) -> None:
    from lucid_train.callbacks.artifacts import RunArtifacts
    from lucid_train.errors import ArtifactWriteError

    class FullDiskTrainer:
        is_global_zero = True

        def save_checkpoint(self, path: Path, weights_only: bool = False) -> None:
            Path(path).write_bytes(b"partial")
            raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")

    (tmp_path / "last.ckpt").write_bytes(b"previous")
    with pytest.raises(ArtifactWriteError, match=r"last\.ckpt") as info:
        RunArtifacts._save_checkpoint(FullDiskTrainer(), tmp_path / "last.ckpt")  # type: ignore[arg-type]
    assert "disk may be full" in str(info.value)
    assert (tmp_path / "last.ckpt").read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]  # no temporary left


def test_a_full_disk_without_a_file_name_is_still_a_users_problem(capsys: pytest.CaptureFixture[str]) -> None:
    def full() -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    assert run_cli("lucid-x", full) == 2
    assert "No space left on device" in capsys.readouterr().err
