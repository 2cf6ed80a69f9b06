"""MOTChallenge tracking metrics: HOTA (DetA, AssA, LocA), CLEAR MOT (MOTA, MOTP, ID switches, MT/PT/ML, Frag), IDF1.

Definitions (similarity = box IoU, matches one-to-one per frame by optimal assignment):

* HOTA — Luiten et al., "HOTA: A Higher Order Metric for Evaluating Multi-Object Tracking", IJCV 2021. For each
  α in 0.05, 0.10, …, 0.95 a match needs IoU ≥ α; the per-frame matching maximises IoU weighted by the
  pair's whole-video alignment score, DetA = TP / (TP + FN + FP), AssA = mean over TPs of the matched pair's
  TPA / (TPA + FNA + FPA), HOTA_α = √(DetA·AssA); the figures are means over α.
* CLEAR MOT — Bernardin & Stiefelhagen, "Evaluating Multiple Object Tracking Performance: The CLEAR MOT
  Metrics", 2008, with the MOTChallenge conventions (Milan et al. 2016): IoU ≥ 0.5, a pair matched in the
  previous frame is kept when still valid, an ID switch is a ground-truth object matched to another ID than the
  one it last had; MOTA = 1 − (FN + FP + IDSW) / GT; MT / ML = tracked in > 80 % / < 20 % of its frames.
* IDF1 — Ristani et al., "Performance Measures and a Data Set for Multi-Target, Multi-Camera Tracking", 2016:
  one global assignment of ground-truth to predicted trajectories minimising IDFN + IDFP, IoU ≥ 0.5 per frame.

Ground-truth rows flagged ``conf = 0`` are ignored (MOTChallenge); ``distractor_classes`` (MOT16/17 ground truth
with a class column) also removes predictions that match a distractor and every non-``valid_class`` row.
Sequences are combined by summing counts (HOTA's association scores weighted by TP).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lucid_core.atomic import atomic_write_json
from lucid_core.cli_errors import refuse_overwrite, register_known_errors, run_cli
from lucid_core.track.config import MissingExtraError
from lucid_core.track.matching import box_iou, linear_sum_assignment
from lucid_core.track.mot_io import GT_COLUMNS, RESULT_COLUMNS, MotFormatError, read_mot_file

__all__ = [
    "HOTA_ALPHAS",
    "MOT_THRESHOLD",
    "SequenceData",
    "add_track_parser",
    "build_sequence",
    "evaluate_sequences",
    "evaluate_tracking",
    "format_tracking_table",
    "track_main",
]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: HOTA's localisation thresholds α (19 values).
HOTA_ALPHAS: Array = np.arange(0.05, 0.99, 0.05)
#: IoU a CLEAR MOT / IDF1 match needs.
MOT_THRESHOLD = 0.5
#: MOT16/17 ground-truth classes whose matched predictions are not counted (person on vehicle, static person,
#: distractor, reflection).
MOT17_DISTRACTORS = (2, 7, 8, 12)
EPS = float(np.finfo(float).eps)


@dataclass
class SequenceData:
    """One sequence ready for scoring: per frame the ground-truth and predicted IDs (contiguous from 0) and IoUs."""

    gt_ids: list[IntArray]
    pred_ids: list[IntArray]
    similarity: list[Array]  # (n_gt_t, n_pred_t) IoU
    num_gt_ids: int
    num_pred_ids: int

    @property
    def num_gt_dets(self) -> int:
        return sum(len(g) for g in self.gt_ids)

    @property
    def num_pred_dets(self) -> int:
        return sum(len(p) for p in self.pred_ids)


def _xywh_to_xyxy(rows: Array) -> Array:
    return np.concatenate([rows[:, 2:4], rows[:, 2:4] + rows[:, 4:6]], axis=1)


def _relabel(per_frame: list[Array]) -> tuple[list[IntArray], int]:
    present = np.unique(np.concatenate(per_frame)) if per_frame else np.zeros(0)
    return [np.searchsorted(present, ids).astype(np.int64) for ids in per_frame], len(present)


def _check_unique(ids: Array, name: str, frame: int) -> None:
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise MotFormatError(f"{name}: frame {frame} has ID {values[counts > 1][0]:g} more than once")


def build_sequence(
    gt: Array,
    pred: Array,
    *,
    distractor_classes: Sequence[int] = (),
    valid_class: int = 1,
    num_frames: int | None = None,
    names: tuple[str, str] = ("gt", "pred"),
) -> SequenceData:
    """Rows ``frame,id,x,y,w,h,...`` of ground truth and predictions → :class:`SequenceData` (module docstring).

    ``distractor_classes`` needs ground truth with a class column (index 7); empty = no class handling.
    """
    gt = np.asarray(gt, dtype=np.float64).reshape(-1, gt.shape[-1] if gt.size else 7)
    pred = np.asarray(pred, dtype=np.float64).reshape(-1, pred.shape[-1] if pred.size else 6)
    last = max(int(gt[:, 0].max()) if len(gt) else 0, int(pred[:, 0].max()) if len(pred) else 0)
    frames = num_frames if num_frames is not None else last
    gt_ids: list[Array] = []
    pred_ids: list[Array] = []
    sims: list[Array] = []
    for frame in range(1, frames + 1):
        g = gt[gt[:, 0] == frame]
        p = pred[pred[:, 0] == frame]
        _check_unique(g[:, 1], names[0], frame)
        _check_unique(p[:, 1], names[1], frame)
        if distractor_classes:
            if g.shape[1] < 8:
                raise MotFormatError(
                    f"{names[0]}: distractor classes need a class column (8th), got {g.shape[1]}"
                )
            sim = box_iou(_xywh_to_xyxy(g), _xywh_to_xyxy(p))
            if len(g) and len(p):
                score = np.where(sim >= MOT_THRESHOLD - EPS, sim, 0.0)
                rows, cols = linear_sum_assignment(-score)
                matched = score[rows, cols] > 0 + EPS
                distractor = np.isin(g[rows[matched], 7], distractor_classes)
                p = np.delete(p, cols[matched][distractor], axis=0)
            keep = (g[:, 6] != 0) & (g[:, 7] == valid_class)
        else:
            keep = g[:, 6] != 0
        g = g[keep]
        gt_ids.append(g[:, 1])
        pred_ids.append(p[:, 1])
        sims.append(box_iou(_xywh_to_xyxy(g), _xywh_to_xyxy(p)))
    gt_relabelled, num_gt = _relabel(gt_ids)
    pred_relabelled, num_pred = _relabel(pred_ids)
    return SequenceData(gt_relabelled, pred_relabelled, sims, num_gt, num_pred)


# ----------------------------------------------------------------------------------------------------- HOTA
def _hota_counts(seq: SequenceData) -> dict[str, Any]:
    n_a = len(HOTA_ALPHAS)
    tp, fn, fp, loc = np.zeros(n_a), np.zeros(n_a), np.zeros(n_a), np.zeros(n_a)
    g_n, p_n = seq.num_gt_ids, seq.num_pred_ids
    if seq.num_pred_dets == 0 or seq.num_gt_dets == 0:
        fn[:] = seq.num_gt_dets
        fp[:] = seq.num_pred_dets
        zeros = np.zeros(n_a)
        return {"TP": tp, "FN": fn, "FP": fp, "loc": loc, "AssA": zeros, "AssRe": zeros, "AssPr": zeros}
    potential = np.zeros((g_n, p_n))
    gt_count = np.zeros((g_n, 1))
    pred_count = np.zeros((1, p_n))
    for g, p, sim in zip(seq.gt_ids, seq.pred_ids, seq.similarity):
        denom = sim.sum(0)[None, :] + sim.sum(1)[:, None] - sim
        share = np.zeros_like(sim)
        ok = denom > EPS
        share[ok] = sim[ok] / denom[ok]
        potential[g[:, None], p[None, :]] += share
        gt_count[g] += 1
        pred_count[0, p] += 1
    alignment = potential / (gt_count + pred_count - potential)
    matches = np.zeros((n_a, g_n, p_n))
    for g, p, sim in zip(seq.gt_ids, seq.pred_ids, seq.similarity):
        if len(g) == 0 or len(p) == 0:
            fn += len(g)
            fp += len(p)
            continue
        rows, cols = linear_sum_assignment(-(alignment[g[:, None], p[None, :]] * sim))
        matched_sim = sim[rows, cols]
        for a, alpha in enumerate(HOTA_ALPHAS):
            ok = matched_sim >= alpha - EPS
            count = int(ok.sum())
            tp[a] += count
            fn[a] += len(g) - count
            fp[a] += len(p) - count
            if count:
                loc[a] += matched_sim[ok].sum()
                matches[a, g[rows[ok]], p[cols[ok]]] += 1
    ass_a, ass_re, ass_pr = np.zeros(n_a), np.zeros(n_a), np.zeros(n_a)
    for a in range(n_a):
        m = matches[a]
        weight = max(1.0, tp[a])
        ass_a[a] = (m * m / np.maximum(1, gt_count + pred_count - m)).sum() / weight
        ass_re[a] = (m * m / np.maximum(1, gt_count)).sum() / weight
        ass_pr[a] = (m * m / np.maximum(1, pred_count)).sum() / weight
    return {"TP": tp, "FN": fn, "FP": fp, "loc": loc, "AssA": ass_a, "AssRe": ass_re, "AssPr": ass_pr}


def _hota_final(c: Mapping[str, Array]) -> dict[str, float]:
    tp, fn, fp = c["TP"], c["FN"], c["FP"]
    det_a = tp / np.maximum(1, tp + fn + fp)
    hota = np.sqrt(det_a * c["AssA"])
    loc_a = np.maximum(1e-10, c["loc"]) / np.maximum(1e-10, tp)
    return {
        "HOTA": float(hota.mean()),
        "DetA": float(det_a.mean()),
        "AssA": float(c["AssA"].mean()),
        "DetRe": float((tp / np.maximum(1, tp + fn)).mean()),
        "DetPr": float((tp / np.maximum(1, tp + fp)).mean()),
        "AssRe": float(c["AssRe"].mean()),
        "AssPr": float(c["AssPr"].mean()),
        "LocA": float(loc_a.mean()),
        "HOTA(0)": float(hota[0]),
        "LocA(0)": float(loc_a[0]),
    }


# ---------------------------------------------------------------------------------------------- CLEAR MOT
def _clear_counts(seq: SequenceData) -> dict[str, float]:
    g_n = seq.num_gt_ids
    tp = fn = fp = idsw = 0
    motp = 0.0
    gt_count = np.zeros(g_n)
    matched_count = np.zeros(g_n)
    segments = np.zeros(g_n)
    last_id = np.full(g_n, np.nan)  # predicted ID each object was last matched to
    previous = np.full(g_n, np.nan)  # … in the previous frame with a matching
    for g, p, sim in zip(seq.gt_ids, seq.pred_ids, seq.similarity):
        if len(g) == 0:
            fp += len(p)
            continue
        if len(p) == 0:
            fn += len(g)
            gt_count[g] += 1
            continue
        score = 1000.0 * (p[None, :] == previous[g][:, None]) + sim
        score[sim < MOT_THRESHOLD - EPS] = 0
        rows, cols = linear_sum_assignment(-score)
        ok = score[rows, cols] > 0 + EPS
        rows, cols = rows[ok], cols[ok]
        gt_matched, pred_matched = g[rows], p[cols]
        before = last_id[gt_matched]
        idsw += int((~np.isnan(before) & (pred_matched != before)).sum())
        gt_count[g] += 1
        matched_count[gt_matched] += 1
        was_untracked = np.isnan(previous)
        last_id[gt_matched] = pred_matched
        previous[:] = np.nan
        previous[gt_matched] = pred_matched
        segments += was_untracked & ~np.isnan(previous)
        tp += len(rows)
        fn += len(g) - len(rows)
        fp += len(p) - len(rows)
        motp += float(sim[rows, cols].sum())
    present = gt_count > 0
    ratio = matched_count[present] / gt_count[present]
    mt = int((ratio > 0.8).sum())
    pt = int((ratio >= 0.2).sum()) - mt
    return {
        "CLR_TP": tp,
        "CLR_FN": fn,
        "CLR_FP": fp,
        "IDSW": idsw,
        "MOTP_sum": motp,
        "MT": mt,
        "PT": pt,
        "ML": g_n - mt - pt,
        "Frag": float((segments[segments > 0] - 1).sum()),
    }


def _clear_final(c: Mapping[str, float]) -> dict[str, float]:
    tp, fn, fp, idsw = c["CLR_TP"], c["CLR_FN"], c["CLR_FP"], c["IDSW"]
    return {
        "MOTA": (tp - fp - idsw) / max(1.0, tp + fn),
        "MOTP": c["MOTP_sum"] / max(1.0, tp),
        "MODA": (tp - fp) / max(1.0, tp + fn),
        "CLR_Re": tp / max(1.0, tp + fn),
        "CLR_Pr": tp / max(1.0, tp + fp),
        **{k: float(c[k]) for k in ("CLR_TP", "CLR_FN", "CLR_FP", "IDSW", "MT", "PT", "ML", "Frag")},
    }


# --------------------------------------------------------------------------------------------------- IDF1
def _identity_counts(seq: SequenceData) -> dict[str, float]:
    g_n, p_n = seq.num_gt_ids, seq.num_pred_ids
    if seq.num_pred_dets == 0 or seq.num_gt_dets == 0:
        return {"IDTP": 0.0, "IDFN": float(seq.num_gt_dets), "IDFP": float(seq.num_pred_dets)}
    overlap = np.zeros((g_n, p_n))
    gt_count = np.zeros(g_n)
    pred_count = np.zeros(p_n)
    for g, p, sim in zip(seq.gt_ids, seq.pred_ids, seq.similarity):
        rows, cols = np.nonzero(sim >= MOT_THRESHOLD)
        np.add.at(overlap, (g[rows], p[cols]), 1)
        gt_count[g] += 1
        pred_count[p] += 1
    # rows: ground-truth trajectories then one "missed" dummy per prediction; columns: predicted trajectories
    # then one "missed" dummy per ground truth (Ristani et al., bipartite formulation)
    size = g_n + p_n
    fn = np.zeros((size, size))
    fp = np.zeros((size, size))
    fn[:g_n, p_n:] = 1e10
    fp[g_n:, :p_n] = 1e10
    fn[:g_n, :p_n] = gt_count[:, None] - overlap
    fn[np.arange(g_n), p_n + np.arange(g_n)] = gt_count
    fp[:g_n, :p_n] = pred_count[None, :] - overlap
    fp[g_n + np.arange(p_n), np.arange(p_n)] = pred_count
    rows, cols = linear_sum_assignment(fn + fp)
    idfn = float(fn[rows, cols].sum())
    idfp = float(fp[rows, cols].sum())
    return {"IDTP": float(gt_count.sum() - idfn), "IDFN": idfn, "IDFP": idfp}


def _identity_final(c: Mapping[str, float]) -> dict[str, float]:
    idtp, idfn, idfp = c["IDTP"], c["IDFN"], c["IDFP"]
    return {
        "IDF1": idtp / max(1.0, idtp + 0.5 * idfp + 0.5 * idfn),
        "IDR": idtp / max(1.0, idtp + idfn),
        "IDP": idtp / max(1.0, idtp + idfp),
        "IDTP": idtp,
        "IDFN": idfn,
        "IDFP": idfp,
    }


# ------------------------------------------------------------------------------------------------- public
def _score(seq: SequenceData) -> dict[str, Any]:
    return {
        "hota": _hota_counts(seq),
        "clear": _clear_counts(seq),
        "identity": _identity_counts(seq),
        "counts": {
            "GT_IDs": seq.num_gt_ids,
            "Pred_IDs": seq.num_pred_ids,
            "GT_Dets": seq.num_gt_dets,
            "Pred_Dets": seq.num_pred_dets,
        },
    }


def _final(parts: Mapping[str, Any]) -> dict[str, float]:
    return {
        **_hota_final(parts["hota"]),
        **_clear_final(parts["clear"]),
        **_identity_final(parts["identity"]),
        **{k: float(v) for k, v in parts["counts"].items()},
    }


def _combine(scored: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    tp = sum(s["hota"]["TP"] for s in scored)
    hota = {k: sum(s["hota"][k] for s in scored) for k in ("TP", "FN", "FP", "loc")}
    for key in ("AssA", "AssRe", "AssPr"):
        hota[key] = sum(s["hota"][key] * s["hota"]["TP"] for s in scored) / np.maximum(1e-10, tp)
    return {
        "hota": hota,
        **{
            part: {k: sum(s[part][k] for s in scored) for k in scored[0][part]}
            for part in ("clear", "identity", "counts")
        },
    }


def _sequence_files(gt: Path, pred: Path) -> list[tuple[str, Path, Path]]:
    """``(name, gt file, pred file)``: two files, or folders (``SEQ/gt/gt.txt`` or ``SEQ.txt`` vs ``SEQ.txt``)."""
    if gt.is_file() and pred.is_file():
        return [(pred.stem, gt, pred)]
    if not gt.is_dir() or not pred.is_dir():
        raise FileNotFoundError(
            f"--gt {gt} and --pred {pred}: expected two files, or two folders of sequences (one missing or mixed)"
        )
    found: dict[str, Path] = {p.stem: p for p in sorted(gt.glob("*.txt"))}
    found.update(
        {d.name: d / "gt" / "gt.txt" for d in sorted(gt.iterdir()) if (d / "gt" / "gt.txt").is_file()}
    )
    if not found:
        raise FileNotFoundError(f"--gt {gt}: no SEQ/gt/gt.txt or SEQ.txt inside")
    missing = [name for name in found if not (pred / f"{name}.txt").is_file()]
    if missing:
        raise FileNotFoundError(f"--pred {pred}: no results for sequence(s) {', '.join(missing)} (SEQ.txt)")
    return [(name, found[name], pred / f"{name}.txt") for name in sorted(found)]


def evaluate_sequences(
    gt: str | os.PathLike[str], pred: str | os.PathLike[str], *, distractor_classes: Sequence[int] = ()
) -> dict[str, dict[str, float]]:
    """Metrics of every sequence and of all combined (key ``"COMBINED"``); paths as in :func:`evaluate_tracking`."""
    scored: dict[str, dict[str, Any]] = {}
    for name, gt_file, pred_file in _sequence_files(Path(gt), Path(pred)):
        seq = build_sequence(
            read_mot_file(gt_file, GT_COLUMNS),
            read_mot_file(pred_file, RESULT_COLUMNS),
            distractor_classes=distractor_classes,
            names=(str(gt_file), str(pred_file)),
        )
        scored[name] = _score(seq)
    out = {name: _final(parts) for name, parts in scored.items()}
    out["COMBINED"] = _final(_combine(list(scored.values())))
    return out


def evaluate_tracking(
    gt: str | os.PathLike[str], pred: str | os.PathLike[str], *, distractor_classes: Sequence[int] = ()
) -> dict[str, float]:
    """HOTA, CLEAR MOT and IDF1 of tracker results against MOTChallenge ground truth (module docstring).

    ``gt`` / ``pred`` are two files (``gt.txt``, ``results.txt``) or two folders (``SEQ/gt/gt.txt`` or ``SEQ.txt``
    against ``SEQ.txt``; all sequences combined). Returns a flat dict: HOTA, DetA, AssA, DetRe, DetPr, AssRe,
    AssPr, LocA, MOTA, MOTP, IDF1, IDR, IDP, IDSW, MT, PT, ML, Frag, the counts behind them.
    """
    return evaluate_sequences(gt, pred, distractor_classes=distractor_classes)["COMBINED"]


TABLE_KEYS = ("HOTA", "DetA", "AssA", "LocA", "MOTA", "MOTP", "IDF1", "IDSW", "MT", "PT", "ML", "Frag")


def format_tracking_table(results: Mapping[str, Mapping[str, float]]) -> str:
    """One line per sequence (and COMBINED, over several): the headline metrics (ratios to 3 decimals, counts as
    integers)."""
    rows = {k: v for k, v in results.items() if k != "COMBINED" or len(results) > 2}
    width = max(8, *(len(n) for n in rows))
    lines = [f"{'sequence':<{width}} " + " ".join(f"{k:>6}" for k in TABLE_KEYS)]
    for name, row in rows.items():
        cells = [
            f"{row[k]:>6.0f}" if k in ("IDSW", "MT", "PT", "ML", "Frag") else f"{row[k]:>6.3f}"
            for k in TABLE_KEYS
        ]
        lines.append(f"{name:<{width}} " + " ".join(cells))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- CLI
def _configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "--gt", required=True, help="MOTChallenge gt.txt, or a folder of SEQ/gt/gt.txt | SEQ.txt"
    )
    parser.add_argument("--pred", required=True, help="tracker results SEQ.txt, or a folder of them")
    parser.add_argument(
        "--distractor-classes",
        type=int,
        nargs="*",
        default=[],
        help="MOT16/17 ground truth: class ids whose matched predictions are not counted (e.g. 2 7 8 12)",
    )
    parser.add_argument("--output", default=None, help="also write the metrics as JSON (atomically)")
    parser.set_defaults(func=_run)
    return parser


def add_track_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``track`` command (``--gt``, ``--pred``) to an argparse ``subparsers``; ``args.func(args)`` runs it."""
    parser = subparsers.add_parser(
        "track",
        help="score MOTChallenge tracker results: HOTA, MOTA, IDF1",
        description=__doc__.splitlines()[0],
    )
    return _configure(parser)


def _run(args: argparse.Namespace) -> int:
    if args.output:
        refuse_overwrite("--output", args.output, [args.gt, args.pred])
    results = evaluate_sequences(args.gt, args.pred, distractor_classes=args.distractor_classes)
    print(format_tracking_table(results))
    if args.output:
        atomic_write_json(args.output, results)
        print(f"lucid-eval track: metrics written to {args.output}", file=sys.stderr)
    return 0


def track_main(argv: Sequence[str] | None = None) -> int:
    """``lucid-eval track --gt GT --pred PRED [--output JSON]``: print (and write) the tracking metrics."""
    args = _configure(
        argparse.ArgumentParser(prog="lucid-eval track", description=__doc__.splitlines()[0])
    ).parse_args(argv)
    register_known_errors(MotFormatError, MissingExtraError)
    return run_cli("lucid-eval track", lambda: int(args.func(args)))
