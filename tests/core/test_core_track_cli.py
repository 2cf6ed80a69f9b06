"""``lucid-track``: MOTChallenge detections in, MOTChallenge results out; malformed files named with the line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lucid_core.track.mot_io import MotFormatError, read_mot_file
from lucid_core.track_cli import main, track_detection_file


def write_dets(path: Path, frames: int = 12) -> Path:
    lines = []
    for f in range(1, frames + 1):
        lines.append(f"{f},-1,{100 + 3 * f:.2f},50.00,40.00,80.00,0.9000")
        lines.append(f"{f},-1,400.00,{60 + 2 * f:.2f},30.00,70.00,0.8000")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("tracker", ["bytetrack", "botsort"])
def test_track_detection_file_writes_mot_results(tmp_path: Path, tracker: str) -> None:
    dets = write_dets(tmp_path / "dets.txt")
    summary = track_detection_file(dets, tmp_path / "out" / "res.txt", tracker=tracker)
    rows = np.loadtxt(summary.out, delimiter=",")
    assert rows.shape == (24, 10)
    assert (summary.frames, summary.detections, summary.boxes, summary.tracks) == (12, 24, 24, 2)
    assert set(rows[:, 1]) == {1.0, 2.0}
    assert (rows[:, 7:] == -1).all()
    np.testing.assert_allclose(
        rows[rows[:, 1] == 1][:, 2], 100 + 3 * np.arange(1, 13), atol=1.0
    )  # filter lag


def test_frames_without_detections_age_tracks(tmp_path: Path) -> None:
    dets = tmp_path / "dets.txt"
    rows = [f"{f},-1,{100 + 2 * f},50,40,80,0.9" for f in list(range(1, 6)) + list(range(12, 16))]
    dets.write_text("\n".join(rows) + "\n")
    summary = track_detection_file(dets, tmp_path / "res.txt")
    out = np.loadtxt(summary.out, delimiter=",")
    assert summary.frames == 15 and set(out[:, 1]) == {1.0}
    assert sorted(set(out[:, 0].astype(int))) == [1, 2, 3, 4, 5, 12, 13, 14, 15]


def test_wrong_column_count_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dets = write_dets(tmp_path / "dets.txt", frames=3)
    dets.write_text(dets.read_text() + "4,-1,10,20,30\n")
    with pytest.raises(MotFormatError, match=r"dets\.txt line 7: expected at least 7 columns"):
        read_mot_file(dets)
    code = main(["--dets", str(dets), "--out", str(tmp_path / "res.txt")])
    err = capsys.readouterr().err
    assert code == 2 and "lucid-track: error:" in err and "line 7" in err and "got 5" in err
    assert not (tmp_path / "res.txt").exists()


def test_other_malformed_rows(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    for text, message in [
        ("1,-1,1,2,3,4,0.5\n2,-1,1,2,3,4,x\n", "line 2: not a number"),
        ("0,-1,1,2,3,4,0.5\n", "line 1: frame '0' is not a positive integer"),
        ("1,-1,1,2,3,4,0.5\n1,-1,1,2,3,4,0.5,-1\n", "line 2: 8 columns, but line 1 has 7"),
    ]:
        bad.write_text(text)
        with pytest.raises(MotFormatError, match=message):
            read_mot_file(bad)
    bad.write_text("1 -1 1 2 3 4 0.5\n\n2 -1 1 2 3 4 0.5\n")  # white space separated, blank line
    assert read_mot_file(bad).shape == (2, 7)


def test_nan_detections_are_skipped_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dets = write_dets(tmp_path / "dets.txt", frames=6)
    dets.write_text(dets.read_text() + "3,-1,nan,10,10,10,0.9\n")
    assert main(["--dets", str(dets), "--out", str(tmp_path / "res.txt")]) == 0
    err = capsys.readouterr().err
    assert "1 detection(s) skipped" in err and "2 tracks" in err


def test_cli_refuses_bad_config_and_overwriting_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dets = write_dets(tmp_path / "dets.txt")
    config = tmp_path / "t.yaml"
    config.write_text("track_bufer: 10\n")
    assert main(["--dets", str(dets), "--out", str(tmp_path / "r.txt"), "--config", str(config)]) == 2
    assert "unknown setting(s) track_bufer" in capsys.readouterr().err
    assert main(["--dets", str(dets), "--out", str(dets)]) == 2
    assert "this is an input of the command" in capsys.readouterr().err
    config.write_text("track_buffer: 10\n")
    assert main(["--dets", str(dets), "--out", str(tmp_path / "r.txt"), "--config", str(config)]) == 0


@pytest.mark.shared
@pytest.mark.parametrize("tracker", ["bytetrack", "botsort"])
def test_lucid_track_end_to_end_on_det_seed0(shared_dir: Path, tmp_path: Path, tracker: str) -> None:
    dets = shared_dir / "data" / "mot-tud" / "TUD-Stadtmitte" / "det_seed0.txt"
    out = tmp_path / "res.txt"
    assert main(["--dets", str(dets), "--out", str(out), "--tracker", tracker]) == 0
    rows = np.loadtxt(out, delimiter=",")
    detections = read_mot_file(dets)
    assert rows.shape[1] == 10 and 0 < len(rows) <= len(detections)
    assert rows[:, 0].max() <= detections[:, 0].max() and (rows[:, 1] >= 1).all()
    for frame in np.unique(rows[:, 0]):
        ids = rows[rows[:, 0] == frame, 1]
        assert len(set(ids)) == len(ids), f"frame {frame}: an ID twice"
    again = tmp_path / "again.txt"
    assert main(["--dets", str(dets), "--out", str(again), "--tracker", tracker]) == 0
    assert again.read_bytes() == out.read_bytes()
