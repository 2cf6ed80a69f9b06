"""`lucid-data` CLI (check, convert) and resumable, verified downloads against a loopback HTTP server."""

from __future__ import annotations

import hashlib
import http.server
import io
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from PIL import Image

from lucid_data import load_dataset
from lucid_data.cli import main
from lucid_data.download import Asset, ChecksumError, download_dataset, download_file


def _dataset_with_problems(root: Path) -> tuple[Path, Path, Path]:
    for sub in ("images/train", "labels/train"):
        (root / sub).mkdir(parents=True)
    rng = np.random.default_rng(0)
    for stem in ("good", "bad"):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
            root / "images/train" / f"{stem}.jpg"
        )
    data = (root / "images/train/bad.jpg").read_bytes()
    (root / "images/train/bad.jpg").write_bytes(data[: len(data) // 2])  # truncated JPEG
    (root / "labels/train/good.txt").write_text("0 0.5 0.5 0.2 0.2\n5 0.5 0.5 0.2 0.2\n")
    (root / "labels/train/bad.txt").write_text("0 0.5 0.5 0.2\n")
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nnames: [a, b]\n")
    return root / "data.yaml", root / "labels/train/good.txt", root / "labels/train/bad.txt"


def test_check_reports_every_bad_label_and_corrupt_image(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    yaml_path, good, bad = _dataset_with_problems(tmp_path)
    assert main(["check", str(yaml_path)]) == 1
    out = capsys.readouterr().out
    assert f"{good}:2: class id 5 >= nc=2" in out
    assert f"{bad}:1: expected 5 numbers" in out
    assert f"{tmp_path / 'images/train/bad.jpg'}: corrupt image: " in out
    # the data YAML has no `val` split: a third problem (issue 13), named with the YAML
    assert f"{yaml_path}: no `val` split" in out
    assert "3 label problem(s), 1 corrupt image(s)" in out


def test_check_ok_and_unknown_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "images/train").mkdir(parents=True)
    (tmp_path / "labels/train").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "images/train/a.png")
    (tmp_path / "labels/train/a.txt").write_text("0 0.5 0.5 0.5 0.5\n")
    assert main(["check", str(tmp_path)]) == 0
    assert "OK: 1 images, 1 instances" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["check", str(tmp_path / "empty")]) == 2
    assert "expected a YOLO data YAML" in capsys.readouterr().err


def test_convert_cli_yolo_to_coco_and_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "src/images/train").mkdir(parents=True)
    (tmp_path / "src/labels/train").mkdir(parents=True)
    Image.fromarray(np.zeros((20, 40, 3), np.uint8)).save(tmp_path / "src/images/train/a.png")
    (tmp_path / "src/labels/train/a.txt").write_text("1 0.5 0.5 0.25 0.5\n0 0.2 0.3 0.1 0.1\n")
    (tmp_path / "src/data.yaml").write_text("path: .\ntrain: images/train\nnames: [x, y]\n")
    assert main(["convert", str(tmp_path / "src/data.yaml"), str(tmp_path / "coco"), "--to", "coco"]) == 0
    json_path = Path(capsys.readouterr().out.strip())
    assert json_path.is_file()
    assert main(["convert", str(json_path), str(tmp_path / "yolo"), "--to", "yolo"]) == 0
    yaml_path = Path(capsys.readouterr().out.strip())
    a = load_dataset(tmp_path / "src/data.yaml").records[0].targets
    b = load_dataset(yaml_path).records[0].targets
    assert (a.labels == b.labels).all()
    np.testing.assert_allclose(a.boxes, b.boxes, atol=1e-4)


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves `payloads[path]`, honouring `Range: bytes=N-` with 206 (RFC 9110 §14)."""

    payloads: ClassVar[dict[str, bytes]] = {}
    ranges: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        data = self.payloads.get(self.path)
        if data is None:
            self.send_error(404)
            return
        header = self.headers.get("Range")
        type(self).ranges.append(header)
        start = int(header.removeprefix("bytes=").rstrip("-")) if header else 0
        if start >= len(data) and header:
            self.send_response(416)
            self.end_headers()
            return
        self.send_response(206 if header else 200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _RangeHandler.ranges = []
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_download_resumes_with_range_and_verifies(server: str, tmp_path: Path) -> None:
    payload = bytes(np.random.default_rng(1).integers(0, 256, 300_000, dtype=np.uint8))
    _RangeHandler.payloads = {"/f.bin": payload}
    digest = hashlib.sha256(payload).hexdigest()
    dest = tmp_path / "f.bin"
    (tmp_path / "f.bin.part").write_bytes(payload[:123_456])  # an interrupted earlier run
    download_file(f"{server}/f.bin", dest, algorithm="sha256", digest=digest)
    assert dest.read_bytes() == payload and not (tmp_path / "f.bin.part").exists()
    assert _RangeHandler.ranges == ["bytes=123456-"]
    download_file(f"{server}/f.bin", dest, algorithm="sha256", digest=digest)  # already there: no request
    assert len(_RangeHandler.ranges) == 1


def test_download_checksum_mismatch_removes_partial(server: str, tmp_path: Path) -> None:
    _RangeHandler.payloads = {"/f.bin": b"hello world"}
    with pytest.raises(ChecksumError, match="md5"):
        download_file(f"{server}/f.bin", tmp_path / "f.bin", algorithm="md5", digest="0" * 32)
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "f.bin.part").exists()


def test_download_cli_wrong_digest_is_a_clean_error(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _RangeHandler.payloads = {"/scene.zip": b"not the expected bytes"}
    code = main(
        ["download", "dota", "--root", str(tmp_path), "--url", f"{server}/scene.zip", "--sha256", "0" * 64]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "error:" in err and "scene.zip" in err and "0" * 64 in err and "Traceback" not in err
    assert not list(tmp_path.rglob("scene.zip*"))


def test_download_dataset_extracts_zip(server: str, tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("val2017/a.txt", "x")
    _RangeHandler.payloads = {"/v.zip": buf.getvalue()}
    md5 = hashlib.md5(buf.getvalue()).hexdigest()
    assets = {"coco": {"val": Asset(f"{server}/v.zip", "v.zip", "md5", md5, extract=True)}}
    folder = download_dataset("coco", tmp_path, parts=["val"], assets=assets)
    assert (folder / "val2017" / "a.txt").read_text() == "x"
    with pytest.raises(ValueError, match="unknown part"):
        download_dataset("coco", tmp_path, parts=["nope"], assets=assets)


def test_synth_then_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "synth"
    assert (
        main(
            [
                "synth",
                "--task",
                "pose",
                "--output",
                str(out),
                "--n-train",
                "4",
                "--n-val",
                "2",
                "--imgsz",
                "64",
            ]
        )
        == 0
    )
    yaml_path = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["check", str(yaml_path)]) == 0
    assert "OK: 6 images" in capsys.readouterr().out
    src = load_dataset(yaml_path, "train")
    assert src.task == "pose" and len(src) == 4
