"""``lucid-predict --weights W --source IMAGE_OR_DIR --output DIR``: one JSON of detections per image.

Each image ``<name>`` (a file, or every image file directly inside the source folder, by extension) gives
``DIR/<name>.json`` written atomically (temporary file + ``os.replace``)::

    {"image": "<path>", "orig_size": [H, W], "imgsz": 640, "task": "detect", "num_detections": N,
     "detections": [{"box": [x1, y1, x2, y2], "score": s, "label": k, "name": "person",
                     "keypoints": [[x, y, v], ...],            # pose
                     "rbox": [cx, cy, w, h, theta], "polygon": [[x, y] x 4],   # obb
                     "mask": {"size": [H, W], "counts": [...]}}]}  # segment, uncompressed column-major RLE

all in original-image pixels. An image that cannot be read is reported on stderr and skipped; the others proceed.

Exit status: 0 when at least one image was processed, 1 when none was (no image found or all unreadable),
2 for bad arguments or an unreadable checkpoint.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lucid_core.atomic import atomic_write_json
from lucid_core.checkpoint import CheckpointError, load_checkpoint
from lucid_core.decode.postprocess import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF
from lucid_core.geometry.rotated import rboxes_to_polygons
from lucid_core.predict import (
    ImageLoadError,
    list_image_files,
    load_image_rgb,
    predict_prepared,
    prepare_inference_model,
)
from lucid_core.results import Detections


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
    parser.add_argument("--weights", required=True, help="checkpoint (stem, .safetensors or .json)")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        ckpt = load_checkpoint(args.weights)
    except CheckpointError as exc:
        print(f"lucid-predict: {exc}", file=sys.stderr)
        return 2
    imgsz = int(args.imgsz or ckpt.imgsz)
    device = torch.device(args.device)
    net, mode = prepare_inference_model(ckpt.model, decode=args.decode, device=device)
    files = list_image_files(args.source)
    if not files:
        print(f"lucid-predict: no image files in {args.source}", file=sys.stderr)
        return 1
    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    done = 0
    for path in files:
        try:
            image = load_image_rgb(path)
        except ImageLoadError as exc:
            print(f"lucid-predict: skipped {exc}", file=sys.stderr)
            continue
        (det,) = predict_prepared(
            net,
            image,
            mode=mode,
            imgsz=imgsz,
            conf=args.conf,
            iou=args.iou,
            max_det=args.max_det,
            device=device,
        )
        payload = {
            "image": str(path),
            "orig_size": [int(image.shape[1]), int(image.shape[2])],
            "imgsz": imgsz,
            "task": net.task,
            "num_detections": len(det),
            "detections": detections_to_json(det, ckpt.names),
        }
        write_json_atomic(out_dir / f"{path.name}.json", payload)
        done += 1
    print(f"lucid-predict: {done}/{len(files)} image(s) written to {out_dir}", file=sys.stderr)
    return 0 if done else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
