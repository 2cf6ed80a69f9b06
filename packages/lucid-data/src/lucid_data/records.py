"""What a reader returns: one `ImageRecord` per image and a `DatasetSource` for a split.

Readers (`lucid_data.readers`) only parse annotations; images are decoded later with
`lucid_data.imageio.load_image`, so a dataset of any size is listed quickly and a corrupt image surfaces when
it is decoded (or earlier with `lucid-data check`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucid_data.targets import Targets

__all__ = ["DatasetSource", "ImageRecord", "Task"]

Task = str  # a registered task name (lucid_core.tasks)


@dataclass
class ImageRecord:
    """One image: its file, its targets in original-image pixels, its id and its size (h, w).

    `rles` holds, for COCO sources only, the raw COCO segmentation (RLE dict, already in compressed or
    uncompressed form) of instances whose mask is not a polygon, else None per instance; decode it with
    `lucid_data.rle.decode` when masks are needed (keeps listing a large dataset cheap).
    """

    path: Path
    targets: Targets
    image_id: int | str
    size_hw: tuple[int, int]
    rles: list[dict[str, Any] | None] | None = None


@dataclass
class DatasetSource:
    """One split of one dataset, whatever its on-disk layout.

    - names: contiguous label → class name (0..nc-1).
    - category_ids: contiguous label → the dataset's own category id (COCO ids; identity for YOLO/DOTA),
      so predictions can be written back as COCO results for evaluation.
    - kpt_shape: (K, D) for pose (D = 2 or 3 in the source), else None; flip_idx: keypoint permutation for
      horizontal flips (pose), else None.
    - problems: bad labels skipped in non-strict reading, as `file:line: reason`.
    - corrupt_images: images left out because their header cannot be read, as `path: corrupt image: reason`
      (images that decode only partially are found by `load_image`, e.g. in `lucid-data check`).
    - annotation_file: the COCO JSON a COCO-layout source was read from (None for other layouts).
    - kpt_sigmas: the dataset's own per-keypoint OKS sigmas (YOLO data YAML `kpt_sigmas` / `kpt_oks_sigmas`,
      validated: K positive numbers) for the pose loss and metric; None = the defaults (COCO's for K = 17, D = 3,
      else 1/K; fixture README "pose_loss_*.pt" step 5).
    - data_yaml: the YOLO data YAML a source was read from (None for other layouts), named in errors.
    """

    records: list[ImageRecord]
    names: dict[int, str]
    task: Task
    kpt_shape: tuple[int, int] | None = None
    flip_idx: list[int] | None = None
    category_ids: list[int] = field(default_factory=list)
    root: Path = Path(".")
    split: str = "train"
    problems: list[str] = field(default_factory=list)
    corrupt_images: list[str] = field(default_factory=list)
    annotation_file: Path | None = None  # COCO layouts: the JSON read (evaluation scores against it)
    kpt_sigmas: list[float] | None = None  # pose: the dataset's OKS sigmas (None = README defaults)
    data_yaml: Path | None = None  # YOLO layouts: the data YAML read

    def __post_init__(self) -> None:
        if not self.category_ids:
            self.category_ids = list(range(len(self.names)))

    @property
    def num_classes(self) -> int:
        return len(self.names)

    def __len__(self) -> int:
        return len(self.records)
