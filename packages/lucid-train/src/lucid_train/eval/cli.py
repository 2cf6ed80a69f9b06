"""``lucid-eval``: score a checkpoint on a dataset split with the COCO protocol and write a JSON report.

    lucid-eval --weights runs/best --data data.yaml [--split val] [--imgsz 640] [--batch 16] [--conf 0.001]
               [--iou 0.7] [--max-det 300] [--decode topk|nms|both] [--backend lucid|faster|pycocotools]
               [--device cpu] [--workers 0] [--plots DIR] [--save-json DIR] --output report.json
    lucid-eval --task obb --dota-labels LABELTXT_DIR (--dota-dets TASK1_DIR | --weights W --data IMAGE_DIR)
               [--merge-tiles | --split-scenes [--tile-size 1024] [--gap 200] [--rates 1.0 ...]]
               [--merged-dets DIR] --output report.json

The first form is :func:`evaluate_checkpoint`, the second (the official DOTA Task-1 protocol for oriented boxes)
:func:`lucid_train.eval.dota.score_dota`; this module's ``main`` only parses the flags, calls them and prints the
scores. A classifier (an image-level task) on a folder-per-class dataset is scored by top-1 / top-5 accuracy with
its per-class table (:mod:`lucid_train.eval.accuracy`; ``--conf``, ``--iou``, ``--max-det``, ``--decode``,
``--backend``, ``--square`` and ``--save-json`` do not apply). Unusable inputs (checkpoint, annotations, image files, classes) are found BEFORE inference; each exits with
status 2 and one message naming the file / field / value.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from lucid_core.checkpoint import CheckpointError, checkpoint_paths, load
from lucid_core.cli_errors import refuse_overwrite, run_cli
from lucid_core.loss.terms.pose import resolve_keypoint_sigmas
from lucid_core.tasks import TASKS, get_task
from lucid_data.readers import load_dataset
from lucid_train.eval import runner
from lucid_train.eval.accuracy import evaluate_accuracy
from lucid_train.eval.artifacts import write_artifacts
from lucid_train.eval.dota import DotaFormatError, format_dota_table, score_dota
from lucid_train.eval.evaluator import BACKENDS
from lucid_train.eval.mot import track_main
from lucid_train.eval.per_class import PerClassTable
from lucid_train.eval.report import build_report, finite_json, sha256_file, write_report
from lucid_train.eval.sources import ground_truth_for_path
from lucid_train.validation import KNOWN_ERRORS

__all__ = ["EvalInputError", "check_classes", "check_images", "evaluate_checkpoint", "main"]


class EvalInputError(ValueError):
    """An input of ``lucid-eval`` (weights, data, images, classes) is unusable; raised before inference."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lucid-eval", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument(
        "--weights", default=None, help="lucid checkpoint (stem, .safetensors or .json) or a reference .pt"
    )
    p.add_argument("--data", default=None, help="dataset: YOLO data YAML, COCO JSON / folder, DOTA folder")
    p.add_argument("--split", default="val")
    p.add_argument("--imgsz", type=int, default=None, help="network input size (default: the checkpoint's)")
    p.add_argument(
        "--batch",
        type=int,
        default=16,
        help="images per rectangular batch (default 16; in-training validation uses twice the training batch)",
    )
    p.add_argument(
        "--square",
        action="store_true",
        help="letterbox every image to the square --imgsz instead of the reference's rectangular batches",
    )
    p.add_argument("--conf", type=float, default=0.001)
    p.add_argument("--iou", type=float, default=0.7)
    p.add_argument("--max-det", type=int, default=300)
    p.add_argument(
        "--decode",
        choices=("topk", "nms", "both"),
        default=None,
        help="default: nms (YOLO26: one-to-many + NMS, as the reference)",
    )
    p.add_argument("--backend", choices=BACKENDS, default="lucid")
    p.add_argument("--device", default="cpu")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--output", required=True, help="JSON report path (written atomically)")
    p.add_argument(
        "--plots",
        default=None,
        metavar="DIR",
        help="write the validation artefacts here (confusion matrix, PR/F1/P/R curves, labels, per-class table)",
    )
    p.add_argument(
        "--save-json",
        default=None,
        metavar="DIR",
        help="write the results files here: <iou_type>_results.json (COCO format), Task1_<class>.txt (rotated)",
    )
    dota = p.add_argument_group("DOTA Task-1 protocol (oriented boxes, lucid_train.eval.dota)")
    dota.add_argument("--task", choices=tuple(TASKS), default=None)
    dota.add_argument("--dota-labels", default=None, help="folder of DOTA labelTxt files (one per image)")
    dota.add_argument("--dota-dets", default=None, help="folder of Task1_<class>.txt detection files")
    dota.add_argument(
        "--merge-tiles",
        action="store_true",
        help="detections are on devkit-named tiles: map back by offset/rate, polygon NMS 0.1 per class",
    )
    dota.add_argument("--merged-dets", default=None, help="also write the scored Task1_<class>.txt here")
    dota.add_argument(
        "--split-scenes",
        action="store_true",
        help="--data holds whole scenes: split them (devkit tiles) before predicting; implies --merge-tiles",
    )
    dota.add_argument("--tile-size", type=int, default=1024, help="split tile size (devkit default 1024)")
    dota.add_argument("--gap", type=int, default=200, help="tile overlap (devkit default 200)")
    dota.add_argument("--rates", type=float, nargs="+", default=[1.0], help="split scales (multi-scale)")
    return p


def _pose_kpt_sigmas(model: Any, source: Any, data: Path) -> list[float] | None:
    """The OKS sigmas the keypoint metric uses — the same as the pose loss (``resolve_keypoint_sigmas``): the
    dataset's own ``kpt_sigmas``, else COCO's for (17, 3), else 1/K. None for a task without keypoints."""
    task = getattr(model, "task", None)
    if task is None or "keypoints" not in get_task(task).target_fields:
        return None
    kpt_shape = getattr(model, "kpt_shape", None) or getattr(source, "kpt_shape", None) or (17, 3)
    try:
        return [float(v) for v in resolve_keypoint_sigmas(kpt_shape, getattr(source, "kpt_sigmas", None))]
    except ValueError as exc:
        raise EvalInputError(f"--data {data}: {exc}") from exc


def check_images(source: Any) -> None:
    """Every image file of the split exists and is non-empty (else one error listing the first few)."""
    missing = []
    for record in source.records:
        path = Path(record.path)
        if not path.is_file() or path.stat().st_size == 0:
            missing.append(str(path))
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise EvalInputError(f"{len(missing)} image(s) missing or empty: {', '.join(missing[:5])}{more}")
    if not source.records:
        raise EvalInputError(f"{source.root}: split {source.split!r} has no images")


def check_classes(model_names: Sequence[str], num_classes: int, source: Any, weights: str) -> None:
    """The model must know exactly the dataset's categories (count and names, in contiguous order)."""
    data_names = [str(source.names[i]) for i in range(len(source.names))]
    if num_classes != len(data_names):
        raise EvalInputError(
            f"class count mismatch: {weights} has {num_classes} classes, the dataset {source.root} has "
            f"{len(data_names)}"
        )
    diff = [(i, m, d) for i, (m, d) in enumerate(zip(model_names, data_names)) if m != d]
    if diff:
        i, m, d = diff[0]
        raise EvalInputError(
            f"class names differ ({len(diff)} of {num_classes}): class {i} is {m!r} in {weights} but {d!r} in "
            f"the dataset {source.root}"
        )


def evaluate_checkpoint(
    weights: str | os.PathLike[str],
    data: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str],
    split: str = "val",
    imgsz: int | None = None,
    batch: int = 16,
    square: bool = False,
    conf: float = 0.001,
    iou: float = 0.7,
    max_det: int = 300,
    decode: Literal["topk", "nms", "both"] | None = None,
    backend: str = "lucid",
    device: str = "cpu",
    workers: int = 0,
    plots: str | os.PathLike[str] | None = None,
    save_json: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """COCO-protocol scores of the checkpoint ``weights`` on the ``split`` of ``data``, written to ``output``
    (JSON, atomically, :mod:`lucid_train.eval.report`); returns that report dict.

    ``weights``: lucid-core weights or a reference ``.pt``; ``data``: a YOLO data YAML, COCO JSON / folder or DOTA
    folder. ``imgsz`` defaults to the checkpoint's; ``square`` letterboxes every image to ``imgsz`` instead of
    rectangular batches of ``batch``; ``decode``: None = ``"nms"``, ``"both"`` adds the top-k scores
    (``other_decodes``). Before inference the inputs are checked (checkpoint, annotations, image files, class
    count and names): a problem raises :class:`EvalInputError` naming it; an ``output`` that would replace an
    input raises :class:`~lucid_core.cli_errors.OutputOverwriteError`. ``plots``: a folder for the validation
    artefacts (:func:`lucid_train.eval.artifacts.write_artifacts`; the per-class table is also in the report,
    ``per_class_table``); ``save_json``: a folder for the results files
    (:mod:`lucid_train.eval.coco_results`). A classifier (image-level task) is scored by
    :func:`~lucid_train.eval.accuracy.evaluate_accuracy` instead: the report holds ``top1``, ``top5``, the
    ``per_class_table`` and the ``confusion_matrix``; ``plots`` gets its per-class table and confusion figures.
    """
    if not weights or not data:
        raise EvalInputError("--weights and --data are required (or --dota-labels for the DOTA protocol)")
    refuse_overwrite("--output", output, [*checkpoint_paths(weights), data])
    try:
        checkpoint = load(weights, device=device)
    except (CheckpointError, FileNotFoundError) as exc:
        raise EvalInputError(f"--weights: {exc}") from exc
    model = checkpoint.model
    data_path = Path(data)
    try:
        source = load_dataset(data_path, split, model.task)
    except (ValueError, OSError, KeyError) as exc:  # LabelError, JSON / YAML errors, missing files
        raise EvalInputError(f"--data {data_path} (split {split!r}): {exc}") from exc
    check_images(source)
    check_classes(checkpoint.names, model.num_classes, source, str(weights))
    if get_task(model.task).image_level:  # a classifier: accuracies, no COCO ground truth
        size = int(imgsz or checkpoint.imgsz)
        tic = time.perf_counter()
        scores = evaluate_accuracy(
            model, source, imgsz=size, batch_size=batch, device=device, workers=workers,
            names=checkpoint.names, artifacts=plots is not None,
        )  # fmt: skip
        assert checkpoint.weights_path is not None
        report = build_report(
            scores, weights=str(weights), weights_sha256=sha256_file(checkpoint.weights_path), data=str(data_path),
            split=split, family=getattr(model, "family", None), task=model.task, imgsz=size, device=str(device),
            total_seconds=time.perf_counter() - tic,
        )  # fmt: skip
        if plots is not None and scores.artifacts is not None:
            write_artifacts(scores.artifacts, plots)
        write_report(output, report)
        return report
    kpt_sigmas = _pose_kpt_sigmas(model, source, data_path)
    gt = ground_truth_for_path(data_path, split, source, model.task)
    size = int(imgsz or checkpoint.imgsz)

    tic = time.perf_counter()
    result = runner.evaluate_model(
        model,
        source,
        imgsz=size,
        batch_size=batch,
        rect=not square,
        conf=conf,
        iou=iou,
        max_det=max_det,
        decode=decode,
        device=device,
        backend=backend,
        workers=workers,
        ground_truth=gt,
        kpt_sigmas=kpt_sigmas,
        artifacts=plots is not None,
        save_json=save_json,
    )
    seconds = time.perf_counter() - tic
    assert checkpoint.weights_path is not None
    report = build_report(
        result,
        weights=str(weights),
        weights_sha256=sha256_file(checkpoint.weights_path),
        data=str(data_path),
        split=split,
        family=getattr(model, "family", None),
        task=model.task,
        imgsz=size,
        conf=conf,
        iou=iou,
        max_det=max_det,
        device=str(device),
        total_seconds=seconds,
    )
    if plots is not None:
        table = result.artifacts.table
        report["per_class_table"] = finite_json({"columns": list(table.columns), "rows": list(table.rows)})
        write_artifacts(result.artifacts, plots)
    write_report(output, report)
    return report


def _dota_requested(args: argparse.Namespace) -> bool:
    """Whether the flags ask for the DOTA protocol (``--dota-labels``/``--dota-dets``/``--merge-tiles``/
    ``--split-scenes``)."""
    return bool(args.dota_labels or args.dota_dets or args.merge_tiles or args.split_scenes)


def main(argv: Sequence[str] | None = None) -> int:
    """``lucid-eval``: COCO/DOTA scoring of a checkpoint, or ``lucid-eval track`` (MOTChallenge metrics)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["track"]:
        return track_main(arguments[1:])
    args = _parser().parse_args(arguments)
    return run_cli("lucid-eval", lambda: _main(args), extra_known=(EvalInputError, *KNOWN_ERRORS))


def _main(args: argparse.Namespace) -> int:
    if _dota_requested(args):
        return _main_dota(args)
    report = evaluate_checkpoint(
        args.weights,
        args.data,
        output=args.output,
        split=args.split,
        imgsz=args.imgsz,
        batch=args.batch,
        square=args.square,
        conf=args.conf,
        iou=args.iou,
        max_det=args.max_det,
        decode=args.decode,
        backend=args.backend,
        device=args.device,
        workers=args.workers,
        plots=args.plots,
        save_json=args.save_json,
    )
    if args.plots is not None or "top1" in report:  # a classifier's report always holds its table
        table = report["per_class_table"]
        print(PerClassTable(tuple(table["columns"]), tuple(map(tuple, table["rows"]))).to_text())
    if "top1" in report:
        print(
            f"lucid-eval: {report['num_images']} images: top-1 {report['top1']:.4f} top-5 {report['top5']:.4f}"
        )
        if args.plots is not None:
            print(f"lucid-eval: validation artefacts written to {args.plots}")
        print(f"lucid-eval: report written to {args.output}")
        return 0
    parts = [
        f"{t}: mAP50 {v['mAP50']:.4f} mAP50-95 {v['mAP50-95']:.4f}" for t, v in report["iou_types"].items()
    ]
    print(f"lucid-eval: {report['num_images']} images, decode {report['decode']}: " + "; ".join(parts))
    for decode, other in report["other_decodes"].items():
        parts = [
            f"{t}: mAP50 {v['mAP50']:.4f} mAP50-95 {v['mAP50-95']:.4f}" for t, v in other["iou_types"].items()
        ]
        print(f"lucid-eval: decode {decode}: " + "; ".join(parts))
    if args.plots is not None:
        print(f"lucid-eval: validation artefacts written to {args.plots}")
    if args.save_json is not None:
        print(f"lucid-eval: results files written to {args.save_json}")
    print(f"lucid-eval: report written to {args.output}")
    return 0


def _main_dota(args: argparse.Namespace) -> int:
    """The DOTA Task-1 form (module docstring); unusable inputs raise `EvalInputError` (exit 2, one message)."""
    try:
        if args.task is not None and "rboxes" not in get_task(args.task).target_fields:
            raise DotaFormatError(
                f"--task {args.task}: the DOTA protocol scores oriented boxes, use --task obb"
            )
        if not args.dota_labels:
            raise DotaFormatError("--dota-labels DIR is required for DOTA scoring (the labelTxt folder)")
        scoring = score_dota(
            args.dota_labels,
            output=args.output,
            detections=args.dota_dets,
            weights=args.weights,
            data=args.data,
            merge_tiles=args.merge_tiles,
            split_scenes=args.split_scenes,
            tile_size=args.tile_size,
            gap=args.gap,
            rates=args.rates,
            merged_dets=args.merged_dets,
            imgsz=args.imgsz,
            conf=args.conf,
            iou=args.iou,
            max_det=args.max_det,
            device=args.device,
        )
    except DotaFormatError as exc:
        raise EvalInputError(str(exc)) from exc
    report = scoring.report
    print(format_dota_table(scoring.result))
    print(
        f"lucid-eval: DOTA Task1, {report['num_images']} images: mAP07 {report['mAP07']} mAP {report['mAP']}"
    )
    print(f"lucid-eval: report written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
