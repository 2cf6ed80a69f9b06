"""`lucid-data download coco|dota`: resumable HTTP downloads with checksum verification. Nothing here runs
unless the user asks for it (no download on import or in training).

- Resume: an interrupted download is kept as `<file>.part`; the next run asks for the rest with an HTTP
  `Range: bytes=<size>-` request (RFC 9110 §14) and appends on `206 Partial Content`, or restarts when the
  server answers `200` (no range support).
- Verification: every asset carries its digest (md5 as published for COCO, sha256 for the others); a file is
  renamed into place only after its digest matches, a mismatch deletes the partial file and raises.
- Archives (.zip) are extracted next to the download, refusing members that would escape the target folder.

Sources: COCO 2017 from images.cocodataset.org (the URLs listed on cocodataset.org/#download, md5 digests as
widely published for these archives). DOTA's full release is distributed through Google Drive/Baidu behind
the DOTA site's form (captain-whu.github.io/DOTA/dataset.html), so `dota` fetches the one-scene example of the
official DOTA devkit (DOTA_devkit @ 99388551, academic use only) and `--url`/`--sha256` let a user fetch a
DOTA archive they have a link for.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ASSETS",
    "Asset",
    "ChecksumError",
    "download_dataset",
    "download_file",
    "extract_zip",
    "file_digest",
]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Asset:
    """One downloadable file: URL, target path relative to the dataset root, digest algorithm and value."""

    url: str
    filename: str
    algorithm: str
    digest: str
    extract: bool = False


_DEVKIT = "https://raw.githubusercontent.com/CAPTAIN-WHU/DOTA_devkit/99388551054be9a6dabb01c8bb2a7eb562d57b4f"

ASSETS: dict[str, dict[str, Asset]] = {
    "coco": {
        "annotations": Asset(
            "http://images.cocodataset.org/annotations/annotations_trainval2017.zip",
            "annotations_trainval2017.zip", "md5", "f4bbac642086de4f52a3fdda2de5fa2c", extract=True,
        ),
        "val": Asset(
            "http://images.cocodataset.org/zips/val2017.zip",
            "val2017.zip", "md5", "442b8da7639aecaf257c1dceb8ba8c80", extract=True,
        ),
        "train": Asset(
            "http://images.cocodataset.org/zips/train2017.zip",
            "train2017.zip", "md5", "cced6f7f71b7629ddf16f17bbcfab6b2", extract=True,
        ),
    },
    "dota": {
        "example-image": Asset(
            f"{_DEVKIT}/example/images/P1888.png", "example/images/P1888.png",
            "sha256", "697c30cddbf7a779593c045852da7bd34656c212a49dff146c24e5c30aacb950",
        ),
        "example-labels": Asset(
            f"{_DEVKIT}/example/labelTxt/P1888.txt", "example/labelTxt/P1888.txt",
            "sha256", "ff931f52121c2763205c8f2b2752fbe81b772be026e18aacea5a57ecb3c498cd",
        ),
    },
}  # fmt: skip


class ChecksumError(RuntimeError):
    """A downloaded file whose digest differs from the expected one."""


def file_digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def download_file(
    url: str,
    dest: str | Path,
    *,
    algorithm: str,
    digest: str,
    timeout: float = 60.0,
    progress: Callable[[int, int | None], None] | None = None,
) -> Path:
    """Download `url` to `dest` (resuming `dest.part`), verify `digest`, move into place; returns `dest`.

    An existing `dest` with the right digest is kept without any request.
    """
    dest = Path(dest)
    if dest.is_file() and file_digest(dest, algorithm) == digest.lower():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code != 416:  # 416: nothing left to send, the partial file may already be complete
            raise
        response = None
    if response is not None:
        with response:
            status = response.status
            mode = "ab" if status == 206 and have else "wb"
            if mode == "wb":
                have = 0
            length = response.headers.get("Content-Length")
            total = have + int(length) if length is not None else None
            with part.open(mode) as f:
                for block in iter(lambda: response.read(_CHUNK), b""):
                    f.write(block)
                    have += len(block)
                    if progress is not None:
                        progress(have, total)
    actual = file_digest(part, algorithm)
    if actual != digest.lower():
        part.unlink(missing_ok=True)
        raise ChecksumError(
            f"{url}: {algorithm} {actual} != expected {digest}; the download was removed. If the transfer was "
            "interrupted, run again; if the expected digest is wrong, correct it"
        )
    os.replace(part, dest)
    return dest


def extract_zip(archive: Path, target: Path) -> None:
    """Extract `archive` into `target`, refusing members outside it (absolute paths or `..`)."""
    target = target.resolve()
    with zipfile.ZipFile(archive) as zf:
        for member in zf.namelist():
            out = (target / member).resolve()
            if out != target and target not in out.parents:
                raise ValueError(f"{archive}: member {member!r} would be written outside {target}")
        zf.extractall(target)


def download_dataset(
    name: str,
    root: str | Path,
    *,
    parts: list[str] | None = None,
    assets: dict[str, dict[str, Asset]] | None = None,
    progress: Callable[[int, int | None], None] | None = None,
) -> Path:
    """Download (and extract) the `parts` of dataset `name` into `root/name`; returns that folder.

    COCO ends as `root/coco/{annotations,train2017,val2017}` (readable by `load_dataset(root/"coco")`).
    """
    table = (assets or ASSETS).get(name)
    if table is None:
        raise ValueError(f"unknown dataset {name!r}; available: {sorted(assets or ASSETS)}")
    chosen = parts or list(table)
    unknown = [p for p in chosen if p not in table]
    if unknown:
        raise ValueError(f"{name}: unknown part(s) {unknown}; available: {list(table)}")
    folder = Path(root) / name
    for part in chosen:
        asset = table[part]
        path = download_file(asset.url, folder / asset.filename, algorithm=asset.algorithm, digest=asset.digest,
                             progress=progress)  # fmt: skip
        if asset.extract:
            marker = folder / f".{asset.filename}.extracted"
            if not marker.is_file():
                extract_zip(path, folder)
                marker.write_text(asset.digest, encoding="utf-8")
    return folder
