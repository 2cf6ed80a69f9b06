"""Test media made on the spot: synthetic videos (OpenCV's writer), a corrupted MJPEG frame, and a local HTTP server
on 127.0.0.1 serving an image and an MJPEG stream a bounded number of times."""

from __future__ import annotations

import http.server
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


def frame_pixels(index: int, size_wh: tuple[int, int]) -> np.ndarray:
    """Frame ``index`` of the synthetic videos: a flat BGR colour that changes with the index, and a bright
    square moving right (so a model sees something and frames differ)."""
    width, height = size_wh
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[...] = ((index * 7) % 200 + 20, (index * 13) % 200 + 20, (index * 29) % 200 + 20)
    side = max(4, min(width, height) // 4)
    x = (index * 3) % max(1, width - side)
    image[height // 3 : height // 3 + side, x : x + side] = 250
    return image


def write_video(
    path: Path, frames: int, size_wh: tuple[int, int] = (64, 48), fps: float = 10.0, fourcc: str = "mp4v"
) -> Path:
    """A ``frames``-frame video of :func:`frame_pixels` written by ``cv2.VideoWriter`` (``MJPG`` for ``.avi``)."""
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, size_wh)
    assert writer.isOpened(), f"OpenCV cannot write {path} with {fourcc}"
    for index in range(frames):
        writer.write(frame_pixels(index, size_wh))
    writer.release()
    return path


def corrupt_mjpeg_frame(path: Path, index: int) -> None:
    """Overwrite the JPEG data of frame ``index`` of an MJPG ``.avi`` (its SOI marker and most of its bytes), so
    that frame cannot be decoded while the others still can."""
    data = bytearray(path.read_bytes())
    starts = [m.start() for m in re.finditer(b"\xff\xd8\xff", data)]
    begin, end = starts[index], starts[index + 1]
    for k in range(begin, end - 64):
        data[k] = 0
    path.write_bytes(bytes(data))


def jpeg(image: np.ndarray) -> bytes:
    import cv2

    ok, encoded = cv2.imencode(".jpg", image)
    assert ok
    return bytes(encoded.tobytes())


@dataclass
class MediaServer:
    """What :func:`media_server` serves: ``/image.jpg`` (``image``) and ``/stream.mjpg`` (``frames`` JPEGs as
    ``multipart/x-mixed-replace``, ``interval`` s apart, at most ``streams`` times; later requests get 404)."""

    image: bytes
    frames: list[bytes]
    interval: float = 0.01
    streams: int = 1
    port: int = 0
    requests: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"


@contextmanager
def media_server(media: MediaServer) -> Iterator[MediaServer]:
    """Serve ``media`` on 127.0.0.1 (a free port) in a daemon thread for the ``with`` block."""
    served = {"streams": 0}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            media.requests.append(self.path)
            if self.path == "/image.jpg":
                self.send_response(200)
                self.send_header("Content-Type", "image/jpeg")
                self.send_header("Content-Length", str(len(media.image)))
                self.end_headers()
                self.wfile.write(media.image)
                return
            with lock:
                allowed = self.path == "/stream.mjpg" and served["streams"] < media.streams
                served["streams"] += allowed
            if not allowed:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
            self.end_headers()
            try:
                for data in media.frames:
                    self.wfile.write(b"--frame\r\nContent-Type: image/jpeg\r\n")
                    self.wfile.write(b"Content-Length: %d\r\n\r\n" % len(data))
                    self.wfile.write(data + b"\r\n")
                    time.sleep(media.interval)
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    media.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield media
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
