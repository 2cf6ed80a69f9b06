"""ByteTrack / BoT-SORT association on hand-made frames, life cycle, reset, rotated boxes and bad input."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_core.geometry.rotated import rboxes_to_xyxy
from lucid_core.results import Detections
from lucid_core.track import (
    BotSortConfig,
    BotSortTracker,
    ByteTrackConfig,
    ByteTracker,
    TrackedDetections,
    TrackerConfigError,
    build_tracker,
    load_tracker_config,
)
from lucid_core.track.config import CONFIG_DIR, MissingExtraError
from lucid_core.track.matching import _solver
from lucid_core.track.tracks import TrackState

TRACKERS = ["bytetrack", "botsort"]


def box(cx: float, cy: float, w: float = 40.0, h: float = 80.0, score: float = 0.9) -> list[float]:
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, score, 0.0]


def frame(*rows: list[float]) -> np.ndarray:
    return np.array(rows, dtype=np.float64).reshape(-1, 6)


def ids_by_x(tracked: TrackedDetections) -> dict[int, float]:
    centres = (tracked.detections.boxes[:, 0] + tracked.detections.boxes[:, 2]) / 2
    return dict(zip(tracked.ids.tolist(), centres.tolist()))


@pytest.mark.parametrize("name", TRACKERS)
def test_crossing_pair_keeps_ids(name: str) -> None:
    tracker = build_tracker(name)
    history: dict[int, list[float]] = {}
    for t in range(40):
        a = box(100 + 6 * t, 200)
        b = box(340 - 6 * t, 215)  # overlaps a heavily around t = 20
        out = tracker.update(frame(a, b))
        for track_id, x in ids_by_x(out).items():
            history.setdefault(track_id, []).append(x)
    assert sorted(history) == [1, 2]
    for xs in history.values():
        steps = np.diff(xs)
        assert (steps > 0).all() or (steps < 0).all(), "an ID jumped to the other object"


@pytest.mark.parametrize("name", TRACKERS)
def test_ten_frame_occlusion_recovered_within_buffer(name: str) -> None:
    tracker = build_tracker(name)
    seen: list[list[int]] = []
    for t in range(40):
        occluded = 15 <= t < 25
        rows = [box(50 + 5 * t, 200)] + ([] if occluded else [box(400, 100 + 2 * t)])
        seen.append(tracker.update(frame(*rows)).ids.tolist())
    assert seen[14] == [1, 2] and seen[25] == [1, 2] and seen[-1] == [1, 2]
    assert all(ids == [1] for ids in seen[15:25])
    assert tracker.next_id == 3


def test_occlusion_longer_than_buffer_starts_a_new_track() -> None:
    tracker = ByteTracker(ByteTrackConfig(track_buffer=5))
    for _ in range(5):
        tracker.update(frame(box(100, 100)))
    for _ in range(7):
        assert len(tracker.update(frame())) == 0
    assert tracker.lost == [] and tracker.tracked == []
    tracker.update(frame(box(100, 100)))
    assert tracker.update(frame(box(100, 100))).ids.tolist() == [2]


@pytest.mark.parametrize("name", TRACKERS)
def test_low_score_detection_rescued_by_second_stage(name: str) -> None:
    def run(config: ByteTrackConfig) -> list[list[int]]:
        tracker = build_tracker(config)
        out = []
        for t in range(8):
            score = 0.15 if t == 5 else 0.9  # between track_low_thresh 0.1 and track_high_thresh 0.25
            out.append(tracker.update(frame(box(100 + 4 * t, 100, score=score))).ids.tolist())
        return out

    default = load_tracker_config(name)
    assert run(default)[5] == [1]
    without_second_stage = load_tracker_config(name, track_low_thresh=default.track_high_thresh)
    ids = run(without_second_stage)
    assert ids[5] == [] and ids[6] == [1]


def test_new_track_needs_two_frames_except_in_the_first_frame() -> None:
    tracker = ByteTracker()
    assert tracker.update(frame(box(100, 100))).ids.tolist() == [1]
    out = tracker.update(frame(box(102, 100), box(400, 300)))
    assert out.ids.tolist() == [1]  # the newcomer is unconfirmed
    out = tracker.update(frame(box(104, 100), box(401, 300)))
    assert sorted(out.ids.tolist()) == [1, 2]
    # a high detection seen once and never again does not consume an ID
    tracker.update(frame(box(106, 100), box(401, 300), box(600, 50)))
    tracker.update(frame(box(108, 100), box(401, 300)))
    assert sorted(tracker.update(frame(box(110, 100), box(401, 300), box(200, 400))).ids.tolist()) == [1, 2]
    assert sorted(tracker.update(frame(box(112, 100), box(401, 300), box(200, 400))).ids.tolist()) == [
        1,
        2,
        3,
    ]


@pytest.mark.parametrize("name", TRACKERS)
def test_reset_between_videos(name: str) -> None:
    tracker = build_tracker(name)
    for t in range(5):
        tracker.update(frame(box(100 + t, 100), box(300, 300 + t)))
    assert tracker.next_id == 3 and tracker.frame_id == 5
    tracker.reset()
    assert (tracker.tracked, tracker.lost, tracker.frame_id, tracker.next_id) == ([], [], 0, 1)
    out = tracker.update(frame(box(500, 100)))
    assert out.ids.tolist() == [1]


@pytest.mark.parametrize("name", TRACKERS)
def test_empty_frames_age_tracks(name: str) -> None:
    tracker = build_tracker(name)
    tracker.update(frame(box(100, 100)))
    tracker.update(frame(box(102, 100)))
    empty = tracker.update(frame())
    assert len(empty) == 0 and empty.track_boxes.shape == (0, 4)
    assert [t.state for t in tracker.lost] == [TrackState.LOST]
    assert tracker.update(Detections.empty()).ids.tolist() == []
    assert tracker.update(frame(box(106, 100))).ids.tolist() == [1]


@pytest.mark.parametrize("name", TRACKERS)
def test_nan_boxes_are_dropped_and_counted_without_an_id_reset(name: str) -> None:
    tracker = build_tracker(name)
    for t in range(3):
        tracker.update(frame(box(100 + 2 * t, 100)))
    bad = frame(box(106, 100), [np.nan, 1, 2, 3, 0.9, 0], [1, 1, 5, 5, np.inf, 0], [5, 5, 5, 9, 0.9, 0])
    out = tracker.update(bad)
    assert out.ids.tolist() == [1] and out.indices.tolist() == [0]
    assert out.dropped == 3 and tracker.dropped_total == 3
    assert tracker.update(frame(box(108, 100))).ids.tolist() == [1]


def test_wrong_shapes_are_refused() -> None:
    tracker = ByteTracker()
    with pytest.raises(ValueError, match=r"\(N, 6\) array"):
        tracker.update(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="differ in number"):
        tracker.update(Detections(torch.zeros(2, 4), torch.zeros(3), torch.zeros(2, dtype=torch.int64)))


def test_array_and_detections_inputs_agree_and_fields_ride_along() -> None:
    a, b = ByteTracker(), ByteTracker()
    for t in range(6):
        rows = frame(box(100 + 3 * t, 100), box(300, 200 - 2 * t, score=0.8))
        dets = Detections(
            boxes=torch.tensor(rows[:, :4], dtype=torch.float32),
            scores=torch.tensor(rows[:, 4], dtype=torch.float32),
            labels=torch.tensor([3, 7]),
            masks=torch.zeros(2, 8, 8, dtype=torch.bool).index_fill_(0, torch.tensor([1]), True),
            keypoints=torch.arange(2 * 17 * 3, dtype=torch.float32).reshape(2, 17, 3),
        )
        out_a, out_b = a.update(rows), b.update(dets)
        assert out_a.ids.tolist() == out_b.ids.tolist()
        torch.testing.assert_close(out_a.track_boxes, out_b.track_boxes)
    assert out_b.detections.labels.tolist() == [3, 7]
    assert out_b.detections.masks is not None and out_b.detections.masks[1].all()
    assert out_b.detections.keypoints is not None
    torch.testing.assert_close(out_b.detections.keypoints, dets.keypoints)
    assert out_b.ids.dtype == torch.int64


def test_rotated_boxes_keep_ids_across_equivalent_angles() -> None:
    tracker = ByteTracker()
    for t in range(12):
        r = torch.tensor([[100.0 + 3 * t, 100.0, 60.0, 20.0, 0.3], [300.0, 200.0 - 2 * t, 40.0, 80.0, 1.2]])
        if t % 2:  # the same box written as (h, w, θ + π/2)
            r[1] = torch.tensor([300.0, 200.0 - 2 * t, 80.0, 40.0, 1.2 + math.pi / 2])
        dets = Detections(rboxes_to_xyxy(r), torch.tensor([0.9, 0.8]), torch.tensor([0, 1]), rboxes=r)
        out = tracker.update(dets)
        assert out.ids.tolist() == [1, 2]
        assert out.track_boxes.shape == (2, 5)
    tracked = out.track_boxes[1]
    assert tracked[2].item() == pytest.approx(40.0, abs=1.0)
    assert tracked[3].item() == pytest.approx(80.0, abs=1.0)
    assert tracked[4].item() == pytest.approx(1.2, abs=1e-5)


def test_botsort_compensates_camera_motion() -> None:
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(0)
    scene = cv2.GaussianBlur((rng.random((480, 800, 3)) * 255).astype(np.uint8), (7, 7), 2)
    tracker = BotSortTracker(BotSortConfig(gmc_downscale=1))
    still = BotSortTracker(BotSortConfig(gmc_method="none"))
    # the camera pans left by 12 px a frame: a static object moves right by 12 px a frame in the image
    for t in range(3):
        image = np.ascontiguousarray(scene[:, 100 - 12 * t : 100 - 12 * t + 640])
        dets = frame(box(300 + 12 * t, 200))
        tracker.update(dets, frame=image)
        still.update(dets, frame=image)  # gmc_method none: the frame is not read
    # compensated, the object is static in the world (velocity ~0) and the camera's 12 px move the prediction
    assert abs(tracker.tracked[0].mean[4]) < 0.5 < still.tracked[0].mean[4]
    last = tracker.tracked[0].mean[0]
    tracker.update(frame(), frame=np.ascontiguousarray(scene[:, 100 - 36 : 100 - 36 + 640]))
    assert tracker.lost[0].mean[0] == pytest.approx(last + 12, abs=0.5)


def test_configs_yaml_defaults_match_the_dataclasses(tmp_path: Path) -> None:
    assert load_tracker_config("bytetrack") == ByteTrackConfig()
    assert load_tracker_config("botsort") == BotSortConfig()
    assert isinstance(build_tracker(CONFIG_DIR / "botsort.yaml"), BotSortTracker)
    custom = tmp_path / "mine.yaml"
    custom.write_text("tracker_type: bytetrack\ntrack_buffer: 60\nmatch_thresh: 0.7\n")
    settings = load_tracker_config(custom)
    assert (settings.track_buffer, settings.match_thresh, settings.max_time_lost) == (60, 0.7, 60)
    assert load_tracker_config("botsort", config={"track_buffer": 10}).track_buffer == 10
    bad = tmp_path / "bad.yaml"
    bad.write_text("tracker_type: bytetrack\ntrack_bufer: 60\n")
    with pytest.raises(TrackerConfigError, match=r"bad\.yaml: unknown setting\(s\) track_bufer"):
        load_tracker_config(bad)
    with pytest.raises(TrackerConfigError, match="does not match"):
        load_tracker_config("bytetrack", config={"tracker_type": "botsort"})
    with pytest.raises(TrackerConfigError, match="match_thresh: expected float"):
        load_tracker_config("bytetrack", config={"match_thresh": "high"})
    with pytest.raises(TrackerConfigError, match="with_reid"):
        load_tracker_config("botsort", with_reid=True)
    with pytest.raises(TrackerConfigError, match="neither bytetrack nor botsort"):
        load_tracker_config(tmp_path / "missing.yaml")


def test_missing_scipy_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _solver.cache_clear()
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    try:
        with pytest.raises(MissingExtraError, match=r'pip install "lucid-core\[tracking\]"') as info:
            ByteTracker()
        assert "\n" not in str(info.value)
    finally:
        _solver.cache_clear()
