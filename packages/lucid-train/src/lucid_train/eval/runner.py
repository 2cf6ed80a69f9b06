"""Score a model on a dataset split with the COCO protocol: `evaluate_model` and its per-batch `ModelScorer`.

Pipeline (the same for in-training validation and ``lucid-eval``):

1. images come from ``lucid_data.DetectionDataset(source, imgsz, augment=False)``: the predict letterbox
   (``lucid_core.geometry.letterbox``, ``auto=False``, square ``imgsz``) whose ``LetterboxInfo`` travels in
   ``batch["meta"]``;
2. the model runs in eval mode on ``uint8 / 255``; for the end-to-end family (yolo26) the head branch is chosen
   per decode path (``"topk"`` = one-to-one branch + top-k, ``"nms"`` = one-to-many branch + NMS), as
   ``lucid_core.inference.prepare_inference_model`` does;
3. ``lucid_core.postprocess`` decodes (validation defaults conf 0.001, iou 0.7, max_det 300; in-training
   validation uses multi-label NMS, the reference validator's: one box may be kept for several classes);
4. boxes / keypoints / masks / rotated boxes go back to ORIGINAL pixels with the inverse letterbox mappings
   (``scale_*_back``; an OBB's box is the hull of its mapped rotated box), exactly as ``lucid_core.predict``
   (in-training validation letterboxes rectangular batches instead, ``YOLODataModule.val_dataloader``; the
   ``LetterboxInfo`` in the meta maps those back the same way);
5. `COCOEvaluator` scores them against ``CocoGroundTruth.from_source`` (task → IoU types: detect ``bbox``,
   obb ``rotated`` (exact polygon IoU), segment ``bbox`` + ``segm``, pose ``bbox`` + ``keypoints``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from lucid_core.inference import detections_to_original, forward_for_decode
from lucid_core.postprocess import postprocess
from lucid_core.tasks import TASKS, get_task
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.readers import load_dataset
from lucid_data.rect import RectBatchSampler
from lucid_train.eval.artifacts import ValidationArtifacts, build_artifacts
from lucid_train.eval.coco_gt import CocoGroundTruth
from lucid_train.eval.coco_results import write_results
from lucid_train.eval.evaluator import COCOEvaluator, EvalResult
from lucid_train.eval.sources import ground_truth_for_path

DECODE_CHOICES = ("topk", "nms", "both")


def decode_paths(model: nn.Module, decode: str | None) -> list[str]:
    """Decode paths to score: None = the model's own decode when it has one (an exported model holds one branch),
    else ``nms`` for every family (for YOLO26 the one-to-many branch + NMS, the reference's default standalone
    validation).

    ``"both"`` (end-to-end models only) scores ``nms`` first (the primary result) and then ``topk``.
    """
    end2end = bool(getattr(model, "end2end", False))
    if decode is None:
        return [str(getattr(model, "decode", None) or "nms")]
    if decode not in DECODE_CHOICES:
        raise ValueError(f"decode must be None or one of {DECODE_CHOICES}, got {decode!r}")
    if decode == "both":
        if not end2end:
            raise ValueError("decode='both' needs an end-to-end model (yolo26): it has one decode path only")
        return ["nms", "topk"]
    return [decode]


def to_original(det: Any, info: Any) -> Any:
    """Detections in network-input pixels → original pixels (the inverse letterbox ``predict`` applies)."""
    return det if info is None else detections_to_original(det, info)


class _EvalMode:
    """Context manager: eval mode for one forward, the previous mode restored on exit."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def __enter__(self) -> None:
        self.was_training = self.model.training
        self.model.eval()

    def __exit__(self, *exc: object) -> None:
        self.model.train(self.was_training)


class ModelScorer:
    """Per-batch scoring of a model: `update(model, batch)` for each collated val batch, then `compute()`.

    This is what `evaluate_model` runs; in-training validation calls it on the val dataloader with the EMA model.
    """

    def __init__(
        self,
        gt: CocoGroundTruth,
        *,
        task: str,
        num_classes: int,
        decode: Sequence[str] = ("nms",),
        conf: float = 0.001,
        iou: float = 0.7,
        max_det: int = 300,
        kpt_shape: tuple[int, int] | None = None,
        iou_types: Iterable[str] | None = None,
        backend: str = "lucid",
        kpt_sigmas: Sequence[float] | None = None,
        multi_label: bool = False,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"task must be one of {tuple(TASKS)}, got {task!r}")
        if num_classes != gt.num_classes:
            raise ValueError(
                f"the model has {num_classes} classes but the dataset has {gt.num_classes} ({list(gt.names)[:5]}…)"
            )
        self.gt = gt
        self.task = task
        self.num_classes = num_classes
        self.paths = list(decode)
        self.conf, self.iou, self.max_det = conf, iou, max_det
        self.multi_label = bool(multi_label)
        self.kpt_shape = kpt_shape
        types = tuple(iou_types) if iou_types is not None else get_task(task).iou_types
        self.evaluators = {
            path: COCOEvaluator(gt, types, backend=backend, kpt_sigmas=kpt_sigmas) for path in self.paths
        }

    def reset(self) -> None:
        for evaluator in self.evaluators.values():
            evaluator.reset()

    @torch.no_grad()
    def detections(self, model: nn.Module, images: torch.Tensor, path: str) -> list[Any]:
        """Decoded detections (network-input pixels, on the CPU) of one uint8 image batch for one decode path."""

        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        x = images.to(device)
        x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
        with _EvalMode(model):
            output = forward_for_decode(model, x, path)
        proto = None
        if isinstance(output, tuple):
            output, proto = output
        dets = postprocess(
            output.float(),
            task=self.task,
            nc=self.num_classes,
            mode=path,
            conf=self.conf,
            iou=self.iou,
            max_det=self.max_det,
            proto=None if proto is None else proto.float(),
            kpt_shape=self.kpt_shape,
            input_hw=(int(x.shape[2]), int(x.shape[3])),
            multi_label=self.multi_label,
        )
        return [d.to("cpu") for d in dets]

    def update(self, model: nn.Module, batch: dict[str, Any]) -> None:
        """Decode one collated batch (``images``, ``meta`` with ``image_id`` and ``letterbox``) and score it."""
        for path in self.paths:
            for det, meta in zip(self.detections(model, batch["images"], path), batch["meta"]):
                self.evaluators[path].update(meta["image_id"], to_original(det, meta.get("letterbox")))

    @property
    def num_images(self) -> int:
        """Images scored so far (on this process) by the first decode path."""
        return self.evaluators[self.paths[0]].num_images

    def gather(self, dst: int = 0) -> bool:
        """Gather every rank's per-image results to rank ``dst`` (``torch.distributed``; no-op on one process).

        Each rank scores its own shard of the split; this sends the accumulated per-image detections (original
        pixels, small numpy arrays) to ``dst``, which then holds all of them, so its :meth:`compute` equals
        the single-process metric exactly (an image in two shards, e.g. a sampler's wrap-around padding, is kept
        once). Every rank must call it. Returns True on the rank that may :meth:`compute`.
        """

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return True
        state = {path: evaluator.image_entries() for path, evaluator in self.evaluators.items()}
        rank = dist.get_rank()
        gathered: list[Any] | None = [None] * dist.get_world_size() if rank == dst else None
        dist.gather_object(state, gathered, dst=dst)
        if gathered is None:
            return False
        for other_rank, other in enumerate(gathered):
            if other_rank != rank and other is not None:
                for path, entries in other.items():
                    self.evaluators[path].add_image_entries(entries)
        return True

    def artifacts(self, result: EvalResult) -> ValidationArtifacts:
        """Confusion matrices, curves, per-class table and label statistics of the primary decode path, from
        the detections ``result = compute()`` scored (:mod:`lucid_train.eval.artifacts`)."""
        return build_artifacts(self.evaluators[self.paths[0]], result)

    def compute(self) -> EvalResult:
        results = {path: self.evaluators[path].compute() for path in self.paths}
        primary = results[self.paths[0]]
        for path, result in results.items():
            result.decode = path
        primary.other_decodes = {p: r for p, r in results.items() if p != self.paths[0]}
        return primary


def evaluate_model(
    model: nn.Module,
    source_or_dataset: Any,
    *,
    imgsz: int = 640,
    batch_size: int = 16,
    conf: float = 0.001,
    iou: float = 0.7,
    max_det: int = 300,
    decode: str | None = None,
    device: str | torch.device | None = None,
    backend: str = "lucid",
    iou_types: Iterable[str] | None = None,
    workers: int = 0,
    ground_truth: CocoGroundTruth | None = None,
    kpt_sigmas: Sequence[float] | None = None,
    rect: bool = True,
    multi_label: bool = True,
    artifacts: bool = False,
    save_json: str | os.PathLike[str] | None = None,
) -> EvalResult:
    """COCO-protocol scores of `model` on a split (see the module docstring for the exact pipeline).

    ``source_or_dataset``: a ``lucid_data.DetectionDataset`` (its ``imgsz`` wins), a ``DatasetSource``, or a path
    ``lucid_data.readers.load_dataset`` reads (its ``val`` split). ``decode``: None (NMS; yolo26 one-to-many +
    NMS), ``"topk"``, ``"nms"`` or ``"both"`` (the result is the NMS one, the top-k one is in
    ``other_decodes["topk"]``). ``rect``: rectangular, aspect-sorted batches of ``batch_size`` letterboxed to
    their own stride-aligned shape (``pad = 0.5`` stride) — the reference's validation protocol and exactly what
    in-training validation does, so a checkpoint scored here reproduces the mAP its training logged (with the
    same batch size); ``False`` letterboxes every image to the square ``imgsz``. ``multi_label``: NMS may keep a
    box for several classes, as the reference validator (and in-training validation) does. The model's
    train/eval mode and decode branch are restored afterwards. ``artifacts``: also build the validation
    artefacts (``result.artifacts``, :class:`~lucid_train.eval.artifacts.ValidationArtifacts`) from the same
    detections, after scoring. ``save_json``: a folder for the results files of the primary decode path
    (:func:`lucid_train.eval.coco_results.write_results`: COCO JSON per IoU type, DOTA Task-1 for rotated).
    """
    if isinstance(source_or_dataset, DetectionDataset):
        dataset = source_or_dataset
    else:
        source = source_or_dataset
        if isinstance(source, (str, Path)):
            task = getattr(model, "task", None)
            source = load_dataset(source_or_dataset, "val", task)
            if ground_truth is None:  # a COCO layout is scored against its own JSON
                ground_truth = ground_truth_for_path(source_or_dataset, "val", source, task)
        dataset = DetectionDataset(source, imgsz=imgsz, augment=False, verify="none")
    if dataset.augment:
        raise ValueError("evaluate_model needs an evaluation dataset (augment=False), got a training one")
    gt = ground_truth if ground_truth is not None else CocoGroundTruth.from_source(dataset.source)
    if device is not None:
        model.to(device)
    task = str(getattr(model, "task", dataset.task))
    scorer = ModelScorer(
        gt,
        task=task,
        num_classes=int(getattr(model, "num_classes", gt.num_classes)),
        decode=decode_paths(model, decode),
        conf=conf,
        iou=iou,
        max_det=max_det,
        kpt_shape=getattr(model, "kpt_shape", None),
        iou_types=iou_types,
        backend=backend,
        kpt_sigmas=kpt_sigmas,
        multi_label=multi_label,
    )
    # an exported graph has a fixed input size: rectangular batches (up to half a stride larger) do not fit it
    if rect and getattr(model, "export_format", None) is None:
        stride = max(int(s) for s in getattr(model, "strides", (32,)))
        batches = dataset.use_rect_batches(batch_size, stride=stride, pad=0.5)
        loader = DataLoader(
            dataset, batch_sampler=RectBatchSampler(batches), num_workers=workers, collate_fn=collate
        )
    else:
        loader = DataLoader(
            dataset, batch_size=batch_size, shuffle=False, num_workers=workers, collate_fn=collate
        )
    tic = time.perf_counter()
    for batch in loader:
        scorer.update(model, batch)
    result = scorer.compute()
    result.seconds = time.perf_counter() - tic
    if artifacts:
        result.artifacts = scorer.artifacts(result)
    if save_json is not None:
        write_results(scorer.evaluators[scorer.paths[0]], save_json)
    return result
