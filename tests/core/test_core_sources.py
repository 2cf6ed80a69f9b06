"""Sources: every kind yields BGR frames with path, index and timestamp; bad items are errors in place; videos,
streams and cameras are read by OpenCV in bounded background threads that close cleanly."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lucid_core.sources import (
    Frame,
    FrameReader,
    LiveStream,
    MissingVideoExtraError,
    SourceError,
    expand_source,
    iter_items,
    read_image_bgr,
    read_image_file,
    require_cv2,
)
from lucid_core.sources import video as video_module
from lucid_core.sources.images import rgb_chw_to_bgr
from media_testing import (
    MediaServer,
    corrupt_mjpeg_frame,
    frame_pixels,
    jpeg,
    media_server,
    write_video,
)

cv2 = pytest.importorskip("cv2")


def _frames(source: object, **kwargs: object) -> tuple[list[Frame], list[SourceError]]:
    errors: list[SourceError] = []
    frames = list(FrameReader(source, on_error=errors.append, **kwargs))  # type: ignore[arg-type]
    return frames, errors


def _no_reader_threads() -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not [
            t for t in threading.enumerate() if t.name.startswith(("lucid-frame-reader", "lucid-stream"))
        ]:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture()
def rgb() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)


def test_image_files_folders_globs_and_lists(tmp_path: Path, rgb: np.ndarray) -> None:
    folder = tmp_path / "images"
    (folder / "sub").mkdir(parents=True)
    for name in ("b.png", "a.jpg", "sub/c.png"):
        Image.fromarray(rgb).save(folder / name, quality=100)
    (folder / "notes.txt").write_text("not a list: folders skip .txt files\n")
    write_video(folder / "clip.mp4", 3)
    listing = tmp_path / "list.txt"
    listing.write_text("# comment\n\nimages/b.png\n" + str(folder / "sub" / "c.png") + "\n")
    nested = tmp_path / "nested.txt"
    nested.write_text("list.txt\n")

    kinds = [(i.kind, Path(str(i.name)).name) for i in expand_source(folder)]
    assert kinds == [("image", "a.jpg"), ("image", "b.png"), ("video", "clip.mp4")]
    assert [Path(str(i.name)).name for i in expand_source(str(folder / "**" / "*.png"))] == ["b.png", "c.png"]
    assert [Path(str(i.name)).name for i in expand_source(nested)] == ["b.png", "c.png"]

    frames, errors = _frames([folder / "b.png", str(listing)])
    assert errors == [] and [Path(str(f.source)).name for f in frames] == ["b.png", "b.png", "c.png"]
    first = frames[0]
    assert first.kind == "image" and first.index == 0 and first.timestamp is None
    np.testing.assert_array_equal(first.image, rgb[..., ::-1])  # BGR, the decoder's pixels
    assert first.image.flags.c_contiguous and first.shape == (30, 40)
    assert [f.item for f in frames] == [0, 1, 2]


def test_bad_items_are_errors_in_their_place(tmp_path: Path, rgb: np.ndarray) -> None:
    Image.fromarray(rgb).save(tmp_path / "good.png")
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    (tmp_path / "notes.doc").write_text("x")
    sources = [
        tmp_path / "missing.png",
        tmp_path / "broken.jpg",
        tmp_path / "notes.doc",
        str(tmp_path / "*.webp"),
        tmp_path / "good.png",
    ]
    frames, errors = _frames(sources)
    assert [Path(str(f.source)).name for f in frames] == ["good.png"]
    assert [e.kind for e in errors] == ["missing", "unreadable", "unsupported", "missing"]
    assert all(str(e).startswith(e.source) for e in errors)
    assert "missing.png: no such file or folder" in str(errors[0])
    assert "unsupported extension .doc" in str(errors[2])
    with pytest.raises(SourceError, match=r"missing\.png"):  # without on_error the error is raised
        list(FrameReader(sources))
    assert _no_reader_threads()


def test_a_single_still_image_is_decoded_without_the_reader_thread(tmp_path: Path, rgb: np.ndarray) -> None:
    """One image (file, missing file or array) is read in the consumer's thread, with the same frames and
    errors; two images go through the thread."""
    Image.fromarray(rgb).save(tmp_path / "one.png")
    for source in (tmp_path / "one.png", np.ascontiguousarray(rgb[..., ::-1])):
        reader = FrameReader(source)
        (frame,) = list(reader)
        assert reader._thread is None
        np.testing.assert_array_equal(frame.image, rgb[..., ::-1])
    errors: list[SourceError] = []
    reader = FrameReader(tmp_path / "missing.png", on_error=errors.append)
    assert list(reader) == [] and [e.kind for e in errors] == ["missing"] and reader._thread is None
    with pytest.raises(SourceError, match=r"missing\.png"):
        list(FrameReader(tmp_path / "missing.png"))
    reader = FrameReader([tmp_path / "one.png", tmp_path / "one.png"])
    assert len(list(reader)) == 2 and reader._thread is not None
    assert _no_reader_threads()


@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
def test_jpeg_files_decode_to_the_same_bgr_pixels_with_opencv(tmp_path: Path, orientation: int) -> None:
    """predict's JPEG path (OpenCV, straight to BGR) gives torchvision's pixels, EXIF orientation included."""
    texture = cv2.GaussianBlur(
        np.random.default_rng(1).integers(0, 256, (30, 40, 3), dtype=np.uint8), (0, 0), 2
    )
    image = Image.fromarray(texture)
    exif = image.getexif()
    exif[0x0112] = orientation
    image.save(tmp_path / "o.jpg", exif=exif.tobytes(), quality=95)
    expected = rgb_chw_to_bgr(read_image_file(tmp_path / "o.jpg"))
    np.testing.assert_array_equal(read_image_bgr(tmp_path / "o.jpg"), expected)
    assert expected.shape[:2] == ((40, 30) if orientation in (6, 8) else (30, 40))


@pytest.mark.shared
def test_opencv_and_torchvision_decode_the_shared_jpegs_alike(shared_dir: Path) -> None:
    files = sorted((shared_dir / "data").rglob("*.jpg"))[:60]
    assert files
    for path in files:
        np.testing.assert_array_equal(
            read_image_bgr(path), rgb_chw_to_bgr(read_image_file(path)), err_msg=str(path)
        )


def test_in_memory_images_arrays_pil_and_tensors(rgb: np.ndarray) -> None:
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    chw = torch.from_numpy(rgb).permute(2, 0, 1).contiguous()
    gray = rgb[..., 0]
    bgra = np.concatenate([bgr, np.full((*bgr.shape[:2], 1), 255, np.uint8)], axis=2)
    sources = [bgr, Image.fromarray(rgb), chw, chw[None], chw.float() / 255, np.stack([bgr, bgr]), bgra]
    frames, errors = _frames(sources)
    assert errors == [] and len(frames) == 8
    for frame in frames:
        assert frame.source is None and frame.kind == "image"
        np.testing.assert_array_equal(frame.image, bgr)
    (gray_frame,), _ = _frames(gray)
    np.testing.assert_array_equal(gray_frame.image, np.repeat(gray[:, :, None], 3, axis=2))
    _, errors = _frames([np.zeros((4, 4, 3), np.float32), torch.zeros(5, 4, 4, dtype=torch.uint8)])
    assert [e.source for e in errors] == ["image 0", "image 1"]
    assert "uint8" in str(errors[0]) and "channels" in str(errors[1])
    with pytest.raises(TypeError, match="unsupported source of type dict"):
        list(FrameReader({"not": "an image"}))


def test_video_frames_stride_timestamps_and_a_corrupt_frame(tmp_path: Path) -> None:
    video = write_video(tmp_path / "clip.avi", 30, fps=10.0, fourcc="MJPG")
    frames, errors = _frames(video)
    assert errors == [] and [f.index for f in frames] == list(range(30))
    assert all(f.kind == "video" and f.fps == 10.0 and f.frames == 30 for f in frames)
    assert frames[12].timestamp == pytest.approx(1.2) and frames[0].image.shape == (48, 64, 3)
    assert np.abs(frames[5].image.astype(int) - frame_pixels(5, (64, 48))).mean() < 8  # MJPG is lossy
    strided, _ = _frames(video, vid_stride=4)
    assert [f.index for f in strided] == list(range(0, 30, 4))

    corrupt_mjpeg_frame(video, 16)
    frames, errors = _frames(video)
    assert [(e.kind, e.frame) for e in errors] == [("corrupt frame", 16)]
    assert "clip.avi frame 16: cannot decode frame" in str(errors[0])
    assert [f.index for f in frames] == [i for i in range(30) if i != 16]  # reading goes on
    _, errors = _frames(video, vid_stride=2)
    assert [e.frame for e in errors] == [16]
    _, errors = _frames(video, vid_stride=3)  # frame 16 is not one of the frames read
    assert errors == []


def test_an_image_url_is_fetched_and_an_mjpeg_stream_is_read_then_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(video_module, "RECONNECT_DELAYS_S", (0.05, 0.05))
    frames = [jpeg(frame_pixels(i, (64, 48))) for i in range(12)]
    picture = frame_pixels(3, (40, 30))
    with media_server(MediaServer(image=jpeg(picture), frames=frames, interval=0.02)) as server:
        got, errors = _frames([server.url("image.jpg"), server.url("stream.mjpg")], live_capacity=64)
        assert server.requests[0] == "/image.jpg"  # fetched because it was named, and nothing else
    still, *stream = got
    assert still.source == server.url("image.jpg") and still.kind == "image"
    assert np.abs(still.image.astype(int) - picture).mean() < 4  # JPEG round trip
    assert 0 < len(stream) <= 12 and all(f.kind == "stream" for f in stream)
    indices = [f.index for f in stream]
    assert indices == sorted(set(indices)) and stream[0].timestamp is not None
    assert [e.kind for e in errors] == ["dropped", "stream lost"]
    assert all(e.source == server.url("stream.mjpg") for e in errors)
    assert "did not come back after 2 tries" in str(errors[-1])
    assert _no_reader_threads()


def test_a_stream_that_never_opens_names_its_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(video_module, "RECONNECT_DELAYS_S", (0.01,))
    with media_server(MediaServer(image=b"", frames=[], streams=0)) as server:
        url = server.url("stream.mjpg")
        frames, errors = _frames(url)
    assert frames == [] and len(errors) == 1
    assert errors[0].source == url and errors[0].kind == "unreadable"
    assert str(errors[0]).startswith(f"{url}: cannot open the stream (2 tries")


def test_a_camera_drops_frames_for_a_slow_consumer_and_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Camera 0 is a video file played as a live source: the reader runs ahead, the consumer sees the newest
    frames (at most ``capacity`` wait), the rest are dropped, and closing stops the thread."""
    video = write_video(tmp_path / "camera.mp4", 200)
    real_open = video_module.open_capture
    monkeypatch.setattr(video_module, "open_capture", lambda t: real_open(str(video) if t == 0 else t))
    live = LiveStream(0, item=0, capacity=2, delays=(0.01,))
    seen: list[int] = []
    for item in live:
        if isinstance(item, SourceError):  # the file ended: the "camera" dropped and is reopened
            assert item.kind == "dropped" and item.source == "camera 0"
            continue
        assert item.source == "camera 0" and item.kind == "stream"
        seen.append(item.index)
        time.sleep(0.05)  # slower than the camera
        if len(seen) == 5:
            break
    live.close()
    assert seen == sorted(seen) and live.dropped > 0 and seen[-1] - seen[0] > 4
    assert not live._thread.is_alive()
    # through the source syntax: an int, or a digit string that is not a file
    assert [(i.kind, i.value) for i in expand_source([0, "0"])] == [("stream", 0), ("stream", 0)]
    reader = FrameReader(0)
    for frame in reader:
        assert frame.source == "camera 0"
        break
    assert _no_reader_threads()


def test_closing_a_reader_mid_video_stops_its_thread(tmp_path: Path) -> None:
    video = write_video(tmp_path / "long.mp4", 120)
    reader = FrameReader([video, video], depth=2)
    for count, _ in enumerate(reader, 1):
        if count == 3:
            break
    assert _no_reader_threads()
    with FrameReader(video) as again:
        assert next(iter(again)).index == 0
    assert _no_reader_threads()


def test_without_opencv_videos_name_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    video = write_video(tmp_path / "clip.mp4", 2)
    monkeypatch.setitem(sys.modules, "cv2", None)
    with pytest.raises(MissingVideoExtraError, match=r'pip install "lucid-core\[video\]"') as info:
        require_cv2()
    assert "\n" not in str(info.value)
    with pytest.raises(MissingVideoExtraError):
        list(iter_items(expand_source(video)))
    image = np.zeros((8, 8, 3), np.uint8)
    assert len(list(FrameReader(image))) == 1  # still images need nothing from OpenCV


def test_notices_pass_silently_without_on_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream that drops and comes back, or a video shorter than it says, loses no result: without
    ``on_error`` those notices are not raised, while a stream that never comes back is."""
    monkeypatch.setattr(video_module, "RECONNECT_DELAYS_S", (0.05,))
    frames = [jpeg(frame_pixels(i, (64, 48))) for i in range(6)]
    with media_server(MediaServer(image=b"", frames=frames, interval=0.01, streams=2)) as server:
        reader = FrameReader(server.url("stream.mjpg"), live_capacity=64)
        with pytest.raises(SourceError, match="did not come back") as info:
            for _ in reader:
                pass
    assert info.value.kind == "stream lost"
    assert server.requests.count("/stream.mjpg") == 3  # served twice (a drop, reconnected), then refused
