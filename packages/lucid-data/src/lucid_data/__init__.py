"""lucid-data: dataset readers, targets, augmentation, caches and synthetic shapes.

The public API is the names in ``__all__`` (deep module paths keep working)::

    import lucid_data

    yaml_path = lucid_data.synthesize("detect", "demo/shapes", n_train=4, n_val=2, imgsz=64)
    source = lucid_data.load_dataset(yaml_path, split="val")   # YOLO, COCO JSON or DOTA, probed
    dataset = lucid_data.DetectionDataset(source, imgsz=64)    # letterboxed uint8 samples
    batch = lucid_data.collate([dataset[0], dataset[1]])
"""

__version__ = "0.1.0"

# --- readers, targets, image decoding (owner: data readers) ---
from lucid_data.imageio import CorruptImageError, image_size, load_image, verify_image
from lucid_data.readers import (
    LabelError,
    LabelProblem,
    load_dataset,
    merge_tile_predictions,
    tile_targets,
    tile_windows,
)
from lucid_data.records import DatasetSource, ImageRecord, Task
from lucid_data.targets import Targets

__all__ = [
    "CorruptImageError",
    "DatasetSource",
    "ImageRecord",
    "LabelError",
    "LabelProblem",
    "Targets",
    "Task",
    "__version__",
    "image_size",
    "load_dataset",
    "load_image",
    "merge_tile_predictions",
    "tile_targets",
    "tile_windows",
    "verify_image",
]

# --- augmentation, dataset, collate, cache, synthetic shapes (owner: data pipeline) ---
from lucid_data.augment import AugmentConfig, AugmentPipeline
from lucid_data.cache import CacheTooLargeError, RamImageCache, RecentDecodes
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset, ExcludedImage, SampleKey
from lucid_data.opencv_threads import single_threaded_worker  # also installs the fork hooks
from lucid_data.synth import synthesize

__all__ += [
    "AugmentConfig",
    "AugmentPipeline",
    "CacheTooLargeError",
    "DetectionDataset",
    "ExcludedImage",
    "RamImageCache",
    "RecentDecodes",
    "SampleKey",
    "collate",
    "single_threaded_worker",
    "synthesize",
]
