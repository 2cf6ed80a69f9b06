"""Issue 18 data fast paths: byte-identical to the straightforward pipeline, and the shared RAM cache.

The default training augmentation (mixup and copy-paste off) builds the mosaic as RGBA in reused buffers, warps it
on OpenCV's 4-channel path, applies HSV into buffers, flips with cv2.flip and converts to CHW with cv2.split. Each
test here rebuilds the same sample the plain way (3-channel canvas, cv2.warpAffine on RGB, `augment_hsv`, numpy
flips and transpose) from the same generator and requires the same bytes; the cache must give the same batches as
decoding, keep its pixels in one read-only arena and print its RAM bill.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from lucid_data import collate
from lucid_data.augment import AugmentConfig
from lucid_data.augment.affine import random_affine_matrix, warp_image
from lucid_data.augment.geometry import warp_targets
from lucid_data.augment.hsv import augment_hsv
from lucid_data.augment.mosaic import mosaic4
from lucid_data.augment.pipeline import AugmentPipeline
from lucid_data.cache import CacheTooLargeError, RamImageCache
from lucid_data.dataset import DetectionDataset, _hwc_to_chw
from lucid_data.synth import synthesize


@pytest.fixture(scope="module")
def detect_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize("detect", tmp_path_factory.mktemp("fast") / "det", n_train=5, n_val=1, imgsz=96, seed=7)


def _plain_sample(
    pipeline: AugmentPipeline, index: int, rng: np.random.Generator
) -> tuple[np.ndarray, object]:
    """The default-config sample composed the straightforward way (the definition the fast path must equal)."""
    c, s = pipeline.config, pipeline.imgsz
    assert rng.random() < c.mosaic  # mosaic 1.0: the draw the pipeline makes first
    picks = [index, *(int(i) for i in rng.integers(0, pipeline.num_images, 3))]
    loaded = [pipeline.load(i) for i in picks]
    canvas, targets = mosaic4([x[0] for x in loaded], [x[1] for x in loaded], rng, s, fill=c.fill)
    m = random_affine_matrix(
        rng, canvas.shape[:2], (s, s), degrees=c.degrees, translate=c.translate, scale=c.scale, shear=c.shear
    )
    image = cv2.warpAffine(canvas, m[:2], (s, s), flags=cv2.INTER_LINEAR, borderValue=(c.fill,) * 3)
    targets = warp_targets(targets, m, (s, s))
    image = augment_hsv(image, rng, c.hsv_h, c.hsv_s, c.hsv_v)
    if rng.random() < c.fliplr:
        image = np.ascontiguousarray(image[:, ::-1])
    return image, targets


def test_fast_pipeline_equals_the_plain_composition(detect_yaml: Path) -> None:
    ds = DetectionDataset(detect_yaml, imgsz=64, augment=True, seed=3)
    config = AugmentConfig(degrees=7.0, shear=2.0)  # rotation and shear exercise the 4-channel warp fully
    pipeline = AugmentPipeline(config, ds.imgsz, len(ds), ds._load_train, ds.flip_idx)
    for index in range(len(ds)):
        for epoch in range(3):
            seed = np.random.SeedSequence([5, epoch, index])
            fast, fast_targets = pipeline(index, np.random.default_rng(seed))
            plain, plain_targets = _plain_sample(pipeline, index, np.random.default_rng(seed))
            assert fast.shape == plain.shape and fast.flags.c_contiguous
            np.testing.assert_array_equal(fast, plain)
            assert len(fast_targets) == len(plain_targets)  # type: ignore[arg-type]


def test_fast_pipeline_reads_only_the_canvas_part_it_paints(detect_yaml: Path) -> None:
    """The fast path paints only the part of the mosaic canvas its warp reads (`source_region`); poisoning the
    rest of the reused canvas with noise before every sample must not change a byte, at extreme zoom, shift,
    rotation and shear."""
    ds = DetectionDataset(detect_yaml, imgsz=64, augment=True, seed=3)
    config = AugmentConfig(degrees=30.0, shear=10.0, scale=0.9, translate=0.3)
    pipeline = AugmentPipeline(config, ds.imgsz, len(ds), ds._load_train, ds.flip_idx)
    noise = np.random.default_rng(11)
    for k in range(40):
        canvas = pipeline._buffer("canvas", (128, 128, 4))
        canvas[...] = noise.integers(0, 256, canvas.shape, dtype=np.uint8)
        seed = np.random.SeedSequence([9, k])
        fast, _ = pipeline(k % len(ds), np.random.default_rng(seed))
        plain, _ = _plain_sample(pipeline, k % len(ds), np.random.default_rng(seed))
        np.testing.assert_array_equal(fast, plain)


def test_rgba_warp_equals_rgb_warp() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)
    for k in range(20):
        persp = 1e-4 if k % 2 else 0.0
        m = random_affine_matrix(rng, image.shape[:2], (64, 80), degrees=30, shear=5, perspective=persp)
        if persp:
            plain = cv2.warpPerspective(image, m, (80, 64), flags=cv2.INTER_LINEAR, borderValue=(114,) * 3)
        else:
            plain = cv2.warpAffine(image, m[:2], (80, 64), flags=cv2.INTER_LINEAR, borderValue=(114,) * 3)
        np.testing.assert_array_equal(
            warp_image(image, m, (64, 80), fill=114, perspective=bool(persp)), plain
        )


def test_mosaic_into_an_rgba_buffer_keeps_the_rgb_bytes() -> None:
    rng = np.random.default_rng(1)
    images = [
        rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((40, 32), (32, 40), (24, 40), (40, 40))
    ]
    from lucid_data.targets import Targets

    empty = [Targets(boxes=np.zeros((0, 4), np.float32), labels=np.zeros(0, np.int64)) for _ in images]
    plain, _ = mosaic4(images, empty, np.random.default_rng(2), 40)
    buffer = np.zeros((80, 80, 4), np.uint8)
    rgba, _ = mosaic4(images, empty, np.random.default_rng(2), 40, out=buffer)
    assert rgba is buffer
    np.testing.assert_array_equal(rgba[..., :3], plain)
    assert (rgba[..., 3][plain.sum(-1) != 3 * 114] == 255).all()


def test_chw_and_flip_helpers_are_exact() -> None:
    image = np.random.default_rng(3).integers(0, 256, (17, 23, 3), dtype=np.uint8)
    np.testing.assert_array_equal(_hwc_to_chw(image), image.transpose(2, 0, 1))
    assert _hwc_to_chw(image).flags.c_contiguous
    from lucid_data.augment.flip import _flip_pixels

    np.testing.assert_array_equal(_flip_pixels(image, 0), image[:, ::-1])
    np.testing.assert_array_equal(_flip_pixels(image, 1), image[::-1])
    single = image[..., :1].copy()
    assert _flip_pixels(single, 0).shape == single.shape


def test_cached_and_uncached_batches_are_byte_identical(
    detect_yaml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = DetectionDataset(detect_yaml, imgsz=64, augment=True, seed=2)
    cached = DetectionDataset(detect_yaml, imgsz=64, augment=True, seed=2, cache="ram")
    assert 'cache="ram" will hold 5 decoded images' in capsys.readouterr().err  # the bill, printed first
    for epoch in range(2):
        for ds in (plain, cached):
            ds.set_epoch(epoch)
        a = collate([plain[i] for i in range(len(plain))])
        b = collate([cached[i] for i in range(len(cached))])
        assert torch.equal(a["images"], b["images"])
        for key in ("batch_idx", "cls", "bboxes"):
            assert torch.equal(a[key], b[key]), key


def test_cache_pixels_live_in_one_read_only_arena(detect_yaml: Path) -> None:
    ds = DetectionDataset(detect_yaml, imgsz=64, augment=True, cache="ram")
    assert ds.cache is not None
    arena = ds.cache.arena
    assert arena.nbytes == ds.cache.needed_bytes == ds.cache.stored_bytes
    for i in range(len(ds)):
        image = ds.cache.get(i)
        assert image is not None and np.shares_memory(image, arena) and not image.flags.writeable
    with pytest.raises(ValueError):
        arena[0] = 1
    # the pipeline's scratch buffers do not travel into spawned workers
    clone = pickle.loads(pickle.dumps(ds.pipeline))
    assert clone.num_images == ds.pipeline.num_images


def test_cache_fraction_is_configurable_and_checked(detect_yaml: Path) -> None:
    with pytest.raises(CacheTooLargeError, match=r"limit 50% of it\).*larger cache_max_fraction"):
        RamImageCache([(10, 20)], available_bytes=1000, max_fraction=0.5)
    RamImageCache([(10, 20)], available_bytes=1000, max_fraction=0.7)  # 600 bytes fit under 700
    with pytest.raises(ValueError, match=r"max_fraction must be in \(0, 1\]"):
        RamImageCache([(10, 20)], available_bytes=1000, max_fraction=1.5)
    with pytest.raises(CacheTooLargeError, match=r"5 images need"):
        DetectionDataset(detect_yaml, imgsz=64, augment=True, cache="ram", cache_max_fraction=1e-12)
