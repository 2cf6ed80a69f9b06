"""Parity of an exported file with PyTorch: run both on the same seeded images, compare output by output.

Each output's largest absolute difference is reported and checked against ``atol + rtol * |PyTorch|`` with
atol = rtol = :data:`TOLERANCE` of the export's precision (INT8 is reported, not judged). Top-k rows are compared
row set against row set, both ordered by box position, so equal scores ordered differently by two runtimes do not
count as a difference; below :data:`FAINT_SCORE` a row's class is not compared (:func:`mask_faint_labels`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lucid_core.export.graph import ExportModule
from lucid_core.export.runtime import Runner
from lucid_core.tasks import get_task

__all__ = ["FAINT_SCORE", "PARITY_SEED", "TOLERANCE", "OutputParity", "compare_outputs", "mask_faint_labels"]

#: parity tolerance (atol = rtol) per exported precision; None = reported only
TOLERANCE: dict[str, float | None] = {"fp32": 1e-4, "fp16": 1e-2, "int8": None}
PARITY_SEED = 0
#: below the lowest confidence any decode path reports (validation conf 0.001) a row's class is not compared
FAINT_SCORE = 1e-3


@dataclass
class OutputParity:
    """Runtime-vs-PyTorch comparison of one graph output (``tolerance`` None: reported, not judged)."""

    name: str
    shape: tuple[int, ...]
    max_abs_diff: float
    tolerance: float | None
    within: bool


def by_position(rows: np.ndarray, task: str) -> np.ndarray:
    """Rows ``(k, 6 + extra)`` of an end-to-end output ordered by box centre (then every column)."""
    if get_task(task).rotated:  # cx, cy, w, h
        cx, cy = rows[:, 0], rows[:, 1]
    else:  # x1, y1, x2, y2
        cx, cy = (rows[:, 0] + rows[:, 2]) / 2, (rows[:, 1] + rows[:, 3]) / 2
    keys = [rows[:, i] for i in range(rows.shape[1] - 1, -1, -1)] + [np.round(cx, 2), np.round(cy, 2)]
    return rows[np.lexsort(keys)]


def mask_faint_labels(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """``ours`` with the class column (5) of every row whose reference score (column 4) is below
    :data:`FAINT_SCORE` set to the reference's: there the class scores of an (almost) untrained model are equal up
    to rounding, and two runtimes' argmax may pick different ones; such rows are never reported by any decode
    path. Boxes and scores are still compared for every row."""
    faint = theirs[..., 4] < FAINT_SCORE
    out = ours.copy()
    out[..., 5] = np.where(faint, theirs[..., 5], ours[..., 5])
    return out


def compare_outputs(
    module: ExportModule,
    runner: Runner,
    names: list[str],
    input_hw: tuple[int, int],
    *,
    batch: int,
    precision: str,
    reference_half: bool = False,
) -> list[OutputParity]:
    """Run ``runner`` and ``module`` (in float16 when ``reference_half``) on seeded images; compare each output."""
    generator = torch.Generator().manual_seed(PARITY_SEED)
    x = torch.rand(batch, 3, *input_hw, generator=generator)
    dtype = torch.float16 if reference_half else torch.float32
    x = x.to(dtype)
    with torch.no_grad():
        expected = module.to(dtype)(x)
    reference = [t.float().numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
    got = [np.asarray(t.detach().float().cpu().numpy(), dtype=np.float32) for t in runner(x.float())]
    tolerance = TOLERANCE[precision]
    report: list[OutputParity] = []
    for index, (name, ours, theirs) in enumerate(zip(names, got, reference, strict=True)):
        if ours.shape != theirs.shape:
            report.append(OutputParity(name, tuple(ours.shape), float("inf"), tolerance, False))
            continue
        if index == 0 and module.output != "dense":
            ours = np.stack([by_position(rows, module.task) for rows in ours])
            theirs = np.stack([by_position(rows, module.task) for rows in theirs])
            ours = mask_faint_labels(ours, theirs)
        diff = np.abs(ours - theirs)
        within = tolerance is None or bool(np.all(diff <= tolerance + tolerance * np.abs(theirs)))
        report.append(OutputParity(name, tuple(ours.shape), float(diff.max(initial=0.0)), tolerance, within))
    return report
