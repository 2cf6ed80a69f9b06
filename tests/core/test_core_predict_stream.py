"""``predict(source, stream=True)``: a generator of ``Results`` over any source, batched frames, the same numbers
as the image pipeline, clean closing and flat memory over long videos; ``YOLO(...).predict`` the same."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lucid_core.geometry.letterbox import letterbox
from lucid_core.inference import (
    letterbox_frame,
    predict,
    predict_prepared,
    prepare_inference_model,
)
from lucid_core.models import YOLOModel, build_model
from lucid_core.results import Results
from lucid_core.sources import FrameReader, SourceError
from media_testing import write_video

cv2 = pytest.importorskip("cv2")

IMGSZ = 64


@pytest.fixture(scope="module")
def model() -> YOLOModel:
    """yolov8n detect with class biases at 0 (p = 0.5), so a random network reports boxes."""
    torch.manual_seed(0)
    net = build_model("yolov8", "detect", "n", num_classes=3)
    with torch.no_grad():
        for seq in net.head.cv3:
            seq[-1].bias.zero_()
    return net.eval()


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_video(tmp_path_factory.mktemp("stream") / "clip.mp4", 12, size_wh=(80, 60), fps=12.0)


def _same(a: Results, b: Results, atol: float = 0.0) -> None:
    torch.testing.assert_close(a.detections.boxes, b.detections.boxes, atol=atol, rtol=0)
    torch.testing.assert_close(a.detections.scores, b.detections.scores, atol=atol, rtol=0)
    assert torch.equal(a.detections.labels, b.detections.labels)


def _reader_threads() -> list[threading.Thread]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = [
            t for t in threading.enumerate() if t.name.startswith(("lucid-frame-reader", "lucid-stream"))
        ]
        if not alive:
            return []
        time.sleep(0.05)
    return alive


def test_stream_yields_one_result_per_frame_and_equals_the_list(model: YOLOModel, video: Path) -> None:
    results = predict(model, video, imgsz=IMGSZ, conf=0.0, max_det=5, stream=True)
    assert isinstance(results, Iterator) and not isinstance(results, list)
    streamed = list(results)
    listed = predict(model, str(video), imgsz=IMGSZ, conf=0.0, max_det=5)
    assert isinstance(listed, list) and len(streamed) == len(listed) == 12
    frames = list(FrameReader(video))
    for index, (a, b, frame) in enumerate(zip(streamed, listed, frames, strict=True)):
        assert isinstance(a, Results) and a.frame == index and a.path == str(video) and len(a) == 5
        assert a.orig_shape == (60, 80) and a.task == "detect" and a.names == {0: "0", 1: "1", 2: "2"}
        np.testing.assert_array_equal(a.orig_img, frame.image)  # the BGR frame, for drawing
        assert set(a.speed) == {"preprocess", "inference", "postprocess"}
        _same(a, b)
    # a frame given as the BGR array OpenCV decodes is the same image
    (alone,) = predict(model, frames[3].image, imgsz=IMGSZ, conf=0.0, max_det=5)
    assert alone.frame is None and alone.path is None
    _same(alone, streamed[3])


def test_batches_give_the_single_frame_results(model: YOLOModel, video: Path, tmp_path: Path) -> None:
    single = predict(model, video, imgsz=IMGSZ, conf=0.0, max_det=5)
    for batch in (3, 5):
        batched = predict(model, video, imgsz=IMGSZ, conf=0.0, max_det=5, batch=batch)
        assert [r.frame for r in batched] == list(range(12))
        for a, b in zip(single, batched, strict=True):
            _same(a, b, atol=1e-4)  # another batch size, another convolution kernel: float rounding only
    # a folder of differently sized images: only equal letterbox shapes share a forward pass
    rng = np.random.default_rng(1)
    for name, shape in (("a.png", (40, 64)), ("b.png", (64, 40)), ("c.png", (40, 64))):
        Image.fromarray(rng.integers(0, 256, (*shape, 3), dtype=np.uint8)).save(tmp_path / name)
    folder = predict(model, tmp_path, imgsz=IMGSZ, conf=0.0, max_det=5, batch=4)
    one_by_one = predict(model, sorted(tmp_path.glob("*.png")), imgsz=IMGSZ, conf=0.0, max_det=5)
    assert [Path(str(r.path)).name for r in folder] == ["a.png", "b.png", "c.png"]
    for a, b in zip(folder, one_by_one, strict=True):
        _same(a, b, atol=1e-4)
    assert [r.frame for r in predict(model, video, imgsz=IMGSZ, vid_stride=5)] == [0, 5, 10]


def test_image_numbers_equal_the_prepared_pipeline(model: YOLOModel, tmp_path: Path) -> None:
    """The frame pipeline (BGR frame, OpenCV resize when installed) gives exactly the image pipeline's result."""
    rgb = np.random.default_rng(2).integers(0, 256, (150, 100, 3), dtype=np.uint8)  # resized to 64
    Image.fromarray(rgb).save(tmp_path / "x.png")
    net, mode = prepare_inference_model(model)
    (expected,) = predict_prepared(net, tmp_path / "x.png", mode=mode, imgsz=IMGSZ, conf=0.0)
    (result,) = predict(model, tmp_path / "x.png", imgsz=IMGSZ, conf=0.0)
    assert torch.equal(result.detections.boxes, expected.boxes)
    assert torch.equal(result.detections.scores, expected.scores)


@pytest.mark.parametrize("opencv", [True, False])
@pytest.mark.parametrize("shape", [(48, 64), (150, 100), (37, 301), (64, 64)])
def test_letterbox_frame_equals_letterbox_of_the_rgb_image(
    shape: tuple[int, int], opencv: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not opencv:
        monkeypatch.setitem(sys.modules, "cv2", None)
    bgr = np.random.default_rng(3).integers(0, 256, (*shape, 3), dtype=np.uint8)
    padded, info = letterbox_frame(bgr, IMGSZ, stride=32)
    rgb = torch.from_numpy(np.ascontiguousarray(bgr[..., ::-1])).permute(2, 0, 1)
    expected, expected_info = letterbox(rgb, IMGSZ, auto=True, stride=32)
    assert info == expected_info
    assert torch.equal(padded.permute(2, 0, 1), expected)


def test_closing_the_generator_stops_decoding(model: YOLOModel, tmp_path: Path) -> None:
    long = write_video(tmp_path / "long.mp4", 300)
    results = predict(model, long, imgsz=IMGSZ, stream=True)
    first = next(results)
    assert first.frame == 0
    results.close()
    assert _reader_threads() == []
    for count, _ in enumerate(predict(model, [long, long], imgsz=IMGSZ, stream=True), 1):
        if count == 2:
            break  # leaving the loop drops the generator; its reader stops
    import gc

    gc.collect()
    assert _reader_threads() == []


def test_bad_sources_raise_or_are_handed_to_on_error(model: YOLOModel, video: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"nope\.png: no such file or folder"):
        predict(model, [video, tmp_path / "nope.png"], imgsz=IMGSZ)
    skipped: list[SourceError] = []
    results = predict(model, [tmp_path / "nope.png", video], imgsz=IMGSZ, on_error=skipped.append)
    assert len(results) == 12 and [e.kind for e in skipped] == ["missing"]
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        predict(model, video, batch=0)
    with pytest.raises(ValueError, match=r"classes: \[7\] not a class id"):
        predict(model, video, classes=[7], stream=True)  # checked when called, not when iterated


def test_the_facade_streams_results(model: YOLOModel, video: Path, tmp_path: Path) -> None:
    pytest.importorskip("lucid_train")
    from lucid_core.checkpoint import save_model
    from lucid_train import YOLO

    save_model(model, tmp_path / "w", names=["a", "b", "c"], imgsz=IMGSZ)
    facade = YOLO(tmp_path / "w")
    streamed = facade.predict(video, stream=True, conf=0.0, max_det=5, batch=4)
    assert isinstance(streamed, Iterator)
    results = list(streamed)
    assert [r.frame for r in results] == list(range(12)) and results[0].names == {0: "a", 1: "b", 2: "c"}
    for a, b in zip(results, predict(model, video, imgsz=IMGSZ, conf=0.0, max_det=5), strict=True):
        _same(a, b, atol=1e-4)
    written = list(facade.predict(video, output=tmp_path / "out", stream=True, conf=0.0, max_det=5))
    assert len(written) == 12 and (tmp_path / "out" / "clip.jsonl").is_file()


def _rss_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc")
def test_memory_stays_flat_over_a_ten_thousand_frame_stream(model: YOLOModel, tmp_path: Path) -> None:
    """10,000 frames through ``stream=True``: the resident set grows by less than 50 MB after the first 500."""
    long = write_video(tmp_path / "long.avi", 10_000, size_wh=(64, 48), fps=30.0, fourcc="MJPG")
    count, baseline = 0, 0.0
    for result in predict(model, long, imgsz=IMGSZ, stream=True):
        count += 1
        if count == 500:
            baseline = _rss_mib()
        assert result.orig_img is not None
    assert count == 10_000
    assert _rss_mib() - baseline < 50
