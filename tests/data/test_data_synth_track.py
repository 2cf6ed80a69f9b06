"""`lucid-data synth --task track`: a deterministic tracking video with MOTChallenge ground truth that holds a
crossing and an occlusion, readable by the installed OpenCV and by the MOT readers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from lucid_core.track.mot_io import GT_COLUMNS, read_mot_file
from lucid_data.cli import main
from lucid_data.synth_track import (
    MIN_VISIBILITY,
    OCCLUDED_FRAMES,
    build_scene,
    gt_lines,
    render_frames,
    synthesize_track,
)

FRAMES = 60


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_arguments_give_the_same_ground_truth_bytes(tmp_path: Path) -> None:
    a = synthesize_track(tmp_path / "a", frames=FRAMES, seed=3)
    b = synthesize_track(tmp_path / "b", frames=FRAMES, seed=3)
    c = synthesize_track(tmp_path / "c", frames=FRAMES, seed=4)
    assert a.gt.read_bytes() == b.gt.read_bytes()
    assert a.seqinfo.read_bytes() == b.seqinfo.read_bytes()
    assert _digest(a.gt) != _digest(c.gt)
    assert a.gt.read_text().splitlines(keepends=True) == gt_lines(build_scene(frames=FRAMES, seed=3))
    assert a.gt == tmp_path / "a" / "shapes-track" / "gt" / "gt.txt"
    assert not list((tmp_path / "a").glob(".*partial*"))  # the video was renamed into place


@pytest.mark.parametrize("video_format", ["mp4", "avi"])
def test_the_video_is_readable_by_opencv(tmp_path: Path, video_format: str) -> None:
    done = synthesize_track(tmp_path, frames=FRAMES, seed=1, video_format=video_format)  # type: ignore[arg-type]
    assert done.video == tmp_path / f"shapes-track.{video_format}"
    capture = cv2.VideoCapture(str(done.video))
    assert capture.isOpened()
    decoded = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        decoded.append(frame)
    capture.release()
    assert len(decoded) == FRAMES == done.frames
    assert decoded[0].shape == (192, 256, 3)
    rendered = [
        cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
        for image, _ in render_frames(build_scene(frames=FRAMES, seed=1))
    ]
    for index in (0, FRAMES // 2, FRAMES - 1):  # lossy codecs: close to the rendered frame, not equal
        error = np.abs(decoded[index].astype(np.int16) - rendered[index]).mean()
        assert error < 12, (index, error)
    info = (tmp_path / "shapes-track" / "seqinfo.ini").read_text()
    assert f"seqLength={FRAMES}" in info and "imWidth=256" in info and "frameRate=30" in info


def test_ground_truth_holds_a_crossing_and_an_occlusion(tmp_path: Path) -> None:
    done = synthesize_track(tmp_path, seed=0)
    gt = read_mot_file(done.gt, GT_COLUMNS)
    assert gt.shape[1] == 9 and done.rows == len(gt)
    assert set(gt[:, 1].astype(int)) == {1, 2, 3, 4}
    assert set(gt[:, 7]) == {1.0}  # MOTChallenge's evaluated class
    np.testing.assert_array_equal(gt[:, 6], (gt[:, 8] >= MIN_VISIBILITY).astype(float))
    assert (
        (gt[:, 2] >= 0) & (gt[:, 3] >= 0) & (gt[:, 2] + gt[:, 4] <= 256) & (gt[:, 3] + gt[:, 5] <= 192)
    ).all()
    # the occluded object (3) has no row while fully hidden, for about OCCLUDED_FRAMES frames, and comes back
    frames_3 = gt[gt[:, 1] == 3, 0].astype(int)
    missing = sorted(set(range(1, done.frames + 1)) - set(frames_3.tolist()))
    assert OCCLUDED_FRAMES - 2 <= len(missing) <= OCCLUDED_FRAMES + 2
    assert missing == list(range(missing[0], missing[-1] + 1)) and frames_3.max() == done.frames
    # the boxes of the crossing pair (1 behind 2) overlap
    one, two = gt[gt[:, 1] == 1], gt[gt[:, 1] == 2]
    common = np.intersect1d(one[:, 0], two[:, 0])
    a = one[np.isin(one[:, 0], common)]
    b = two[np.isin(two[:, 0], common)]
    overlap_x = np.minimum(a[:, 2] + a[:, 4], b[:, 2] + b[:, 4]) - np.maximum(a[:, 2], b[:, 2])
    overlap_y = np.minimum(a[:, 3] + a[:, 5], b[:, 3] + b[:, 5]) - np.maximum(a[:, 3], b[:, 3])
    assert ((overlap_x > 0) & (overlap_y > 0)).any()
    assert (b[:, 8] == 1.0).all()  # 2 passes in front of 1
    # the pair moves in opposite directions: the left one ends on the right
    assert one[0, 2] < two[0, 2] and one[-1, 2] > two[-1, 2]


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="frames must be"):
        synthesize_track(tmp_path, frames=10)
    with pytest.raises(ValueError, match="video_format"):
        synthesize_track(tmp_path, video_format="gif")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="plain file name"):
        synthesize_track(tmp_path, name="a/b")
    with pytest.raises(ValueError, match="num_classes"):
        synthesize_track(tmp_path, num_classes=9)


def test_cli_synth_task_track(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synth", "--task", "track", "--output", str(tmp_path / "t"), "--seed", "2"]) == 0
    lines = capsys.readouterr().out.split()
    assert lines == [
        str(tmp_path / "t" / "shapes-track.mp4"),
        str(tmp_path / "t" / "shapes-track" / "gt" / "gt.txt"),
    ]
    expected = synthesize_track(tmp_path / "u", seed=2)
    assert Path(lines[1]).read_bytes() == expected.gt.read_bytes()
