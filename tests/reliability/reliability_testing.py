"""Helpers of the reliability tests (not a test module): the shared folder, planted malicious files, a URL server."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

#: ../shared, as tests/conftest.py finds it.
SHARED_DIR = Path(os.environ.get("LUCID_SHARED_DIR", Path(__file__).resolve().parents[2].parent / "shared"))


class _CreatesFileWhenUnpickled:
    """Unpickling this object calls ``open(marker, "w")``: the file appears only if the pickle's code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.marker, "w"))


def plant_malicious_checkpoint(path: Path, marker: Path) -> Path:
    """A ``torch.save`` zip (``.ckpt`` or ``.pt``) whose pickle creates ``marker`` when it is loaded unsafely."""
    payload = {"state_dict": {"w": torch.zeros(1)}, "model": _CreatesFileWhenUnpickled(marker)}
    torch.save(payload, path)
    return path


@contextmanager
def serve_file_once_on_localhost(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Serve ``path`` at ``http://127.0.0.1:<port>/<name>``; yields (url, requested paths). Stops on exit.

    The server thread handles requests until the block ends (``shutdown``), and every socket operation has a
    5 s timeout, so a test can never hang on it.
    """
    requested: list[str] = []
    body = path.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = 5

        def do_GET(self) -> None:
            requested.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{path.name}", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
