"""`DetectionDataset`: a torch Dataset for every registered task (no Lightning).

A sample carries the target fields its task declares (`lucid_core.tasks.get_task(task).target_fields`): masks →
polygons (and the mask maps of `lucid_data.masks`), keypoints → keypoints, rboxes → rotated boxes with their
polygons; boxes and classes always. An image-level task (classify, `Task.image_level`) gets the classification
transforms instead (`lucid_data.augment.classify`: a random resized crop over the area range the config's `scale`
gives, flips and HSV jitter for training, shorter side resize + centre crop for evaluation, both to a square imgsz
from the full-resolution image) and its sample a `"label"` (the image's class index) beside targets holding that
class over the whole input.

Training (`augment=True`): the `AugmentPipeline` (mosaic, affine, HSV, flips, …; `AugmentConfig` defaults) on
images whose long side is resized to imgsz. Evaluation (`augment=False`): `lucid_core.geometry.letterbox.letterbox`
with `auto=False` to a square imgsz, the same letterbox as `predict`; the sample's meta keeps the `LetterboxInfo`
so predictions map back to original pixels. After `use_rect_batches` (in-training validation, the reference's
`rect=True`), each image is instead resized to a long side of imgsz and padded to the stride-aligned shape of its
aspect-sorted batch (`lucid_data.rect`).

Reproducibility: the augmentation of sample `index` is drawn from
`np.random.default_rng(np.random.SeedSequence([seed, epoch, index, rank]))` only, so batches are byte-identical
for any `num_workers` (call `set_epoch` before creating each epoch's iterator). With `persistent_workers=True` the
workers keep the dataset state they were started with, so a sampler there yields :class:`SampleKey` items instead
of plain indices: `(epoch, mosaic_enabled, image_index)` read from the main process's dataset when the epoch's iterator
is made, and `__getitem__` adopts that state in the worker (``lucid_train``'s training sampler does this).

Bad input: images whose file is empty, unreadable or a truncated JPEG are found before the first epoch (a cheap
container check, or a full decode with `verify="full"`) and excluded; they are listed once in a logged warning
and kept in `dataset.excluded`. An image that still fails to decode mid-epoch is replaced by the next valid
index (deterministically), recorded and warned about once — never a crash, never silent.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Literal, NamedTuple

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from lucid_core.geometry.letterbox import LetterboxInfo, letterbox
from lucid_core.tasks import get_task
from lucid_data.augment.classify import classify_eval, crop_scale
from lucid_data.augment.classify_policies import classify_augment
from lucid_data.augment.geometry import (
    polygons_to_min_area_rboxes,
    rboxes_to_corners,
    scale_translation,
    warp_targets,
)
from lucid_data.augment.letterbox import resize_long_side
from lucid_data.augment.pipeline import AugmentConfig, AugmentPipeline
from lucid_data.cache import DEFAULT_DECODE_BUFFER_MIB, DEFAULT_MAX_FRACTION, RamImageCache, RecentDecodes
from lucid_data.imageio import CorruptImageError, image_size, load_image, verify_image
from lucid_data.masks import segment_masks
from lucid_data.opencv_threads import single_threaded_worker
from lucid_data.order import rank_order, recent_images
from lucid_data.readers import load_dataset
from lucid_data.records import DatasetSource, ImageRecord, Task
from lucid_data.rect import RectBatches, rect_batches, rect_letterbox
from lucid_data.rle import decode as decode_rle
from lucid_data.targets import Targets

__all__ = ["DetectionDataset", "ExcludedImage", "single_threaded_worker"]

logger = logging.getLogger(__name__)

_JPEG_SOI = b"\xff\xd8"
_JPEG_EOI = b"\xff\xd9"
_EOI_TAIL = 4096
DEFAULT_MASK_RATIO = 4


class ExcludedImage(tuple[Path, str]):
    """(path, reason) of an image left out of the dataset."""

    __slots__ = ()

    def __new__(cls, path: Path, reason: str) -> ExcludedImage:
        return super().__new__(cls, (Path(path), str(reason)))

    @property
    def path(self) -> Path:
        return self[0]

    @property
    def reason(self) -> str:
        return self[1]


def _quick_check(path: Path) -> str | None:
    """Cheap container check (no decode): missing/empty file, or a JPEG without its end-of-image marker."""
    try:
        size = path.stat().st_size
        if size == 0:
            return "empty file"
        with path.open("rb") as f:
            head = f.read(2)
            f.seek(max(size - _EOI_TAIL, 0))
            tail = f.read()
    except OSError as exc:
        return f"cannot read file ({exc.strerror or exc})"
    if head == _JPEG_SOI and _JPEG_EOI not in tail:
        return "truncated JPEG (no end-of-image marker FF D9)"
    return None


def _mask_to_polygon(mask: np.ndarray) -> np.ndarray:
    """Outline of the largest connected part of a bool mask (cv2.findContours), (P, 2) float32."""
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    if not contours:
        return np.zeros((0, 2), np.float32)
    best = max(contours, key=cv2.contourArea)
    return best.reshape(-1, 2).astype(np.float32)


def _box_polygon(box: np.ndarray) -> np.ndarray:
    x1, y1, x2, y2 = (float(v) for v in box)
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], np.float32)


class SampleKey(NamedTuple):
    """A sample index with the epoch state its augmentation depends on (see the module docstring)."""

    epoch: int
    mosaic_enabled: bool
    image_index: int


class DetectionDataset(Dataset[dict[str, Any]]):
    """One split of a dataset as training/evaluation samples {"image", "targets", "meta"[, "masks"]}.

    Args:
        source: a `DatasetSource` or a path understood by `lucid_data.readers.load_dataset`.
        imgsz: square network input size.
        augment: training augmentation (True) or evaluation letterbox (False).
        augment_config: `AugmentConfig` (reference defaults when None).
        seed, rank: reproducibility keys (with the epoch set by `set_epoch`).
        cache: None or "ram" (decoded images kept in memory; refused with the numbers when too large).
        cache_max_fraction: the largest fraction of the available memory (MemAvailable) `cache="ram"` may take;
            its RAM bill is printed before anything is decoded (`lucid_data.cache`).
        decode_buffer_mib: training without `cache`: the most recently decoded images kept per process, in MiB
            (`lucid_data.cache.RecentDecodes`; same bytes, fewer decodes when an image is drawn again soon, e.g.
            as a mosaic partner); 0 = decode every load.
        verify: "quick" (container check of every file), "full" (decode every image once) or "none".
        mask_ratio: downsampling of the masks produced for segment (reference mask ratio 4).
        overlap_mask: segment samples carry one index map per image with their targets sorted by mask area
            (True, the reference default) instead of one 0/1 mask per instance (`lucid_data.masks`, R1–R6).
        defer_hsv: training samples carry their drawn HSV gains (`"hsv_gains"`, float64 (3,)) instead of the HSV
            transform, for `lucid_data.augment.hsv_torch.augment_hsv_batch` on the training device
            (`--data.device_hsv`); every other draw and pixel is unchanged.
    """

    def __init__(
        self,
        source: DatasetSource | str | Path,
        *,
        imgsz: int = 640,
        augment: bool = False,
        augment_config: AugmentConfig | None = None,
        split: str = "train",
        task: Task | None = None,
        seed: int = 0,
        rank: int = 0,
        cache: Literal["ram"] | None = None,
        cache_max_fraction: float = DEFAULT_MAX_FRACTION,
        decode_buffer_mib: float = DEFAULT_DECODE_BUFFER_MIB,
        verify: Literal["quick", "full", "none"] = "quick",
        mask_ratio: int = DEFAULT_MASK_RATIO,
        defer_hsv: bool = False,
        overlap_mask: bool = True,
    ) -> None:
        if isinstance(source, (str, Path)):
            source = load_dataset(Path(source), split, task)
        self.source = source
        self.task: Task = task or source.task
        #: the target fields every sample carries (the task's `target_fields`)
        self.target_fields = get_task(self.task).target_fields
        #: one class per image (classification transforms, `"label"` samples) instead of instance targets
        self.image_level = get_task(self.task).image_level
        self.names = dict(source.names)
        self.kpt_shape = source.kpt_shape
        self.flip_idx = list(source.flip_idx) if source.flip_idx is not None else None
        #: pose: the dataset's own OKS sigmas (validated by the reader) for the loss and the metric; None = defaults
        self.kpt_sigmas = list(source.kpt_sigmas) if source.kpt_sigmas is not None else None
        self.imgsz = int(imgsz)
        self.augment = bool(augment)
        self.config = augment_config or AugmentConfig()
        if "keypoints" in self.target_fields and self.flip_idx is None and self.kpt_shape is not None:
            if self.augment and self.config.fliplr > 0:
                where = source.data_yaml or source.root
                raise ValueError(
                    f"{where}: pose dataset without `flip_idx`, but training flips images left-right "
                    f"(fliplr={self.config.fliplr}): a mirrored person would keep its left keypoints on the "
                    f"right. Add `flip_idx` to the data YAML (the index each of the {self.kpt_shape[0]} keypoints "
                    "takes after a flip, e.g. [0, 2, 1, ...]; itself for a keypoint without a side) or train "
                    "with fliplr 0"
                )
            self.flip_idx = list(range(self.kpt_shape[0]))  # no flips happen: the order is never used
        self.seed = int(seed)
        self.rank = int(rank)
        #: ranks sharing the epoch order (`lucid_data.order.rank_order`); set with `rank` by a distributed loader
        self.world_size = 1
        self.epoch = 0
        self._orders: dict[tuple[int, int, int], tuple[list[int], dict[int, int]]] = {}
        self.mosaic_enabled = True
        self.mask_ratio = int(mask_ratio)
        self.defer_hsv = bool(defer_hsv)
        self.overlap_mask = bool(overlap_mask)
        if cache not in (None, "ram"):
            raise ValueError(f'cache must be None or "ram", got {cache!r}')
        self.excluded: list[ExcludedImage] = []
        self._warned: set[Path] = set()
        records = self._verify(list(source.records), verify)
        self.records: list[ImageRecord] = records
        self._targets: dict[int, Targets] = {}
        self.cache: RamImageCache | None = None
        if cache == "ram" and records:
            self.cache = RamImageCache(
                [self._load_size(r) for r in records], max_fraction=cache_max_fraction, report=True
            )
            kept: list[ImageRecord] = []
            for record in records:
                image = self._decode_or_none(record)
                if image is not None:
                    self.cache.put(len(kept), image)
                    kept.append(record)
            self.records = kept
        self._report_excluded()
        if float(decode_buffer_mib) < 0:
            raise ValueError(f"decode_buffer_mib must be >= 0 (0 = off), got {decode_buffer_mib!r}")
        #: training without a RAM cache: the recent decodes of this process (None = every load decodes)
        self.recent: RecentDecodes | None = None
        if self.augment and self.cache is None and float(decode_buffer_mib) > 0:
            self.recent = RecentDecodes(int(float(decode_buffer_mib) * 2**20))
        #: dataset index -> (h, w) network input of its rectangular batch (`use_rect_batches`); None = square.
        self.rect_shapes: dict[int, tuple[int, int]] | None = None
        self.pipeline = AugmentPipeline(
            self.config, self.imgsz, len(self.records), self._load_train, self.flip_idx
        )

    # ----------------------------------------------------------------- bookkeeping
    def __len__(self) -> int:
        return len(self.records)

    def set_epoch(self, epoch: int, epochs: int | None = None) -> None:
        """Set the epoch used to seed augmentation; with the total `epochs`, mosaic is switched off for the
        last `config.close_mosaic` epochs (reference `close_mosaic`)."""
        self.epoch = int(epoch)
        if (
            epochs is not None
            and self.config.close_mosaic > 0
            and self.epoch >= int(epochs) - self.config.close_mosaic
        ):
            self.close_mosaic()

    def close_mosaic(self) -> None:
        """Switch mosaic (and the mixup that rides on it) off for the remaining epochs."""
        self.mosaic_enabled = False

    def _rank_order(self, epoch: int) -> tuple[list[int], dict[int, int]]:
        """This rank's order of ``epoch`` and each index's first position in it (the last few epochs kept)."""
        key = (epoch, self.rank, self.world_size)
        if key not in self._orders:
            order = rank_order(
                len(self.records), seed=self.seed, epoch=epoch, rank=self.rank, world_size=self.world_size
            )
            first: dict[int, int] = {}
            for position, image in enumerate(order):
                first.setdefault(image, position)
            if len(self._orders) >= 4:
                self._orders.pop(next(iter(self._orders)))
            self._orders[key] = (order, first)
        return self._orders[key]

    def mosaic_partner_pool(self, index: int) -> list[int] | None:
        """The images a training sample's mosaic partners are drawn from, as the reference keeps the images it loaded
        last: the distinct images among the `config.mosaic_recent` this rank's epoch order visits up to `index`
        (`lucid_data.order.recent_images`); a window as large as the order keeps every image visited so far (in
        later epochs all of them). None = any image (setting 0 or None, every image, an index outside this rank's
        order, or a rank set without its `world_size`)."""
        size = self.config.mosaic_recent
        if size is None or size <= 0 or not self.records or not 0 <= self.rank < self.world_size:
            return None
        order, first = self._rank_order(self.epoch)
        if index not in first:
            return None
        position = first[index]
        if size >= len(order):
            return list(order[: position + 1]) if self.epoch == 0 else None
        before = self._rank_order(self.epoch - 1)[0] if self.epoch > 0 and position + 1 < size else []
        window = recent_images(order, before, position, size)
        return list(dict.fromkeys(reversed(window)))[::-1]  # an image visited twice in the window counts once

    def rng_for(self, index: int) -> np.random.Generator:
        """The generator of sample `index`: a function of (seed, epoch, index, rank) only."""
        return np.random.default_rng(np.random.SeedSequence([self.seed, self.epoch, int(index), self.rank]))

    @property
    def num_classes(self) -> int:
        return len(self.names)

    def use_rect_batches(self, batch_size: int, *, stride: int = 32, pad: float = 0.5) -> RectBatches:
        """Letterbox evaluation samples to rectangular, aspect-sorted batches (`lucid_data.rect.rect_batches`).

        Returns the `RectBatches` whose index batches a `RectBatchSampler` must serve (an image's shape is its
        batch's). Evaluation datasets only (`augment=False`). An image-level task's inputs are all the square imgsz
        centre crop: its batches are consecutive indices, each of shape (imgsz, imgsz).
        """
        if self.augment:
            raise ValueError(
                "use_rect_batches: rectangular batches are for evaluation datasets (augment=False)"
            )
        if self.image_level:
            chunks = [
                tuple(range(i, min(i + batch_size, len(self)))) for i in range(0, len(self), batch_size)
            ]
            return RectBatches(tuple(chunks), tuple((self.imgsz, self.imgsz) for _ in chunks))
        batches = rect_batches(
            [self._load_size(r) for r in self.records], batch_size, self.imgsz, stride=stride, pad=pad
        )
        self.rect_shapes = batches.shape_of()
        return batches

    # ----------------------------------------------------------------- bad input
    def _exclude(self, path: Path, reason: str) -> None:
        self.excluded.append(ExcludedImage(path, reason))

    def _verify(self, records: list[ImageRecord], verify: str) -> list[ImageRecord]:
        if verify not in ("quick", "full", "none"):
            raise ValueError(f'verify must be "quick", "full" or "none", got {verify!r}')
        if verify == "none":
            return records
        kept = []
        for r in records:
            reason = _quick_check(Path(r.path))
            if reason is None and verify == "full":
                try:
                    verify_image(r.path)
                except CorruptImageError as exc:
                    reason = exc.reason
            if reason is None:
                kept.append(r)
            else:
                self._exclude(Path(r.path), reason)
        return kept

    def _report_excluded(self) -> None:
        if self.excluded:
            listing = "\n".join(f"  {e.path}: {e.reason}" for e in self.excluded)
            logger.warning(
                "%d image(s) excluded from %s/%s:\n%s",
                len(self.excluded),
                self.source.root,
                self.source.split,
                listing,
            )

    def _decode_or_none(self, record: ImageRecord) -> np.ndarray | None:
        try:
            return self._decode(record)
        except CorruptImageError as exc:
            self._exclude(exc.path, exc.reason)
            return None

    # ----------------------------------------------------------------- loading
    def _load_size(self, record: ImageRecord) -> tuple[int, int]:
        h, w = record.size_hw if record.size_hw and record.size_hw[0] > 0 else image_size(record.path)
        if not self.augment or self.image_level:
            return int(h), int(w)
        r = self.imgsz / max(h, w)
        return min(math.ceil(h * r), self.imgsz), min(math.ceil(w * r), self.imgsz)

    def _decode(self, record: ImageRecord) -> np.ndarray:
        """The load step: decode; for training also resize the long side to imgsz (what the cache stores)."""
        image = load_image(record.path)
        if self.augment and not self.image_level:  # the classification crop reads the full-resolution image
            image, _ = resize_long_side(image, self.imgsz)
        return image

    def _image(self, index: int) -> tuple[int, np.ndarray]:
        """Image of `index`, or of the next decodable index when it turns out corrupt (recorded and warned once)."""
        n = len(self.records)
        for step in range(n):
            i = (index + step) % n
            if self.cache is not None:
                cached = self.cache.get(i)
                if cached is not None:
                    return i, cached
            elif self.recent is not None:
                recent = self.recent.get(i)
                if recent is not None:
                    return i, recent
            path = Path(self.records[i].path)
            if path in self._warned:
                continue
            try:
                image = self._decode(self.records[i])
                if self.recent is not None:
                    self.recent.put(i, image)
                return i, image
            except CorruptImageError as exc:
                self._warned.add(path)
                self._exclude(path, exc.reason)
                logger.warning(
                    "excluded corrupt image %s (%s); using the next image instead", path, exc.reason
                )
        raise RuntimeError(f"{self.source.root}: no decodable image left in split {self.source.split!r}")

    def targets_for(self, index: int) -> Targets:
        """The record's targets in original pixels, with exactly the task's target fields."""
        cached = self._targets.get(index)
        if cached is None:
            cached = self._prepare_targets(self.records[index])
            self._targets[index] = cached
        return cached

    def _prepare_targets(self, record: ImageRecord) -> Targets:
        t = record.targets
        polygons = keypoints = rboxes = None
        fields = self.target_fields
        if "masks" in fields:
            polygons = []
            for i in range(len(t)):
                poly = t.polygons[i] if t.polygons is not None else np.zeros((0, 2), np.float32)
                if len(poly) < 3 and t.masks is not None:
                    poly = _mask_to_polygon(t.masks[i])
                rle_i = record.rles[i] if record.rles is not None else None
                if len(poly) < 3 and rle_i is not None:
                    poly = _mask_to_polygon(np.asarray(decode_rle(rle_i)).astype(bool))
                if len(poly) < 3:
                    poly = _box_polygon(t.boxes[i])
                polygons.append(poly)
        if "keypoints" in fields:
            k = (
                self.kpt_shape[0]
                if self.kpt_shape
                else (t.keypoints.shape[1] if t.keypoints is not None else 0)
            )
            keypoints = t.keypoints if t.keypoints is not None else np.zeros((len(t), k, 3), np.float32)
        if "rboxes" in fields:
            if t.rboxes is not None:
                rboxes = t.rboxes
            else:
                rboxes = polygons_to_min_area_rboxes(t.polygons or [_box_polygon(b) for b in t.boxes]).astype(
                    np.float32
                )
            # the labelled polygons travel with the rotated boxes: augmentation moves and clips them and refits
            # the box from them (reference behaviour, `lucid_data.augment.geometry`); else the box's corners
            corners = rboxes_to_corners(rboxes).astype(np.float32)
            given = t.polygons if t.polygons is not None else [np.zeros((0, 2), np.float32)] * len(t)
            polygons = [p if len(p) >= 3 else corners[i] for i, p in enumerate(given)]
        return Targets(
            boxes=t.boxes,
            labels=t.labels,
            polygons=polygons,
            keypoints=keypoints,
            rboxes=rboxes,
            iscrowd=t.iscrowd,
            difficult=t.difficult,
            image_id=record.image_id,
            orig_size=(int(record.size_hw[0]), int(record.size_hw[1])) if record.size_hw else t.orig_size,
        )

    def _load_train(self, index: int) -> tuple[np.ndarray, Targets]:
        """ImageLoader of the pipeline: long-side-resized image and its targets."""
        i, image = self._image(index)
        targets = self.targets_for(i)
        if targets.iscrowd.any():  # crowd regions (COCO iscrowd=1) are not training instances
            targets = targets.select(~targets.iscrowd)
        h0, w0 = self.records[i].size_hw if self.records[i].size_hw else targets.orig_size
        h, w = image.shape[:2]
        if (h, w) != (h0, w0):
            targets = warp_targets(
                targets, scale_translation(w / w0, h / h0, 0, 0), (h, w), filter_candidates=False
            )
        return image, targets

    # ----------------------------------------------------------------- samples
    def sample_key(self, index: int) -> SampleKey:
        """``index`` with this dataset's current epoch state, for a sampler feeding persistent workers."""
        return SampleKey(self.epoch, self.mosaic_enabled, int(index))

    def __getitem__(self, index: int | SampleKey) -> dict[str, Any]:
        if isinstance(index, SampleKey):  # the epoch state travels with the index (persistent workers)
            self.epoch, self.mosaic_enabled, index = (
                int(index.epoch),
                bool(index.mosaic_enabled),
                int(index.image_index),
            )
        if not 0 <= index < len(self.records):
            raise IndexError(f"index {index} out of range for a dataset of {len(self.records)} images")
        if self.image_level:
            return self._image_label_sample(index)
        letterbox_info = None
        hsv_gains: list[np.ndarray] | None = [] if (self.augment and self.defer_hsv) else None
        if self.augment:
            image, targets = self.pipeline(  # a scratch view: `_hwc_to_chw` below copies it before any reuse
                index,
                self.rng_for(index),
                mosaic_enabled=self.mosaic_enabled,
                partner_pool=self.mosaic_partner_pool(index) if self.mosaic_enabled else None,
                hsv_gains_out=hsv_gains,
                owned=False,
            )
            used = index
        else:
            used, original = self._image(index)
            targets = self.targets_for(used)
            if self.rect_shapes is not None:
                shape = self.rect_shapes[index]
                image, targets, letterbox_info = _rect_eval_letterbox(
                    original, targets, self.imgsz, shape, self.config.fill
                )
            else:
                image, targets, letterbox_info = _eval_letterbox(
                    original, targets, self.imgsz, self.config.fill
                )
        record = self.records[used]
        targets.image_id = record.image_id
        orig = tuple(int(v) for v in (record.size_hw or targets.orig_size))
        targets.orig_size = (orig[0], orig[1])
        sample: dict[str, Any] = {
            "image": torch.from_numpy(_hwc_to_chw(image)),
            "targets": targets,
            "meta": {
                "image_id": record.image_id,
                "path": str(record.path),
                "orig_size": (orig[0], orig[1]),
                "letterbox": letterbox_info,
                "index": used,
            },
        }
        if hsv_gains:
            sample["hsv_gains"] = torch.from_numpy(np.asarray(hsv_gains[0], dtype=np.float64))
        if "masks" in self.target_fields:
            seg = segment_masks(
                targets.polygons or [],
                targets.labels,
                image.shape[:2],
                self.mask_ratio,
                overlap=self.overlap_mask,
            )
            if self.overlap_mask:  # the index map's values refer to the area-sorted targets (R5)
                sample["targets"] = targets.select(seg.order)
            sample["masks"] = seg.masks
            sample["sem_masks"] = seg.sem_masks
        return sample

    def _image_label_sample(self, index: int) -> dict[str, Any]:
        """The sample of an image-level task: the classification transform of the image (module docstring), its
        ``"label"``, targets of that class over the whole input, and the meta (``letterbox``: the centre crop's
        placement in evaluation, None in training)."""
        used, original = self._image(index)
        info = None
        if self.augment:
            c = self.config
            hsv = (c.hsv_h, c.hsv_s, c.hsv_v)
            image = classify_augment(
                original,
                self.imgsz,
                self.rng_for(index),
                fliplr=c.fliplr,
                flipud=c.flipud,
                hsv=hsv,
                scale=crop_scale(c.scale),
                auto_augment=c.auto_augment,
                erasing=c.erasing,
            )
        else:
            image, info = classify_eval(original, self.imgsz)
        record = self.records[used]
        label = int(record.targets.labels[0])
        orig = (
            (int(record.size_hw[0]), int(record.size_hw[1])) if record.size_hw else record.targets.orig_size
        )
        h, w = image.shape[:2]
        targets = Targets(
            boxes=np.array([[0, 0, w, h]], np.float32),
            labels=np.array([label], np.int64),
            image_id=record.image_id,
            orig_size=orig,
        )
        return {
            "image": torch.from_numpy(_hwc_to_chw(image)),
            "label": label,
            "targets": targets,
            "meta": {
                "image_id": record.image_id,
                "path": str(record.path),
                "orig_size": orig,
                "letterbox": info,
                "index": used,
            },
        }


def _hwc_to_chw(image: np.ndarray) -> np.ndarray:
    """Contiguous CHW copy of an HWC image: cv2.split into the planes of one new array for uint8 (the same bytes
    as ``np.ascontiguousarray(image.transpose(2, 0, 1))``, ~6x less CPU at 640x640x3)."""
    if image.dtype == np.uint8 and image.ndim == 3 and 1 < image.shape[2] <= 4:
        out = np.empty((image.shape[2], *image.shape[:2]), dtype=np.uint8)
        cv2.split(image, list(out))  # writes each channel into its plane of `out`
        return out
    return np.ascontiguousarray(image.transpose(2, 0, 1))


def _eval_letterbox(
    image: np.ndarray, targets: Targets, imgsz: int, fill: int
) -> tuple[np.ndarray, Targets, Any]:
    """The predict letterbox (lucid_core, auto=False, square imgsz); targets follow with the rounded gains."""
    chw, info = letterbox(np.array(image), imgsz, auto=False, fill=fill)
    gx, gy = info.gain_wh
    moved = warp_targets(
        targets, scale_translation(gx, gy, info.left, info.top), info.input_hw, filter_candidates=False
    )
    return chw.permute(1, 2, 0).numpy(), moved, info


def _rect_eval_letterbox(
    image: np.ndarray, targets: Targets, imgsz: int, shape_hw: tuple[int, int], fill: int
) -> tuple[np.ndarray, Targets, Any]:
    """Long-side resize to imgsz, then centred padding to the batch's ``shape_hw`` (`lucid_data.rect`)."""
    h0, w0 = image.shape[:2]
    out, (new_w, new_h), (top, bottom, left, right) = rect_letterbox(image, imgsz, shape_hw, fill)
    info = LetterboxInfo(
        orig_hw=(int(h0), int(w0)),
        input_hw=(int(out.shape[0]), int(out.shape[1])),
        ratio=min(new_w / w0, new_h / h0),
        new_unpad_wh=(int(new_w), int(new_h)),
        top=int(top),
        bottom=int(bottom),
        left=int(left),
        right=int(right),
    )
    moved = warp_targets(
        targets, scale_translation(new_w / w0, new_h / h0, left, top), info.input_hw, filter_candidates=False
    )
    return out, moved, info
