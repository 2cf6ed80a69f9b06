"""``lucid-predict --track [--tracker NAME|YAML]``: the usual outputs with IDs, MOTChallenge results per video,
an annotated video with IDs drawn; the untracked outputs are unchanged; bad tracker flags are one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from lucid_core.predict_cli import main, predict_to_dir
from lucid_core.track.mot_io import RESULT_COLUMNS, read_mot_file

cv2 = pytest.importorskip("cv2")
REFERENCE_SHAPES = (
    Path(__file__).resolve().parents[1] / "data" / "fidelity" / "shapes_yolo26n_detect_seed0_last.refpt"
)
FRAMES = 40


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference's shapes detector as a ``.pt`` (what ``lucid_core.load`` imports; tests/data/fidelity)."""
    path = tmp_path_factory.mktemp("weights") / "shapes.pt"
    shutil.copyfile(REFERENCE_SHAPES, path)
    return path


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lucid_data.synth_track import synthesize_track

    return synthesize_track(tmp_path_factory.mktemp("clip"), frames=FRAMES, seed=0).video


def _frames(path: Path) -> list[np.ndarray]:
    capture = cv2.VideoCapture(str(path))
    out = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        out.append(frame)
    capture.release()
    return out


def test_track_writes_ids_mot_results_and_an_annotated_video(
    weights: Path, video: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["--weights", str(weights), "--source", str(video), "--output", str(out), "--track"]
    assert main([*args, "--save", "--save-json"]) == 0
    assert "track ID(s)" in capsys.readouterr().err
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["frame"] for r in records] == list(range(FRAMES))
    assert all("id" in d for r in records for d in r["detections"])
    rows = read_mot_file(out / "shapes-track.txt", RESULT_COLUMNS)
    assert set(rows[:, 0].astype(int)) <= set(range(1, FRAMES + 1))
    from_json = sorted(
        (r["frame"] + 1, d["id"], round(d["box"][0], 2)) for r in records for d in r["detections"]
    )
    from_mot = sorted((int(f), int(i), round(x, 2)) for f, i, x in rows[:, :3])
    assert from_json == from_mot
    assert len(set(rows[:, 1].astype(int))) >= 4  # the four objects (and maybe a few more)
    decoded = _frames(out / "shapes-track.mp4")
    assert len(decoded) == FRAMES and decoded[0].shape == (192, 256, 3)
    assert not list(out.glob(".*partial*"))
    # without a save flag: the per-video JSONL carries the IDs too
    assert main([*args[:-2], str(tmp_path / "plain"), "--track", "--tracker", "botsort"]) == 0
    lines = (tmp_path / "plain" / "shapes-track.jsonl").read_text().splitlines()
    assert len(lines) == FRAMES and all("id" in d for line in lines for d in json.loads(line)["detections"])
    assert (tmp_path / "plain" / "shapes-track.txt").is_file()


def test_untracked_outputs_are_unchanged(weights: Path, video: Path, tmp_path: Path) -> None:
    run = predict_to_dir(weights, video, tmp_path / "p", save_json=True)
    assert run.frames == FRAMES and run.tracks == 0 and run.dropped == 0
    records = [json.loads(line) for line in (tmp_path / "p" / "predictions.jsonl").read_text().splitlines()]
    assert not any("id" in d for r in records for d in r["detections"])
    assert not (tmp_path / "p" / "shapes-track.txt").exists()
    tracked = predict_to_dir(weights, video, tmp_path / "t", save_json=True, track=True, conf=0.25)
    assert tracked.tracks >= 4
    # tracked rows are predict's detections, with the same threshold: a subset of the untracked records
    kept = [json.loads(line) for line in (tmp_path / "t" / "predictions.jsonl").read_text().splitlines()]
    for plain, with_ids in zip(records, kept, strict=True):
        boxes = {tuple(d["box"]) for d in plain["detections"]}
        assert {tuple(d["box"]) for d in with_ids["detections"]} <= boxes


def test_still_images_are_one_sequence_named_after_their_folder(
    weights: Path, video: Path, tmp_path: Path
) -> None:
    img1 = tmp_path / "SEQ-01" / "img1"
    img1.mkdir(parents=True)
    for index, frame in enumerate(_frames(video)[:6]):
        cv2.imwrite(str(img1 / f"{index + 1:06d}.jpg"), frame)
    run = predict_to_dir(weights, img1, tmp_path / "out", track=True)
    rows = read_mot_file(tmp_path / "out" / "SEQ-01.txt", RESULT_COLUMNS)
    assert set(rows[:, 0].astype(int)) == set(range(1, 7)) and run.tracks >= 3
    first = json.loads((tmp_path / "out" / "000001.jpg.json").read_text())["detections"]
    last = json.loads((tmp_path / "out" / "000006.jpg.json").read_text())["detections"]
    assert len({d["id"] for d in first} & {d["id"] for d in last}) >= 3  # the same objects, the same IDs


def test_bad_tracker_flags_are_one_line_errors(
    weights: Path, video: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--weights", str(weights), "--source", str(video), "--output", str(tmp_path / "o")]
    assert main([*base, "--tracker", "botsort"]) == 2
    assert "--tracker botsort: tracker settings need --track" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("tracker_type: bytetrack\nmatch_tresh: 0.5\n")
    assert main([*base, "--track", "--tracker", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "match_tresh" in err
    assert main([*base, "--track", "--tracker", "deepsort"]) == 2
    assert "deepsort" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
