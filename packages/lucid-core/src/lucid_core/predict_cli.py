"""``lucid-predict --weights W --source IMAGE_OR_DIR --output DIR``: one JSON of detections per image.

Each image ``<name>`` (a file, or every image file directly inside the source folder, by extension) gives
``DIR/<name>.json`` written atomically (temporary file + ``os.replace``)::

    {"image": "<path>", "orig_size": [H, W], "imgsz": 640, "task": "detect", "num_detections": N,
     "detections": [{"box": [x1, y1, x2, y2], "score": s, "label": k, "name": "person",
                     "keypoints": [[x, y, v], ...],            # pose
                     "rbox": [cx, cy, w, h, theta], "polygon": [[x, y] x 4],   # obb
                     "mask": {"size": [H, W], "counts": [...]}}]}  # segment, uncompressed column-major RLE

all in original-image pixels. An image that cannot be read is reported on stderr and skipped; the others proceed.
A folder is read with the image extensions training reads (:data:`PREDICT_SUFFIXES`: lucid-data's
``IMAGE_SUFFIXES`` plus what torchvision decodes); BMP/TIFF go through torchvision's PIL loader. Over more than one
image a progress bar is drawn on stderr.

The typed entry point is :func:`predict_to_dir` (``main`` parses the flags, calls it and prints the progress and
a summary on stderr); :func:`predict_files_to_dir` writes the same files for a model already prepared.

Exit status: 0 when at least one image was processed, 1 when none was (no image found or all unreadable),
2 for bad arguments, an unreadable checkpoint or an output folder that would overwrite an input (one-paragraph
message, :mod:`lucid_core.cli_errors`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor

from lucid_core.allocator import tune_glibc_malloc
from lucid_core.atomic import atomic_write_json
from lucid_core.checkpoint import load
from lucid_core.cli_errors import UsageError, refuse_overwrite, run_cli
from lucid_core.decode import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF
from lucid_core.decode.selection import class_filter
from lucid_core.geometry.rotated import rboxes_to_polygons
from lucid_core.inference import (
    IMAGE_SUFFIXES,
    ImageLoadError,
    load_image_rgb,
    predict_prepared,
    prepare_inference_model,
)
from lucid_core.models import YOLOModel
from lucid_core.results import Detections

#: the image extensions lucid-data trains on (``lucid_data.imageio.IMAGE_SUFFIXES``; lucid-core cannot import
#: lucid-data, a test keeps the two equal).
TRAINING_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".dng", ".mpo", ".pfm"}
)
#: what ``lucid-predict`` reads from a folder: every training extension and whatever torchvision decodes itself.
PREDICT_SUFFIXES = TRAINING_SUFFIXES | IMAGE_SUFFIXES


def list_images(source: str | os.PathLike[str]) -> list[Path]:
    """A file, or the image files (by :data:`PREDICT_SUFFIXES`, sorted) directly inside a folder."""
    path = Path(source)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in PREDICT_SUFFIXES)
    if not path.exists():
        raise UsageError(
            f"--source {source}: no such file or folder; expected an image or a folder of images"
        )
    return [path]


def read_image(path: Path) -> Tensor:
    """RGB uint8 CHW: torchvision's decoder, or its PIL loader for the formats it does not decode (BMP, TIFF)."""
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return load_image_rgb(path)
    from torchvision.datasets.folder import pil_loader
    from torchvision.transforms.functional import pil_to_tensor

    try:
        image: Tensor = pil_to_tensor(pil_loader(str(path)))
    except (OSError, ValueError, SyntaxError) as exc:  # PIL raises these for undecodable files
        raise ImageLoadError(f"{path}: cannot decode image ({exc})") from exc
    return image


class Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal, a line per tenth otherwise); called as
    ``progress(done, total)``, nothing is drawn for a single image."""

    def __init__(self, width: int = 30) -> None:
        self.width = width
        self.tty = sys.stderr.isatty()
        self._shown = -1

    def __call__(self, done: int, total: int) -> None:
        if total <= 1:
            return
        tenth = done * 10 // total
        if not self.tty and tenth == self._shown:
            return
        self._shown = tenth
        filled = self.width * done // total
        bar = "#" * filled + "." * (self.width - filled)
        end = "" if self.tty and done < total else "\n"
        print(f"\rlucid-predict: [{bar}] {done}/{total}", end=end, file=sys.stderr, flush=True)


def mask_to_rle(mask: Tensor) -> dict[str, Any]:
    """Uncompressed COCO-style RLE of a ``(H, W)`` bool mask: run lengths in column-major order, zeros first."""
    flat = mask.t().reshape(-1).to(torch.int8)
    if flat.numel() == 0:
        return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": []}
    change = torch.nonzero(flat[1:] != flat[:-1]).flatten() + 1
    bounds = torch.cat((torch.zeros(1, dtype=torch.int64), change, torch.tensor([flat.numel()])))
    counts = (bounds[1:] - bounds[:-1]).tolist()
    if int(flat[0]) == 1:
        counts = [0, *counts]
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": counts}


def detections_to_json(det: Detections, names: Sequence[str]) -> list[dict[str, Any]]:
    """JSON-ready records of one image's detections."""
    records: list[dict[str, Any]] = []
    polygons = rboxes_to_polygons(det.rboxes) if det.rboxes is not None else None
    for i in range(len(det)):
        label = int(det.labels[i])
        rec: dict[str, Any] = {
            "box": [float(v) for v in det.boxes[i]],
            "score": float(det.scores[i]),
            "label": label,
            "name": names[label] if 0 <= label < len(names) else str(label),
        }
        if det.keypoints is not None:
            rec["keypoints"] = det.keypoints[i].tolist()
        if det.rboxes is not None and polygons is not None:
            rec["rbox"] = det.rboxes[i].tolist()
            rec["polygon"] = polygons[i].tolist()
        if det.masks is not None:
            rec["mask"] = mask_to_rle(det.masks[i])
        records.append(rec)
    return records


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    atomic_write_json(path, payload, indent=None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lucid-predict",
        description="Run a lucid-core checkpoint on an image or a folder; write one JSON of detections per image.",
        epilog="Exit status: 0 if at least one image was processed, 1 if none was, 2 on bad arguments/weights.",
    )
    parser.add_argument(
        "--weights", required=True, help="checkpoint (stem, .safetensors or .json) or a reference .pt"
    )
    parser.add_argument("--source", required=True, help="an image file or a folder of images")
    parser.add_argument("--output", required=True, help="folder for the JSON files (created)")
    parser.add_argument(
        "--imgsz", type=int, default=None, help="inference size (default: the checkpoint's imgsz)"
    )
    parser.add_argument("--conf", type=float, default=PREDICT_CONF, help="confidence threshold (strict >)")
    parser.add_argument("--iou", type=float, default=DEFAULT_IOU, help="NMS IoU threshold")
    parser.add_argument("--max-det", type=int, default=DEFAULT_MAX_DET, help="detections kept per image")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    parser.add_argument(
        "--decode", choices=("nms", "topk"), default=None, help="override the family's decoder"
    )
    parser.add_argument(
        "--classes",
        type=int,
        nargs="+",
        default=None,
        metavar="ID",
        help="keep only these class ids (filtered before NMS and --max-det, as the reference's classes=)",
    )
    parser.add_argument(
        "--agnostic-nms",
        action="store_true",
        help="class-agnostic NMS: boxes of different classes suppress each other (top-k: one class per anchor)",
    )
    return parser


@dataclass(frozen=True)
class PredictedImage:
    """One image lucid-predict wrote: the image file, its detections (original pixels) and its JSON file."""

    image: Path
    detections: Detections
    json_path: Path


@dataclass(frozen=True)
class PredictionRun:
    """What :func:`predict_to_dir` did: every image file of the source, and those written (unreadable ones are
    skipped)."""

    images: list[Path]
    written: list[PredictedImage]


def prediction_record(
    image: Path, orig_hw: tuple[int, int], imgsz: int, task: str, det: Detections, names: Sequence[str]
) -> dict[str, Any]:
    """The JSON payload of one image (module docstring): where it came from, its size and its detections."""
    return {
        "image": str(image),
        "orig_size": [int(orig_hw[0]), int(orig_hw[1])],
        "imgsz": imgsz,
        "task": task,
        "num_detections": len(det),
        "detections": detections_to_json(det, names),
    }


def predict_files_to_dir(
    net: YOLOModel,
    files: Sequence[Path],
    output: str | os.PathLike[str],
    *,
    mode: Literal["nms", "topk"],
    names: Sequence[str],
    imgsz: int,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device = "cpu",
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    weights: str | os.PathLike[str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    on_skip: Callable[[ImageLoadError], None] | None = None,
) -> list[PredictedImage]:
    """Predict each of ``files`` with ``net`` (made ready by :func:`~lucid_core.inference.prepare_inference_model`,
    decode ``mode``) and write ``output/<file name>.json`` for each (module docstring).

    No output may replace ``weights`` or an image (:func:`~lucid_core.cli_errors.refuse_overwrite`, checked before
    anything is written). ``on_progress(done, total)`` is called before each image; an unreadable image raises
    :class:`~lucid_core.inference.ImageLoadError`, or with ``on_skip`` is passed to it and skipped.
    """
    out_dir = Path(output)
    inputs = [*([weights] if weights is not None else []), *files]
    for path in files:
        refuse_overwrite("--output", out_dir / f"{path.name}.json", inputs)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[PredictedImage] = []
    for index, path in enumerate(files, 1):
        if on_progress is not None:
            on_progress(index, len(files))
        try:
            image = read_image(path)
        except ImageLoadError as exc:
            if on_skip is None:
                raise
            on_skip(exc)
            continue
        (det,) = predict_prepared(
            net,
            image,
            mode=mode,
            imgsz=imgsz,
            conf=conf,
            iou=iou,
            max_det=max_det,
            device=device,
            classes=classes,
            agnostic_nms=agnostic_nms,
        )
        orig_hw = (int(image.shape[1]), int(image.shape[2]))
        json_path = out_dir / f"{path.name}.json"
        write_json_atomic(json_path, prediction_record(path, orig_hw, imgsz, net.task, det, names))
        written.append(PredictedImage(path, det, json_path))
    return written


def predict_to_dir(
    weights: str | os.PathLike[str],
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    imgsz: int | None = None,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str = "cpu",
    decode: Literal["nms", "topk"] | None = None,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    on_skip: Callable[[ImageLoadError], None] | None = None,
) -> PredictionRun:
    """What ``lucid-predict`` does: predict an image or every image of a folder (:func:`list_images`) with the
    checkpoint ``weights`` and write one JSON per image into ``output`` (:func:`predict_files_to_dir`).

    ``imgsz`` defaults to the checkpoint's; ``decode`` to the family's decoder; ``classes`` / ``agnostic_nms`` as
    :func:`lucid_core.predict`. A bad value, a missing source or an output that would replace an input raises
    :class:`~lucid_core.cli_errors.UsageError`; an unreadable checkpoint its loader's error. With no image found,
    nothing is written.
    """
    if imgsz is not None and imgsz <= 0:
        raise UsageError(f"--imgsz {imgsz}: expected a positive image size, e.g. 640")
    ckpt = load(weights)
    size = int(imgsz or ckpt.imgsz)
    target = torch.device(device)
    try:
        class_filter(classes, ckpt.model.num_classes, torch.device("cpu"))
    except ValueError as exc:
        raise UsageError(f"--classes {' '.join(map(str, classes or ()))}: {exc}") from None
    net, mode = prepare_inference_model(ckpt.model, decode=decode, device=target)
    files = list_images(source)
    if not files:
        return PredictionRun([], [])
    written = predict_files_to_dir(
        net,
        files,
        output,
        mode=mode,
        names=ckpt.names,
        imgsz=size,
        conf=conf,
        iou=iou,
        max_det=max_det,
        device=target,
        classes=classes,
        agnostic_nms=agnostic_nms,
        weights=weights,
        on_progress=on_progress,
        on_skip=on_skip,
    )
    return PredictionRun(files, written)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``lucid-predict`` command: parse, set the process's malloc policy (a command may), run."""
    args = build_parser().parse_args(argv)
    tune_glibc_malloc()
    return run_cli("lucid-predict", lambda: _run(args))


def _skipped(exc: ImageLoadError) -> None:
    print(f"lucid-predict: skipped {exc}", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    run = predict_to_dir(
        args.weights,
        args.source,
        args.output,
        imgsz=args.imgsz,
        conf=args.conf,
        iou=args.iou,
        max_det=args.max_det,
        device=args.device,
        decode=args.decode,
        classes=args.classes,
        agnostic_nms=args.agnostic_nms,
        on_progress=Progress(),
        on_skip=_skipped,
    )
    if not run.images:
        print(f"lucid-predict: no image files in {args.source}", file=sys.stderr)
        return 1
    done = len(run.written)
    print(f"lucid-predict: {done}/{len(run.images)} image(s) written to {Path(args.output)}", file=sys.stderr)
    return 0 if done else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
