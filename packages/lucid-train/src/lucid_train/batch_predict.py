"""Batch inference at scale: Lightning's ``Trainer.predict`` over the images of a source, one JSONL line per image.

The images are split across devices and nodes by the Lightning strategy given (``ddp``, ``ddp_spawn``, …): for
prediction Lightning shards the loader with its unrepeated distributed sampler, so every image is predicted once.
Each rank appends its lines to its own part file next to ``output`` (``.<output>.parts/rank<R>.jsonl``, each line
prefixed by the image's position in the source); after the last batch every rank waits at a barrier and rank 0
merges the parts in source order into ``output`` (written atomically), then removes them. For several nodes,
``output`` must be on a file system every node sees.

Each image is letterboxed to a fixed ``imgsz`` × ``imgsz`` square (so batches stack and an image's result does not
depend on the images sharing its batch), forwarded and decoded as ``predict`` decodes (``conf``, ``iou``,
``max_det``, ``decode``, ``classes``, ``agnostic_nms``), mapped back to original pixels and written as
:meth:`lucid_core.results.Results.to_json`. An image that cannot be read gives ``{"path": ..., "error": ...}`` in
its place.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import shutil
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import BasePredictionWriter
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from lucid_core.atomic import atomic_path
from lucid_core.checkpoint import load
from lucid_core.decode import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF
from lucid_core.geometry.letterbox import LetterboxInfo, letterbox
from lucid_core.inference import forward_for_decode, prepare_inference_model
from lucid_core.models import YOLOModel
from lucid_core.postprocess import postprocess
from lucid_core.results import Results
from lucid_core.sources import ImageLoadError, expand_source, read_image_file
from lucid_train.eval.runner import to_original

__all__ = [
    "BatchPredictor",
    "ImageFiles",
    "JsonlPredictionWriter",
    "add_predict_parser",
    "list_source_images",
    "predict_dataset",
    "predict_main",
]


def list_source_images(source: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """The image paths a source names (``lucid_core.sources.expand_source``: file, folder, glob, ``.txt`` list, or a
    list of these), in order, and ``(name, reason)`` for every item that is not a readable still image."""
    images: list[str] = []
    skipped: list[tuple[str, str]] = []
    for item in expand_source(source):
        if item.kind == "image" and item.name is not None:
            images.append(item.name)
        elif item.kind == "error":
            skipped.append((str(item.name), str(item.value)))
        else:
            skipped.append(
                (str(item.name), f"a {item.kind} source; batch prediction reads still image files")
            )
    return images, skipped


class ImageFiles(Dataset[dict[str, Any]]):
    """Image files letterboxed to ``imgsz`` × ``imgsz``: ``{"index", "path", "image" (CHW uint8), "info"}``, or
    ``"error"`` (and no image) for a file that cannot be read."""

    def __init__(self, paths: Sequence[str], imgsz: int, stride: int) -> None:
        self.paths = list(paths)
        self.imgsz = imgsz
        self.stride = stride

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict[str, Any]:
        path = self.paths[index]
        try:
            rgb = read_image_file(path)
        except (ImageLoadError, OSError) as exc:
            return {"index": index, "path": path, "error": str(exc)}
        image, info = letterbox(rgb, self.imgsz, auto=False, stride=self.stride)
        return {"index": index, "path": path, "image": image, "info": info}


def collate_images(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch: the readable images stacked (``images``, with ``index``/``path``/``info`` dict per image) and the
    ``errors`` as ``(index, path, message)``."""
    ok = [item for item in items if "image" in item]
    return {
        "images": torch.stack([item["image"] for item in ok]) if ok else None,
        "index": [item["index"] for item in ok],
        "path": [item["path"] for item in ok],
        "info": [item["info"].to_dict() for item in ok],  # plain data: Lightning moves batches field by field
        "errors": [(item["index"], item["path"], item["error"]) for item in items if "error" in item],
    }


class BatchPredictor(pl.LightningModule):
    """``predict_step``: a batch of :func:`collate_images` → ``[(source index, JSON line)]``."""

    def __init__(
        self,
        net: YOLOModel,
        *,
        mode: Literal["nms", "topk"],
        names: Sequence[str],
        conf: float = PREDICT_CONF,
        iou: float = DEFAULT_IOU,
        max_det: int = DEFAULT_MAX_DET,
        classes: Sequence[int] | None = None,
        agnostic_nms: bool = False,
    ) -> None:
        super().__init__()
        self.net = net
        self.mode = mode
        self.names = list(names)
        self.decode_options: dict[str, Any] = {
            "conf": conf,
            "iou": iou,
            "max_det": max_det,
            "classes": list(classes) if classes is not None else None,
            "agnostic": agnostic_nms,
        }

    def predict_step(
        self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0
    ) -> list[tuple[int, str]]:
        lines = [
            (index, json.dumps({"path": path, "error": error})) for index, path, error in batch["errors"]
        ]
        images: Tensor | None = batch["images"]
        if images is not None:
            x = images.to(self.device, torch.float32).contiguous(memory_format=torch.channels_last) / 255
            output = forward_for_decode(self.net, x, self.mode)
            detections = postprocess(
                output,
                task=self.net.task,
                nc=self.net.num_classes,
                mode=self.mode,
                kpt_shape=self.net.kpt_shape,
                input_hw=(int(x.shape[2]), int(x.shape[3])),
                **self.decode_options,
            )
            for det, index, path, info in zip(
                detections, batch["index"], batch["path"], batch["info"], strict=True
            ):
                result = Results(
                    to_original(det.to("cpu"), LetterboxInfo.from_dict(info)),
                    names=self.names,
                    orig_img=None,
                    orig_shape=info["orig_hw"],
                    path=path,
                    task=self.net.task,
                )
                lines.append((index, result.to_json()))
        return sorted(lines)


def _parts_dir(output: Path) -> Path:
    return output.with_name(f".{output.name}.parts")


class JsonlPredictionWriter(BasePredictionWriter):
    """Writes each rank's ``(index, line)`` predictions to its part file and merges the parts into ``output`` in
    source order at the end (module docstring)."""

    def __init__(self, output: str | os.PathLike[str]) -> None:
        super().__init__(write_interval="batch")
        self.output = Path(output)
        self._file: IO[str] | None = None

    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        parts = _parts_dir(self.output)
        parts.mkdir(parents=True, exist_ok=True)
        self._file = (parts / f"rank{trainer.global_rank}.jsonl").open("w", encoding="utf-8")

    def write_on_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        prediction: Any,
        batch_indices: Sequence[int] | None,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        assert self._file is not None
        self._file.writelines(f"{index}\t{line}\n" for index, line in prediction)

    def on_predict_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        trainer.strategy.barrier("lucid_batch_predict_merge")
        if trainer.is_global_zero:
            merge_parts(_parts_dir(self.output), self.output)


def _part_lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8") as fh:
        for raw in fh:
            index, _, line = raw.rstrip("\n").partition("\t")
            yield int(index), line


def merge_parts(parts: Path, output: Path) -> Path:
    """Merge the rank part files (each sorted by source index) into ``output`` in source order, atomically; an
    image listed by two ranks is written once. The part folder is removed."""
    files = sorted(parts.glob("rank*.jsonl"))
    with atomic_path(output) as tmp, tmp.open("w", encoding="utf-8") as out:
        last = -1
        for index, line in heapq.merge(*(_part_lines(f) for f in files), key=lambda pair: pair[0]):
            if index != last:
                out.write(line + "\n")
                last = index
    shutil.rmtree(parts, ignore_errors=True)
    return output


def predict_dataset(
    weights: str | os.PathLike[str],
    source: Any,
    output: str | os.PathLike[str],
    *,
    batch: int = 16,
    devices: int | str = "auto",
    strategy: str = "auto",
    accelerator: str = "auto",
    num_nodes: int = 1,
    workers: int = 0,
    imgsz: int = 640,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    decode: Literal["nms", "topk"] | None = None,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    progress: bool = False,
) -> tuple[Path, list[tuple[str, str]]]:
    """Predict every image of ``source`` with ``weights`` (anything :func:`lucid_core.load` reads) through
    ``Trainer.predict`` and write ``output`` (JSONL, one line per image in source order; module docstring).

    ``devices``/``strategy``/``accelerator``/``num_nodes`` are Lightning's Trainer arguments. Returns the output
    path and the source items that were skipped (not still images: ``(name, reason)``). Raises ValueError when the
    source names no image.
    """
    paths, skipped = list_source_images(source)
    if not paths:
        raise ValueError(f"source {source!r} names no image file to predict")
    checkpoint = load(weights)
    net, mode = prepare_inference_model(checkpoint.model, decode=decode, device="cpu")
    module = BatchPredictor(
        net,
        mode=mode,
        names=checkpoint.names,
        conf=conf,
        iou=iou,
        max_det=max_det,
        classes=classes,
        agnostic_nms=agnostic_nms,
    )
    loader = DataLoader(
        ImageFiles(paths, imgsz, max(net.strides)),
        batch_size=batch,
        shuffle=False,
        num_workers=workers,
        collate_fn=collate_images,
    )
    output = Path(output)
    trainer = pl.Trainer(
        accelerator=accelerator,
        devices=devices,
        strategy=strategy,
        num_nodes=num_nodes,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=progress,
        callbacks=[JsonlPredictionWriter(output)],
        default_root_dir=str(_parts_dir(output)),
    )
    trainer.predict(module, dataloaders=loader, return_predictions=False)
    return output, skipped


def add_predict_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The flags of ``lucid-train predict`` on ``parser``."""
    parser.add_argument(
        "--weights", required=True, help="checkpoint (lucid, reference .pt or exported model)"
    )
    parser.add_argument(
        "--source", required=True, nargs="+", help="image files, folders, globs or .txt lists"
    )
    parser.add_argument("--output", required=True, help="JSONL file: one line per image, in source order")
    parser.add_argument("--batch", type=int, default=16, help="images per device per step (default 16)")
    parser.add_argument("--devices", default="auto", help="Lightning devices: a count, a list or auto")
    parser.add_argument("--strategy", default="auto", help="Lightning strategy, e.g. ddp (default auto)")
    parser.add_argument("--accelerator", default="auto", help="cpu, gpu or auto (default auto)")
    parser.add_argument("--num-nodes", type=int, default=1)
    parser.add_argument("--workers", type=int, default=0, help="data loader worker processes per device")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--conf", type=float, default=PREDICT_CONF)
    parser.add_argument("--iou", type=float, default=DEFAULT_IOU)
    parser.add_argument("--max-det", type=int, default=DEFAULT_MAX_DET)
    parser.add_argument("--decode", choices=("nms", "topk"), default=None)
    parser.add_argument("--classes", type=int, nargs="+", default=None)
    parser.add_argument("--agnostic-nms", action="store_true")
    return parser


def _devices(value: str) -> int | str:
    return int(value) if value.isdigit() else value


def predict_main(argv: Sequence[str] | None = None) -> int:
    """``lucid-train predict``: parse the flags, run :func:`predict_dataset`, report skipped items on stderr.
    Exit status 0 when the output was written, 1 when the source names no image."""
    # the command's process settings: Lightning 2.6's own use of a torch pytree API that torch deprecated
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    parser = add_predict_parser(argparse.ArgumentParser(prog="lucid-train predict", description=__doc__))
    args = parser.parse_args(argv)
    try:
        output, skipped = predict_dataset(
            args.weights,
            list(args.source),
            args.output,
            batch=args.batch,
            devices=_devices(args.devices),
            strategy=args.strategy,
            accelerator=args.accelerator,
            num_nodes=args.num_nodes,
            workers=args.workers,
            imgsz=args.imgsz,
            conf=args.conf,
            iou=args.iou,
            max_det=args.max_det,
            decode=args.decode,
            classes=args.classes,
            agnostic_nms=args.agnostic_nms,
            progress=sys.stderr.isatty(),
        )
    except ValueError as exc:
        print(f"lucid-train predict: {exc}", file=sys.stderr)
        return 1
    for name, reason in skipped:
        print(f"lucid-train predict: skipped {name}: {reason}", file=sys.stderr)
    print(f"lucid-train predict: wrote {output}", file=sys.stderr)
    return 0
