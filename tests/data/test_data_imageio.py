"""load_image: grayscale, RGBA, 16-bit, palette and EXIF-rotated images decode to RGB uint8; corrupt files raise."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from lucid_data import CorruptImageError, image_size, load_image


@pytest.fixture()
def rgb() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)


def test_grayscale_png_is_replicated(tmp_path: Path, rgb: np.ndarray) -> None:
    gray = rgb[..., 0]
    Image.fromarray(gray, "L").save(tmp_path / "g.png")
    out = load_image(tmp_path / "g.png")
    assert out.shape == (30, 40, 3) and out.dtype == np.uint8
    assert (out == gray[..., None]).all()


def test_rgba_drops_alpha(tmp_path: Path, rgb: np.ndarray) -> None:
    rgba = np.dstack([rgb, np.full(rgb.shape[:2], 7, np.uint8)])
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    assert (load_image(tmp_path / "a.png") == rgb).all()


def test_rgb_png_channel_order(tmp_path: Path, rgb: np.ndarray) -> None:
    Image.fromarray(rgb).save(tmp_path / "c.png")
    assert (load_image(tmp_path / "c.png") == rgb).all()


@pytest.mark.parametrize("channels", [1, 3])
def test_16bit_png_scaled_to_8bit(tmp_path: Path, rgb: np.ndarray, channels: int) -> None:
    img8 = rgb[..., :channels]
    img16 = img8.astype(np.uint16) * 257  # v * 257 >> 8 == v
    cv2.imwrite(str(tmp_path / "d.png"), img16[..., ::-1] if channels == 3 else img16[..., 0])
    out = load_image(tmp_path / "d.png")
    expected = img8 if channels == 3 else np.repeat(img8, 3, axis=2)
    assert out.dtype == np.uint8 and (out == expected).all()


def test_palette_png(tmp_path: Path, rgb: np.ndarray) -> None:
    pal = Image.fromarray(rgb).quantize(16)
    pal.save(tmp_path / "p.png")
    assert (load_image(tmp_path / "p.png") == np.asarray(pal.convert("RGB"))).all()


@pytest.mark.parametrize(("orientation", "k"), [(3, 2), (6, -1), (8, 1)])
def test_exif_orientation_applied(tmp_path: Path, rgb: np.ndarray, orientation: int, k: int) -> None:
    image = Image.fromarray(rgb)
    exif = image.getexif()
    exif[0x0112] = orientation
    image.save(tmp_path / "e.jpg", exif=exif, quality=100)
    stored = np.asarray(Image.open(tmp_path / "e.jpg").convert("RGB"))  # pixels as stored (no rotation)
    out = load_image(tmp_path / "e.jpg")
    expected = np.rot90(stored, k)
    assert out.shape == expected.shape
    assert np.abs(out.astype(int) - expected).max() <= 1
    assert image_size(tmp_path / "e.jpg") == out.shape[:2]


def test_truncated_jpeg_raises(tmp_path: Path, rgb: np.ndarray) -> None:
    Image.fromarray(rgb).save(tmp_path / "ok.jpg")
    data = (tmp_path / "ok.jpg").read_bytes()
    (tmp_path / "t.jpg").write_bytes(data[: len(data) * 2 // 3])
    load_image(tmp_path / "ok.jpg")
    with pytest.raises(CorruptImageError, match="truncated JPEG") as info:
        load_image(tmp_path / "t.jpg")
    assert info.value.path == tmp_path / "t.jpg"


@pytest.mark.parametrize("content", [b"", b"not an image at all", None])
def test_garbage_and_truncated_png_raise(tmp_path: Path, rgb: np.ndarray, content: bytes | None) -> None:
    if content is None:
        Image.fromarray(rgb).save(tmp_path / "full.png")
        content = (tmp_path / "full.png").read_bytes()[:100]
    (tmp_path / "x.png").write_bytes(content)
    with pytest.raises(CorruptImageError, match=str(tmp_path / "x.png")):
        load_image(tmp_path / "x.png")


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(CorruptImageError, match="cannot read"):
        load_image(tmp_path / "nope.jpg")
