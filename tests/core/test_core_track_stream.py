"""Tracking inside inference (``lucid_core.track.track`` / ``StreamTracker``): IDs persist across stream chunks
and calls sharing a tracker, a new video resets it, masks / keypoints / rotated boxes follow their row, bad input
is counted and never resets the IDs."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_core.interop.reference import import_checkpoint
from lucid_core.models import YOLOModel
from lucid_core.results import Detections, Results
from lucid_core.track import StreamTracker, TrackerConfigError, track

REFERENCE_SHAPES = (
    Path(__file__).resolve().parents[1] / "data" / "fidelity" / "shapes_yolo26n_detect_seed0_last.refpt"
)
SHAPE = (120, 160)


def _detections(centres: list[tuple[float, float]], *, size: float = 30.0, score: float = 0.9) -> Detections:
    boxes = torch.tensor([[x - size / 2, y - size / 2, x + size / 2, y + size / 2] for x, y in centres])
    return Detections(
        boxes=boxes.reshape(-1, 4).float(),
        scores=torch.full((len(centres),), score),
        labels=torch.zeros(len(centres), dtype=torch.int64),
    )


def _result(det: Detections, *, path: str | None = "a.mp4", frame: int | None = 0) -> Results:
    image = np.zeros((*SHAPE, 3), dtype=np.uint8)
    return Results(
        det, names=["shape"], orig_img=image, orig_shape=SHAPE, path=path, frame=frame, task="detect"
    )


def _walk(count: int, *, path: str | None = "a.mp4", start: int = 0) -> list[Results]:
    """Two objects moving apart (a left, b right), ``count`` frames of one video (or still images: path None)."""
    frames = []
    for t in range(start, start + count):
        det = _detections([(40 + 2 * t, 40), (120 - 2 * t, 80)])
        frames.append(_result(det, path=path, frame=None if path is None else t))
    return frames


def _ids(results: list[Results]) -> list[list[int]]:
    return [r.boxes.id.tolist() for r in results]


def test_ids_follow_the_objects_and_persist_across_chunks() -> None:
    whole = list(StreamTracker()(_walk(12)))
    assert _ids(whole) == [[1, 2]] * 12
    session = StreamTracker()
    first = list(session(_walk(5)))
    second = list(session(_walk(7, start=5)))
    assert _ids(first + second) == _ids(whole)
    assert session.frames == 12 and session.resets == 0
    # boxes, scores and labels are the detections' own (the tracked rows of predict's output)
    torch.testing.assert_close(second[-1].boxes.xyxy, _walk(12)[-1].detections.boxes)
    assert whole[0].boxes.data.shape == (2, 7) and "track" in whole[0].speed


def test_a_new_video_resets_and_still_images_do_not() -> None:
    session = StreamTracker()
    list(session(_walk(4)))
    list(session(_detour(4)))  # a second object set in the same video: new IDs 3, 4
    b = list(session(_walk(4, path="b.mp4")))
    assert _ids(b) == [[1, 2]] * 4 and session.resets == 1
    again = list(session(_walk(3, path="b.mp4")))  # the same video read again from its start
    assert _ids(again) == [[1, 2]] * 3 and session.resets == 2
    images = list(session(_walk(3, path=None)))
    more_images = list(session(_walk(3, path=None, start=3)))
    assert _ids(images + more_images) == [[1, 2]] * 6 and session.resets == 3


def _detour(count: int) -> list[Results]:
    """Frames 4.. of a.mp4 with the objects somewhere else (far from their tracks)."""
    return [_result(_detections([(30, 100), (130, 20)]), frame=4 + t) for t in range(count)]


def test_persist_continues_and_reset_restarts() -> None:
    session = StreamTracker("bytetrack")
    list(session(_walk(3, path=None)))
    assert _ids(list(session(_walk(2, path=None, start=3)))) == [[1, 2]] * 2
    session.reset()
    assert _ids(list(session(_walk(2, path=None, start=10)))) == [[1, 2]] * 2


def test_masks_keypoints_and_rotated_boxes_follow_their_row() -> None:
    session = StreamTracker("botsort")
    seen: dict[int, set[int]] = {}
    for t in range(8):
        centres = [(40.0 + 3 * t, 40.0), (120.0 - 3 * t, 80.0), (80.0, 20.0 + 2 * t)]
        order = [(t + k) % 3 for k in range(3)]  # the rows come in another order every frame
        det = _detections([centres[k] for k in order])
        markers = torch.tensor(order, dtype=torch.float32)
        masks = torch.zeros(3, *SHAPE, dtype=torch.bool)
        for row, k in enumerate(order):
            masks[row, k, :] = True  # object k's mask marks image row k
        det.masks = masks
        det.keypoints = torch.stack(
            [markers[:, None].expand(3, 5), markers[:, None].expand(3, 5), markers[:, None].expand(3, 5)], -1
        )
        angles = torch.full((3,), 0.3)
        det.rboxes = torch.cat(
            [(det.boxes[:, :2] + det.boxes[:, 2:]) / 2, torch.full((3, 2), 30.0), angles[:, None]], 1
        )
        out = session.update(_result(det, frame=t))
        assert out.masks is not None and out.keypoints is not None and out.obb is not None
        for i, track_id in enumerate(out.boxes.id.tolist()):
            k = int(out.keypoints.conf[i, 0])
            assert bool(out.masks.data[i, k].all()) and int(out.masks.data[i].sum()) == SHAPE[1]
            np.testing.assert_allclose(out.obb.xywhr[i, :2].numpy(), np.array(centres[k]), atol=1e-4)
            seen.setdefault(track_id, set()).add(k)
    assert sorted(seen) == [1, 2, 3] and all(len(objects) == 1 for objects in seen.values())


def test_empty_frames_and_nan_boxes_are_counted_never_a_reset() -> None:
    session = StreamTracker()
    for t in range(4):
        session.update(_result(_detections([(40 + 2 * t, 40)]), frame=t))
    assert session.update(_result(Detections.empty(), frame=4)).boxes.id.tolist() == []
    bad = _detections([(50, 40), (90, 90), (20, 100)])
    bad.boxes[1, 0] = float("nan")
    bad.scores[2] = float("inf")
    out = session.update(_result(bad, frame=5))
    assert out.boxes.id.tolist() == [1] and session.dropped == 2 and session.resets == 0
    assert session.update(_result(_detections([(52, 40)]), frame=6)).boxes.id.tolist() == [1]


def test_classifier_results_and_bad_settings_are_refused(tmp_path: Path) -> None:
    det = Detections.empty()
    det.probs = torch.tensor([0.2, 0.8])
    with pytest.raises(ValueError, match="class probabilities"):
        StreamTracker().update(_result(det, frame=0))
    bad = tmp_path / "bad.yaml"
    bad.write_text("tracker_type: bytetrack\ntrack_bufer: 10\n")
    with pytest.raises(TrackerConfigError, match="track_bufer"):
        StreamTracker(bad)


# --------------------------------------------------------------------------- with a detector: track(model, source)
@pytest.fixture(scope="module")
def shapes_model() -> YOLOModel:
    """The reference's shapes detector (yolo26n, embedded recipe, seed 0; tests/data/fidelity/README.md)."""
    return import_checkpoint(REFERENCE_SHAPES)[0]


@pytest.fixture(scope="module")
def frames() -> list[np.ndarray]:
    """The first frames of the synthetic tracking video (BGR arrays, as OpenCV gives them)."""
    cv2 = pytest.importorskip("cv2")
    from lucid_data.synth_track import build_scene, render_frames

    scene = build_scene(frames=40, seed=0)
    return [cv2.cvtColor(image, cv2.COLOR_RGB2BGR) for image, _ in render_frames(scene)][:16]


def test_track_over_chunks_equals_one_call(shapes_model: YOLOModel, frames: list[np.ndarray]) -> None:
    options = {"imgsz": 96, "names": ["circle", "square", "triangle"]}
    whole = track(shapes_model, frames, **options)  # type: ignore[arg-type]
    assert len(whole) == len(frames) and all(r.boxes.id is not None for r in whole)
    assert len(whole[0]) >= 3  # the four objects are found (one may be missed in a frame)
    first = set(whole[0].boxes.id.tolist())
    assert len(first & set(whole[-1].boxes.id.tolist())) >= 3  # objects of the first frame keep their IDs
    session = StreamTracker()
    chunked = [*track(shapes_model, frames[:7], tracker=session, **options)]  # type: ignore[arg-type]
    chunked += list(track(shapes_model, frames[7:], tracker=session, stream=True, **options))  # type: ignore[call-overload]
    assert _ids(chunked) == _ids(whole)
    streamed = track(shapes_model, frames, stream=True, **options)  # type: ignore[call-overload]
    assert isinstance(streamed, Iterator) and _ids(list(streamed)) == _ids(whole)
    # a fresh call starts afresh: IDs from 1 in its first frame
    fresh = track(shapes_model, frames[7:], **options)  # type: ignore[arg-type]
    assert sorted(fresh[0].boxes.id.tolist()) == list(range(1, len(fresh[0]) + 1))
    # the conf default is the tracker's low threshold: weak detections reach the second association
    predicted = track(shapes_model, frames[:1], conf=0.5, **options)  # type: ignore[arg-type]
    assert (predicted[0].boxes.conf > 0.5).all()


def test_the_drawing_shows_the_ids(shapes_model: YOLOModel, frames: list[np.ndarray]) -> None:
    pytest.importorskip("cv2")
    tracked = track(shapes_model, frames[:3], imgsz=96)
    plain = Results(
        Detections(
            boxes=tracked[-1].detections.boxes,
            scores=tracked[-1].detections.scores,
            labels=tracked[-1].detections.labels,
        ),
        names=tracked[-1].names,
        orig_img=tracked[-1].orig_img,
        orig_shape=tracked[-1].orig_shape,
    )
    assert not np.array_equal(tracked[-1].plot(), plain.plot())  # "#<id>" labels, colours by ID
    assert math.isfinite(float(tracked[-1].speed["track"]))
