"""The training augmentation pipeline and its configuration (`AugmentConfig`, reference defaults).

Order (documented reference training transforms): [mosaic of 4 on a 2·imgsz canvas | letterbox to imgsz] →
copy-paste (p 0) → random affine cropping back to imgsz → mixup (p 0, partner built the same way) → HSV →
vertical flip (p 0) → horizontal flip (p 0.5, keypoints reordered by flip_idx).

Reproducibility (docs/DATA.md, "Reproducibility rule"): every random draw, including the choice of mosaic and
mixup partners, comes from the `numpy.random.Generator` passed in, which the dataset seeds with
`SeedSequence([seed, epoch, index, rank])`, so a sample is a function of those four numbers only, whatever the
worker layout.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import cv2
import numpy as np

from lucid_data.augment.affine import random_affine, random_affine_matrix, source_region, warp_image
from lucid_data.augment.classify_policies import check_auto_augment
from lucid_data.augment.copy_paste import copy_paste_flip
from lucid_data.augment.flip import flip_horizontal, flip_vertical
from lucid_data.augment.geometry import warp_targets
from lucid_data.augment.hsv import augment_hsv, augment_hsv_into
from lucid_data.augment.letterbox import letterbox_train
from lucid_data.augment.mixup import mixup
from lucid_data.augment.mosaic import mosaic4, mosaic4_layout, mosaic4_targets, paint_mosaic
from lucid_data.targets import Targets

__all__ = ["AugmentConfig", "AugmentPipeline", "ImageLoader"]

ImageLoader = Callable[[int], tuple[np.ndarray, Targets]]
"""index → (HWC uint8 RGB image resized so its long side is imgsz, its targets in those pixels)."""

#: the reference's mosaic partners come from the images of its last 8 batches, at most about 1000 images (measured
#: black box: ``tools/probe_mosaic_partners.py``, docs/DATA.md "Mosaic partners")
RECENT_BATCHES = 8
RECENT_MAX = 1000


@dataclass
class AugmentConfig:
    """Augmentation hyper-parameters; defaults are the reference's documented training defaults.

    mosaic 1.0, degrees 0, translate 0.1, scale 0.5, shear 0, perspective 0, hsv_h 0.015, hsv_s 0.7, hsv_v 0.4,
    flipud 0, fliplr 0.5, mixup 0, copy_paste 0, border fill 114, close_mosaic 10 (mosaic is switched off for the
    last `close_mosaic` epochs). ``mosaic_recent`` N > 0 draws a mosaic's 3 partners from the last N images of the
    epoch order, the sample's own included (the dataset's ``partner_pool``, as the reference's partners come from
    recently loaded images: docs/DATA.md, "Mosaic partners"); 0 from every image; None (default) is resolved by
    :meth:`for_batch` to the reference's window, the images of the last 8 batches up to 1000 (lucid-train does), and
    draws from every image where no batch size is known. Classification only
    (`lucid_data.augment.classify_policies`): auto_augment "randaugment" (None: colour jitter with the hsv gains
    instead) and erasing 0.4.
    """

    mosaic: float = 1.0
    degrees: float = 0.0
    translate: float = 0.1
    scale: float = 0.5
    shear: float = 0.0
    perspective: float = 0.0
    hsv_h: float = 0.015
    hsv_s: float = 0.7
    hsv_v: float = 0.4
    flipud: float = 0.0
    fliplr: float = 0.5
    mixup: float = 0.0
    copy_paste: float = 0.0
    fill: int = 114
    close_mosaic: int = 10
    mosaic_recent: int | None = None
    auto_augment: str | None = "randaugment"
    erasing: float = 0.4

    def __post_init__(self) -> None:
        check_auto_augment(self.auto_augment, "AugmentConfig")
        for name in ("mosaic", "flipud", "fliplr", "mixup", "copy_paste", "erasing"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"AugmentConfig.{name} is a probability in [0, 1], got {value!r}")
        for name in ("translate", "scale", "hsv_h", "hsv_s", "hsv_v"):
            if getattr(self, name) < 0:
                raise ValueError(f"AugmentConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        for name in ("close_mosaic", "mosaic_recent"):
            value = getattr(self, name)
            if name == "mosaic_recent" and value is None:
                continue  # resolved by `for_batch`
            if isinstance(value, float) and value.is_integer():
                setattr(self, name, int(value))  # a count given as 128.0 (a parsed number) is the count
            elif isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"AugmentConfig.{name} is a count, got {value!r}")
            if getattr(self, name) < 0:
                raise ValueError(f"AugmentConfig.{name} must be >= 0, got {value!r}")

    def for_batch(self, batch_size: int) -> AugmentConfig:
        """This configuration for training in batches of ``batch_size`` per process: ``mosaic_recent`` None becomes
        ``min(RECENT_BATCHES * batch_size, RECENT_MAX)``; a set value is kept."""
        if batch_size < 1:
            raise ValueError(f"batch_size: expected >= 1, got {batch_size!r}")
        if self.mosaic_recent is not None:
            return self
        return replace(self, mosaic_recent=min(RECENT_BATCHES * int(batch_size), RECENT_MAX))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AugmentConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"AugmentConfig: unknown option(s) {unknown}; known: {sorted(known)}")
        return cls(**data)


class AugmentPipeline:
    """Build one augmented training sample (imgsz x imgsz) from the dataset's image loader."""

    def __init__(
        self,
        config: AugmentConfig,
        imgsz: int,
        num_images: int,
        load: ImageLoader,
        flip_idx: list[int] | None = None,
    ) -> None:
        self.config = config
        self.imgsz = int(imgsz)
        self.num_images = int(num_images)
        self.load = load
        self.flip_idx = flip_idx
        self._scratch = (
            threading.local()
        )  # per-thread RGBA mosaic/warp buffers of the fast path (never returned)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_scratch"]  # scratch buffers are rebuilt on first use (spawned DataLoader workers)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._scratch = threading.local()

    def _buffer(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A reused uint8 buffer of this thread (allocating a fresh 1280x1280 canvas per sample page-faults)."""
        buffer: np.ndarray | None = getattr(self._scratch, name, None)
        if buffer is None or buffer.shape != shape:
            buffer = np.empty(shape, dtype=np.uint8)
            setattr(self._scratch, name, buffer)
        return buffer

    def _affine(
        self, image: np.ndarray, targets: Targets, rng: np.random.Generator, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, Targets]:
        c = self.config
        return random_affine(
            image,
            targets,
            rng,
            out_hw=(self.imgsz, self.imgsz),
            degrees=c.degrees,
            translate=c.translate,
            scale=c.scale,
            shear=c.shear,
            perspective=c.perspective,
            fill=c.fill,
            out=out,
        )

    def _mosaic_sources(
        self, index: int, rng: np.random.Generator, pool: Sequence[int] | None
    ) -> list[tuple[np.ndarray, Targets]]:
        """The sample's image and 3 random partners from ``pool`` (None: every image); an index drawn twice is
        loaded once (the loader's result is only read: same bytes, one decode)."""
        if pool is None:
            partners = [int(i) for i in rng.integers(0, self.num_images, 3)]
        else:
            partners = [int(pool[int(j)]) for j in rng.integers(0, len(pool), 3)]
        once: dict[int, tuple[np.ndarray, Targets]] = {}
        for i in (index, *partners):
            if int(i) not in once:
                once[int(i)] = self.load(int(i))
        return [once[int(i)] for i in (index, *partners)]

    def base(
        self,
        index: int,
        rng: np.random.Generator,
        *,
        mosaic_enabled: bool,
        partner_pool: Sequence[int] | None = None,
    ) -> tuple[np.ndarray, Targets]:
        """Mosaic (or letterbox) + copy-paste + random affine: an imgsz x imgsz image and its targets."""
        c = self.config
        if mosaic_enabled and c.mosaic > 0 and rng.random() < c.mosaic:
            loaded = self._mosaic_sources(index, rng, partner_pool)
            image, targets = mosaic4(
                [x[0] for x in loaded], [x[1] for x in loaded], rng, self.imgsz, fill=c.fill
            )
        else:
            image, targets = self.load(index)
            image, targets = letterbox_train(image, targets, self.imgsz, fill=c.fill, scaleup=False)
        image, targets = copy_paste_flip(image, targets, rng, c.copy_paste)
        return self._affine(image, targets, rng)

    def _base_rgba(
        self,
        index: int,
        rng: np.random.Generator,
        *,
        mosaic_enabled: bool,
        partner_pool: Sequence[int] | None = None,
    ) -> tuple[np.ndarray, Targets]:
        """`base` without copy-paste (p 0: it draws nothing), the mosaic built and warped as RGBA in this
        thread's reused buffers: the same random draws in the same order and the same RGB bytes (tested), on
        OpenCV's faster 4-channel warp path without a fresh 1280x1280 canvas per sample. The returned image may
        be a 4-channel view of a scratch buffer: `__call__` turns it into a new RGB array at once."""
        c = self.config
        if mosaic_enabled and c.mosaic > 0 and rng.random() < c.mosaic:
            loaded = self._mosaic_sources(index, rng, partner_pool)
            images = [x[0] for x in loaded]
            s = self.imgsz
            if all(im.ndim == 3 and im.shape[2] == 3 and im.dtype == np.uint8 for im in images):
                # mosaic4 + random_affine with the same draws in the same order (centre, then the matrix),
                # painting only the part of the canvas the warp reads (`source_region`): the same bytes
                layout = mosaic4_layout([im.shape[:2] for im in images], rng, s)
                targets = mosaic4_targets([x[1] for x in loaded], layout)
                n = layout.size
                m = random_affine_matrix(
                    rng,
                    (n, n),
                    (s, s),
                    degrees=c.degrees,
                    translate=c.translate,
                    scale=c.scale,
                    shear=c.shear,
                    perspective=c.perspective,
                )
                canvas = paint_mosaic(
                    images,
                    layout,
                    self._buffer("canvas", (n, n, 4)),
                    fill=c.fill,
                    region=source_region(m, (s, s), (n, n)),
                )
                warped = warp_image(
                    canvas,
                    m,
                    (s, s),
                    fill=c.fill,
                    perspective=bool(c.perspective),
                    out=self._buffer("warped", (s, s, 4)),
                )
                return warped, warp_targets(targets, m, (s, s))
            image, targets = mosaic4(images, [x[1] for x in loaded], rng, s, fill=c.fill)
        else:
            image, targets = self.load(index)
            image, targets = letterbox_train(image, targets, self.imgsz, fill=c.fill, scaleup=False)
        return self._affine(image, targets, rng)

    def __call__(
        self,
        index: int,
        rng: np.random.Generator,
        *,
        mosaic_enabled: bool = True,
        partner_pool: Sequence[int] | None = None,
        hsv_gains_out: list[np.ndarray] | None = None,
        owned: bool = True,
    ) -> tuple[np.ndarray, Targets]:
        """One augmented sample. ``hsv_gains_out`` (a list): defer HSV to the batch (``--data.device_hsv``) - the
        gains are drawn from ``rng`` exactly where the worker path draws them (so every later draw is unchanged)
        and appended to the list instead of being applied (``lucid_data.augment.hsv_torch.augment_hsv_batch``).
        ``owned=False``: the image may be a view of this thread's scratch buffer, valid until this thread's next
        call (the dataset copies it into its CHW tensor at once, which saves a full-image copy)."""
        c = self.config
        if c.mixup == 0 and c.copy_paste == 0:  # the defaults: the buffered RGBA path, same draws and bytes
            image, targets = self._base_rgba(
                index, rng, mosaic_enabled=mosaic_enabled, partner_pool=partner_pool
            )
        else:
            image, targets = self.base(index, rng, mosaic_enabled=mosaic_enabled, partner_pool=partner_pool)
            if c.mixup > 0 and rng.random() < c.mixup:
                partner = int(rng.integers(0, self.num_images))
                image2, targets2 = self.base(
                    partner, rng, mosaic_enabled=mosaic_enabled, partner_pool=partner_pool
                )
                image, targets = mixup(image, targets, image2, targets2, rng)
        scratch = image.ndim == 3 and image.shape[2] == 4
        if hsv_gains_out is not None:  # deferred: the worker path's draw, no pixel work
            any_gain = c.hsv_h or c.hsv_s or c.hsv_v
            gains = rng.uniform(-1, 1, 3) * np.array([c.hsv_h, c.hsv_s, c.hsv_v]) if any_gain else np.zeros(3)
            hsv_gains_out.append(gains)
            if scratch:
                h, w = image.shape[:2]
                image = cv2.cvtColor(image, cv2.COLOR_RGBA2RGB, dst=self._buffer("rgb", (h, w, 3)))
        elif scratch:  # the RGBA scratch warp: HSV (or the alpha drop) into this thread's RGB buffer
            h, w = image.shape[:2]
            rgb = self._buffer("rgb", (h, w, 3))
            hsv = augment_hsv_into(
                image,
                rng,
                c.hsv_h,
                c.hsv_s,
                c.hsv_v,
                hsv_buffer=self._buffer("hsv", (h, w, 3)),
                out=rgb,
                planes=[self._buffer(f"hsv{k}", (h, w)) for k in range(3)],
            )
            image = hsv if hsv is not None else cv2.cvtColor(image, cv2.COLOR_RGBA2RGB, dst=rgb)
        else:
            image = augment_hsv(image, rng, c.hsv_h, c.hsv_s, c.hsv_v)
        if c.flipud > 0 and rng.random() < c.flipud:
            image, targets = flip_vertical(image, targets)
            scratch = False  # a flip returns a new array
        if c.fliplr > 0 and rng.random() < c.fliplr:
            image, targets = flip_horizontal(image, targets, self.flip_idx)
            scratch = False
        return (image.copy() if scratch and owned else image), targets
