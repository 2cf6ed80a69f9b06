"""`DetectionDataModule`: lucid-data datasets as Lightning dataloaders, and the embedded synthetic default.

With ``root=None`` (``lucid-train fit`` with no arguments) the shapes detection dataset is synthesised once with
``lucid_data.synth.synthesize`` into ``$LUCID_CACHE_DIR`` (default ``~/.cache/lucid-yolo``) under a directory named
after the synthesis parameters (``shapes-detect-v1-…``) and reused when present; it is written to a temporary
directory and renamed into place, so an interrupted synthesis never leaves a half dataset behind.

Sampling: :class:`~lucid_train.sampler.ShardedEpochSampler` (one seeded permutation per epoch, identical on every
rank); augmentation: ``lucid_data.DetectionDataset`` keyed by (seed, epoch, index, rank) - the module sets the
dataset's epoch and rank, and switches mosaic off ``close_mosaic`` epochs before the end. Training workers are
persistent (no fork per epoch; batches pinned when CUDA is present): the sampler hands every index to them together
with the epoch state set at ``on_train_epoch_start`` (``DetectionDataset.sample_key``), so the batches are the
bytes fresh workers, or no workers, would make (tested).

Validation (the reference's validation protocol): batches of twice the training batch, rectangular and
aspect-sorted (``lucid_data.rect``: each batch letterboxed to its own stride-aligned shape, ``pad = 0.5`` stride),
sharded over DDP ranks by whole batches; the module gathers the per-image results to rank 0 before scoring.

An image-level task (classify, ``Task.image_level``) reads the folder-per-class layout (``lucid_data.readers.
folders``; the synthetic default is written in it), trains on the classification transforms and validates on
consecutive batches of square centre crops (``lucid_data.augment.classify``); a real dataset's default image size
is the task's (``Task.default_imgsz``: 224).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader

from lucid_core.atomic import atomic_write_json
from lucid_core.tasks import get_task
from lucid_data import load_dataset, single_threaded_worker
from lucid_data.augment import hsv_torch
from lucid_data.augment.pipeline import AugmentConfig
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.readers.common import LabelError
from lucid_data.readers.yolo import label_path_for
from lucid_data.rect import RectBatchSampler
from lucid_data.synth import synthesize
from lucid_train.errors import TrainingSetupError
from lucid_train.sampler import ShardedEpochSampler

#: version tag of the embedded default dataset (bump when the synthesis changes).
SHAPES_TAG = "shapes-detect-v1"
#: cache tags fixed before the task entered the cache digest: task name -> tag (digest of the config alone)
_UNKEYED_SHAPES_TAGS = {"detect": SHAPES_TAG}
#: synthesis version in every other task's tag (v2: obb shapes squashed to a readable angle)
SHAPES_TASK_VERSION = 2
#: the largest stride of every model family (P5 heads): rectangular batch shapes are multiples of it.
MODEL_STRIDE = 32
#: rectangular batch padding in strides (reference validation ``pad = 0.5``).
RECT_PAD = 0.5


@dataclass
class SynthConfig:
    """Parameters of the synthetic shapes dataset used when ``data.root`` is not given.

    Every field is passed to ``lucid_data.synth.synthesize`` (an image-level task, classify, draws one shape per
    image filling most of it: ``min_objects``, ``max_objects``, ``min_size`` and ``max_size`` do not apply there,
    ``lucid_data.synth.CLASSIFY_SIZE``). The embedded default run sets them in
    ``lucid_train/configs/shapes_default.yaml``; these dataclass defaults apply only to a run that names its own
    ``--config`` without a ``data.root``.
    """

    n_train: int = 1000
    n_val: int = 100
    imgsz: int = 96
    num_classes: int = 3
    min_objects: int = 1
    max_objects: int = 4
    min_size: float = 0.15
    max_size: float = 0.5
    seed: int = 0


def cache_root() -> Path:
    """``$LUCID_CACHE_DIR`` or ``~/.cache/lucid-yolo``."""
    return Path(os.environ.get("LUCID_CACHE_DIR", Path.home() / ".cache" / "lucid-yolo"))


def _directory_mode() -> int:
    """The mode an ordinary ``mkdir`` gives: ``0o777`` minus the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


def shapes_cache_name(config: SynthConfig, task: str = "detect") -> str:
    """Folder name of the cached shapes dataset of ``task`` for ``config``: ``<tag>-<8 hex digits of sha256>``.

    Every task gets ``shapes-<name>-v<SHAPES_TASK_VERSION>`` and a digest of the config plus its name; ``detect``
    keeps the name it had before tasks existed (:data:`SHAPES_TAG`, digest of the config alone).
    """
    spec = get_task(task)
    key: dict[str, Any] = asdict(config)
    tag = _UNKEYED_SHAPES_TAGS.get(spec.name)
    if tag is None:
        key["task"] = spec.name
        tag = f"shapes-{spec.name}-v{SHAPES_TASK_VERSION}"
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:8]
    return f"{tag}-{digest}"


def shapes_dataset(config: SynthConfig, cache_dir: Path | None = None, task: str = "detect") -> Path:
    """Path of the data YAML of the synthetic shapes dataset of ``task`` for ``config`` (an image-level task: its
    folder-per-class root), synthesising it when absent."""
    base = cache_dir if cache_dir is not None else cache_root()
    target = base / shapes_cache_name(config, task)
    # an image-level task draws one shape per image, a crop around it (lucid_data.synth.CLASSIFY_SIZE): the
    # detection set's object counts and sizes do not apply
    objects = (
        {}
        if get_task(task).image_level
        else {
            "min_objects": config.min_objects,
            "max_objects": config.max_objects,
            "min_size": config.min_size,
            "max_size": config.max_size,
        }
    )
    marker = target / "lucid-synth.json"
    if marker.is_file():
        return target / str(json.loads(marker.read_text())["yaml"])
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=base))
    try:
        yaml_path = Path(
            synthesize(
                task,
                tmp,
                n_train=config.n_train,
                n_val=config.n_val,
                imgsz=config.imgsz,
                num_classes=config.num_classes,
                seed=config.seed,
                **objects,
            )
        )
        atomic_write_json(
            tmp / "lucid-synth.json",
            {"yaml": str(yaml_path.resolve().relative_to(tmp.resolve())), "config": asdict(config)},
        )
        os.chmod(tmp, _directory_mode())  # mkdtemp makes it 0o700; the cached dataset is an ordinary folder
        try:
            os.replace(tmp, target)
        except OSError:  # another process won the race: use its copy
            if not marker.is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target / str(json.loads(marker.read_text())["yaml"])


def _require_instances(root: Path, split: str, source: Any) -> None:
    """A split whose images carry not one labelled instance trains/scores nothing: one-paragraph error."""
    if any(len(record.targets) for record in source.records):
        return
    hint = "every label file is empty"
    if getattr(source, "annotation_file", None) is None and source.records:
        labels = label_path_for(Path(source.records[0].path)).parent
        if not labels.is_dir():
            hint = f"the labels folder {labels} does not exist (expected one .txt per image)"
        else:
            hint = f"every label file under {labels} is empty or missing"
    raise TrainingSetupError(
        f"{root}: split {split!r} has {len(source.records)} images but no labelled instance ({hint}); pass "
        "--data.allow_empty true to train or validate on background-only images anyway."
    )


class YOLODataModule(pl.LightningDataModule):
    """Train/val dataloaders over any layout ``lucid_data.load_dataset`` reads.

    The dataset is read with its own task (``load_dataset(..., task=None)`` probes it) and served to training as
    detection targets: a segment, pose or OBB dataset trains a detector on the axis-aligned boxes of its
    instances (``lucid_data`` gives every record's ``boxes`` whatever the task; an OBB instance's box is the one
    enclosing its four corners). :attr:`source_task` names the task the data was written for.

    Args:
        root: a YOLO data YAML, YOLO images/labels folder or COCO JSON; ``None`` = the synthetic shapes dataset.
        train_split: split used for training.
        val_split: split used for validation (in-training and ``lucid-train validate``).
        imgsz: network input size; ``None`` = the task's default for a real dataset (640; classify 224),
            ``synth.imgsz`` for the shapes dataset.
        batch_size: training images per batch and per process (validation batches hold twice as many).
        workers: dataloader worker processes.
        seed: seed of the sampler permutation and of the augmentation streams.
        cache: ``"ram"`` to cache decoded images (lucid-data refuses when it will not fit).
        decode_buffer_mib: without ``cache``: MiB of recently decoded training images each loader process keeps
            (``lucid_data.cache.RecentDecodes``: the same samples, fewer decodes; at most this much RAM per
            process, so ``workers`` + 1 times it in all); 0 = decode every load.
        augment: augmentation hyper-parameters (``lucid_data`` ``AugmentConfig``: mosaic, hsv, flips, ...,
            ``close_mosaic`` = mosaic off for the last N epochs, reference 10; ``mosaic_recent`` None = partners from
            the images of the last 8 batches, up to 1000, as the reference's); ``None`` = reference defaults.
        synth: parameters of the synthetic shapes dataset (only when ``root`` is ``None``).
        task: the task the model trains (linked from ``--model.task`` by ``lucid-train``): the dataset serves
            that task's targets (masks, keypoints, rotated boxes). ``None`` = ``detect`` (boxes of any dataset).
            Without ``root`` the synthetic shapes are written for this task.
        allow_empty: accept a split with images but no labelled instance (otherwise an error naming the split and,
            for a YOLO layout, a missing ``labels/`` folder).
        overlap_mask: segment only: one mask index map per image, instances in area order (reference default
            ``overlap_mask=True``); ``False`` gives one mask per instance. The objective is told the same.
        mask_ratio: segment only: training masks at 1/``mask_ratio`` of the input (reference 4).
        device_hsv: apply the HSV augmentation to each training batch on the training device instead of in the
            workers: the workers draw the same gains and skip the pixel work, the module applies
            ``lucid_data.augment.hsv_torch.augment_hsv_batch`` after the batch reached the device. Training on the
            CPU keeps the worker path (there is no other device to move the work to).
    """

    def __init__(
        self,
        root: str | None = None,
        train_split: str = "train",
        val_split: str = "val",
        imgsz: int | None = None,
        batch_size: int = 16,
        workers: int = 2,
        seed: int = 0,
        cache: Literal["ram"] | None = None,
        decode_buffer_mib: float = 128,
        augment: AugmentConfig | None = None,
        synth: SynthConfig | None = None,
        task: str | None = None,
        allow_empty: bool = False,
        overlap_mask: bool = True,
        mask_ratio: int = 4,
        device_hsv: bool = False,
    ) -> None:
        super().__init__()
        self.overlap_mask = bool(overlap_mask)
        if mask_ratio not in (1, 2, 4, 8):
            raise TrainingSetupError(f"data.mask_ratio: expected 1, 2, 4 or 8, got {mask_ratio!r}")
        self.mask_ratio = int(mask_ratio)
        self.device_hsv = bool(device_hsv)
        self.task: str = task or "detect"
        self._target_fields = get_task(self.task).target_fields
        #: a split without one labelled instance (e.g. no labels/ folder) is an error unless this is set
        self.allow_empty = bool(allow_empty)
        if batch_size < 1:
            raise TrainingSetupError(f"data.batch_size: expected >= 1, got {batch_size}")
        self.synth = synth if synth is not None else SynthConfig()
        if root is None:
            self.root = shapes_dataset(self.synth, task=self.task)
            default_imgsz = self.synth.imgsz
        else:
            self.root = Path(root).expanduser()
            if not self.root.exists():
                raise TrainingSetupError(
                    f"data.root: {root} does not exist; expected a YOLO data YAML (with path/train/val/names), a "
                    "YOLO images/labels folder or a COCO annotation JSON. Omit --data.root to train on the "
                    "synthetic shapes dataset."
                )
            default_imgsz = get_task(self.task).default_imgsz
        self.imgsz = int(imgsz) if imgsz is not None else default_imgsz
        self.train_split = train_split
        self.val_split = val_split
        self.batch_size = batch_size
        self.workers = workers
        self.seed = seed
        self.cache = cache
        if decode_buffer_mib < 0:
            raise TrainingSetupError(
                f"data.decode_buffer_mib: expected >= 0 (0 = off), got {decode_buffer_mib}"
            )
        self.decode_buffer_mib = float(decode_buffer_mib)
        #: the training batch's augmentation (``AugmentConfig.for_batch``: mosaic partners from the last 8 batches)
        self.augment = (augment if augment is not None else AugmentConfig()).for_batch(batch_size)
        self.close_mosaic_epochs = self.augment.close_mosaic
        self._sources: dict[str, Any] = {}
        self._datasets: dict[str, Any] = {}
        train = self.source(train_split)
        self.source(val_split)  # a missing or empty val split fails now, not after the first training epoch
        self.names: dict[int, str] = {int(k): str(v) for k, v in train.names.items()}
        self.num_classes = len(self.names)
        #: the task the dataset was written for; a task that needs only boxes (detect) trains on its boxes.
        self.source_task: str = str(train.task)
        if get_task(self.source_task).image_level and not get_task(self.task).image_level:
            raise TrainingSetupError(
                f"{self.root}: the dataset is a folder-per-class {self.source_task!r} dataset (one class per image, "
                f"no instances) but --model.task is {self.task!r}; train it with --model.task {self.source_task}."
            )
        if self._target_fields and self.source_task != self.task:
            raise TrainingSetupError(
                f"{self.root}: the dataset is a {self.source_task!r} dataset but --model.task is {self.task!r}; "
                f"expected {self.task} labels (or train it with --model.task detect, which uses the boxes of "
                "any dataset)."
            )
        if self.num_classes < 1:
            raise TrainingSetupError(f"{self.root}: the dataset declares no class names; expected `names`.")

    # ------------------------------------------------------------------ sources and datasets
    def source(self, split: str) -> Any:
        if split not in self._sources:
            try:
                # The dataset's own task (probed: `kpt_shape` → pose, 4-corner lines → obb, polygons → segment);
                # reading it as "detect" would reject every pose/segment/obb label line.
                self._sources[split] = load_dataset(self.root, split=split, task=None)
            except (FileNotFoundError, ValueError) as exc:
                if isinstance(exc, LabelError):  # its own one-paragraph message lists every bad line
                    raise
                raise TrainingSetupError(
                    f"{self.root}: split {split!r} could not be read ({exc}); expected the data YAML's "
                    f"`{split}` entry to point at an images folder or list."
                ) from exc
            if len(self._sources[split]) == 0:
                raise TrainingSetupError(
                    f"{self.root}: split {split!r} has no images; expected at least one."
                )
            if not self.allow_empty:
                _require_instances(self.root, split, self._sources[split])
        return self._sources[split]

    def excluded_images(self) -> list[str]:
        """Images left out of training/validation, one ``path: reason`` each (reader and dataset exclusions)."""
        lines: list[str] = []
        for source in self._sources.values():
            lines += [str(line) for line in getattr(source, "corrupt_images", [])]
        for dataset in self._datasets.values():
            lines += [f"{e.path}: {e.reason}" for e in getattr(dataset, "excluded", [])]
        return list(dict.fromkeys(lines))

    def val_source(self) -> Any:
        return self.source(self.val_split)

    def dataset(self, split: str, *, augment: bool) -> Any:
        key = f"{split}:{augment}"
        if key not in self._datasets:
            self._datasets[key] = DetectionDataset(
                self.source(split),
                imgsz=self.imgsz,
                augment=augment,
                augment_config=self.augment if augment else None,
                split=split,
                task=self.task,
                seed=self.seed,
                cache=self.cache,
                decode_buffer_mib=self.decode_buffer_mib,
                overlap_mask=self.overlap_mask,
                mask_ratio=self.mask_ratio,
            )
        return self._datasets[key]

    @property
    def task_options(self) -> dict[str, Any]:
        """The dataset's task parameters the model needs (linked to ``--model.task_options`` by ``lucid-train``):
        pose ``kpt_shape``, ``flip_idx`` and ``kpt_sigmas`` (when the YAML gives them); segment ``overlap_mask``
        (the objective reads the masks in the layout the data makes them); empty otherwise."""
        if "masks" in self._target_fields:
            return {"overlap_mask": self.overlap_mask}
        if "keypoints" not in self._target_fields:
            return {}
        train = self.source(self.train_split)
        options: dict[str, Any] = {}
        for name in ("kpt_shape", "flip_idx", "kpt_sigmas"):
            value = getattr(train, name, None)
            if value is not None:
                options[name] = [float(v) for v in value] if name == "kpt_sigmas" else [int(v) for v in value]
        return options

    @property
    def train_dataset(self) -> Any:
        return self.dataset(self.train_split, augment=True)

    def _rank_world(self) -> tuple[int, int]:
        trainer = self.trainer
        if trainer is None:
            return 0, 1
        return int(trainer.global_rank), int(trainer.world_size)

    def _loader(
        self, dataset: Any, *, shuffle: bool, sharded: bool = True, persistent: bool = False
    ) -> DataLoader[Any]:
        """``persistent``: keep the workers across epochs (the sampler then carries the epoch state with each index,
        ``DetectionDataset.sample_key``) and pin batches when CUDA is present."""
        rank, world = self._rank_world() if sharded else (0, 1)
        if hasattr(dataset, "rank"):
            dataset.rank = rank
        if hasattr(dataset, "world_size"):
            dataset.world_size = world  # the order its mosaic partners are drawn along (lucid_data.order)
        persistent = persistent and self.workers > 0 and hasattr(dataset, "sample_key")
        sampler = ShardedEpochSampler(
            len(dataset),
            shuffle=shuffle,
            seed=self.seed,
            rank=rank,
            world_size=world,
            key=dataset.sample_key if persistent else None,
        )
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            sampler=sampler,
            num_workers=self.workers,
            collate_fn=collate,
            worker_init_fn=single_threaded_worker if self.workers > 0 else None,
            persistent_workers=persistent,
            pin_memory=persistent and torch.cuda.is_available(),
            drop_last=False,
        )

    def train_dataloader(self) -> DataLoader[Any]:
        """The training loader; attached to a trainer, it first sets the dataset state of the epoch the loop starts
        at (0, or the epoch a resumed run continues): Lightning draws that epoch's sample keys when it creates the
        iterator, before ``on_train_epoch_start`` (``EpochStateCallback`` sets every later epoch)."""
        dataset = self.train_dataset
        trainer = self.trainer
        if trainer is not None:
            self.start_epoch(int(trainer.current_epoch), planned_epochs(trainer))
        if hasattr(dataset, "defer_hsv"):
            dataset.defer_hsv = self.device_hsv and self._training_device().type != "cpu"
        return self._loader(dataset, shuffle=True, persistent=True)

    def _training_device(self) -> torch.device:
        trainer = self.trainer
        return trainer.strategy.root_device if trainer is not None else torch.device("cpu")

    @property
    def val_batch_size(self) -> int:
        """Images per validation batch: the task's ``validation_batch_factor`` × the training batch (reference
        validators: twice, rotated boxes once)."""
        return get_task(self.task).validation_batch_factor * self.batch_size

    def val_dataloader(self) -> DataLoader[Any]:
        """Rectangular, aspect-sorted batches of ``val_batch_size``; rank r of W takes batches r, r + W, ...

        The module gathers every rank's per-image results to rank 0 before scoring, so the metric equals the
        single-process one exactly while each rank letterboxes and runs only its share of the split.
        """
        dataset = self.dataset(self.val_split, augment=False)
        batches = dataset.use_rect_batches(self.val_batch_size, stride=MODEL_STRIDE, pad=RECT_PAD)
        rank, world = self._rank_world()
        return DataLoader(
            dataset,
            batch_sampler=RectBatchSampler(batches, rank=rank, world_size=world),
            num_workers=self.workers,
            collate_fn=collate,
            worker_init_fn=single_threaded_worker if self.workers > 0 else None,
            persistent_workers=False,
        )

    def test_dataloader(self) -> DataLoader[Any]:
        return self.val_dataloader()

    def predict_dataloader(self) -> DataLoader[Any]:
        return self.val_dataloader()

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """``device_hsv``: a training batch that carries its drawn HSV gains gets the HSV transform here, on the
        device (``lucid_data.augment.hsv_torch``); every other batch passes unchanged."""
        if isinstance(batch, dict) and "hsv_gains" in batch:
            batch["images"] = hsv_torch.augment_hsv_batch(batch["images"], batch.pop("hsv_gains").cpu())
        return batch

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        """Move the batch's top-level tensors; ``targets``/``meta`` (numpy, frozen dataclasses) stay on the host.

        A data hook, so it lives here with the batches' layout (``lucid_data.collate``): Lightning warns on every
        run when a LightningModule overrides it and a DataModule is passed.
        """
        if isinstance(batch, dict):
            return {
                k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v
                for k, v in batch.items()
            }
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    # ------------------------------------------------------------------ per-epoch dataset state
    def prepare_epoch(self, epoch: int, max_epochs: int | None) -> bool:
        """Set the train dataset's epoch (mosaic closes for the last ``close_mosaic`` of ``max_epochs`` epochs;
        ``None``: no planned end, mosaic stays on). True when closed now."""
        dataset = self.train_dataset
        was_on = bool(getattr(dataset, "mosaic_enabled", False)) and not getattr(
            dataset, "image_level", False
        )
        dataset.set_epoch(epoch, max_epochs)  # an image-level task has no mosaic to close
        return was_on and not bool(getattr(dataset, "mosaic_enabled", False))

    def start_epoch(self, epoch: int, max_epochs: int | None) -> None:
        """:meth:`prepare_epoch`, logging the epoch where mosaic closes."""
        if self.prepare_epoch(epoch, max_epochs):
            rank_zero_info(f"epoch {epoch}: mosaic closed for the last {self.close_mosaic_epochs} epochs")


def planned_epochs(trainer: Any) -> int | None:
    """The trainer's ``max_epochs`` when it plans an end (> 0), else None (``max_epochs=-1``: steps decide)."""
    epochs = getattr(trainer, "max_epochs", None)
    return int(epochs) if epochs is not None and int(epochs) > 0 else None


#: the historical name of :class:`YOLODataModule`; the same class.
DetectionDataModule = YOLODataModule
