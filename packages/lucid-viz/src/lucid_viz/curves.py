"""Training curves from a run's ``metrics.csv``: losses (train and val), mAP, learning rate per group.

``metrics.csv`` (written by lucid-train, one row per epoch) has the columns ``epoch``, ``train/<loss>`` and
``val/<loss>`` per loss term (``train/box_loss``, ``val/box_loss``, …), ``metrics/<name>`` (``metrics/mAP50``,
``metrics/mAP50-95``, …), ``lr/pg<i>`` per optimizer parameter group and ``epoch_seconds``. Every column is
optional: a panel whose columns are all missing (or hold no number) is skipped.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from lucid_viz.figures import new_figure

METRICS_FILE = "metrics.csv"
_METRIC_ORDER = ("mAP50", "mAP50-95")  # first, in this order; other metrics/* columns follow as found


def load_metrics(
    source: str | os.PathLike[str] | Mapping[str, Any] | Sequence[Mapping[str, Any]],
) -> dict[str, np.ndarray]:
    """Columns as float arrays (NaN where a cell is empty or not a number), from a run directory, a csv file,
    a list of per-epoch dicts or a dict of per-column lists."""
    if isinstance(source, str | os.PathLike):
        return _read_csv(Path(source))
    if isinstance(source, Mapping):
        columns = {str(name).strip(): list(values) for name, values in source.items()}
        lengths = {len(values) for values in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"metrics: columns have different lengths {sorted(lengths)}")
        return {name: _floats(values, f"metrics[{name!r}]") for name, values in columns.items()}
    rows = list(source)
    names: list[str] = []
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(f"metrics[{index}]: expected a dict per epoch, got {type(row).__name__}")
        names.extend(str(key).strip() for key in row if str(key).strip() not in names)
    return {
        name: _floats(
            (_get_stripped(row, name) for row in rows),
            f"metrics column {name!r}",
        )
        for name in names
    }


def _get_stripped(row: Mapping[str, Any], name: str) -> Any:
    for key, value in row.items():
        if str(key).strip() == name:
            return value
    return None


def _read_csv(path: Path) -> dict[str, np.ndarray]:
    csv_path = path / METRICS_FILE if path.is_dir() else path
    if not csv_path.is_file():
        raise FileNotFoundError(f"{csv_path}: no metrics file (expected the run directory's {METRICS_FILE})")
    with csv_path.open(newline="", encoding="utf-8") as stream:
        reader = csv.reader(stream)
        try:
            header = [name.strip() for name in next(reader)]
        except StopIteration:
            raise ValueError(f"{csv_path}: empty file, expected a header row") from None
        rows = [row for row in reader if any(cell.strip() for cell in row)]
    for line, row in enumerate(rows, start=2):
        if len(row) > len(header):
            raise ValueError(f"{csv_path}:{line}: {len(row)} cells for {len(header)} columns")
    return {
        name: _floats((row[i] if i < len(row) else "" for row in rows), f"{csv_path} column {name!r}")
        for i, name in enumerate(header)
        if name
    }


def _floats(values: Iterable[Any], what: str) -> np.ndarray:
    out: list[float] = []
    for value in values:
        if value is None or (isinstance(value, str) and not value.strip()):
            out.append(math.nan)
            continue
        if hasattr(value, "item"):
            value = value.item()
        try:
            out.append(float(value))
        except (TypeError, ValueError):
            out.append(math.nan)  # a note or a non-numeric column: not plotted
    return np.asarray(out, dtype=np.float64)


def curve_panels(columns: Mapping[str, np.ndarray]) -> list[tuple[str, list[str]]]:
    """(panel title, columns drawn in it): one per loss term (train and val), per metric, one for the LR."""
    numeric = [name for name, values in columns.items() if np.isfinite(values).any()]
    panels: list[tuple[str, list[str]]] = []
    losses: list[str] = []
    for name in numeric:
        split, _, term = name.partition("/")
        if split in ("train", "val") and term and term not in losses:
            losses.append(term)
    for term in losses:
        panels.append(
            (term, [f"{split}/{term}" for split in ("train", "val") if f"{split}/{term}" in numeric])
        )
    metrics = [name for name in numeric if name.startswith("metrics/")]
    metrics.sort(key=lambda name: (*_METRIC_ORDER, name[8:]).index(name[8:]))
    panels.extend((name.partition("/")[2], [name]) for name in metrics)
    rates = [name for name in numeric if name.startswith("lr/")]
    if rates:
        panels.append(("learning rate", rates))
    return panels


def plot_curves(
    run_dir_or_metrics: str | os.PathLike[str] | Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    title: str | None = None,
    ncols: int = 4,
) -> Figure:
    """A Figure with one panel per loss term (train and val), per ``metrics/*`` column (mAP50 and mAP50-95
    first) and one for the learning rate of every parameter group, against ``epoch``; titled by the run
    directory's name (or ``title``). Raises ValueError when there is nothing to plot."""
    columns = load_metrics(run_dir_or_metrics)
    if title is None and isinstance(run_dir_or_metrics, str | os.PathLike):
        path = Path(run_dir_or_metrics)
        title = (path if path.is_dir() else path.parent).resolve().name
    panels = curve_panels(columns)
    if not panels:
        raise ValueError(
            f"metrics: no loss, metrics/* or lr/* column with a number to plot (columns: {sorted(columns)})"
        )
    length = max(len(values) for values in columns.values())
    epochs = columns.get("epoch")
    if epochs is None or not np.isfinite(epochs).all():
        epochs = np.arange(length, dtype=np.float64)
    ncols = max(1, min(ncols, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    figure = new_figure(3.2 * ncols, 2.6 * nrows + 0.4, layout="constrained")
    grid = figure.subplots(nrows, ncols, squeeze=False)
    for slot, axes in enumerate(grid.flat):
        if slot >= len(panels):
            axes.set_visible(False)
            continue
        panel_title, names = panels[slot]
        for name in names:
            values = columns[name]
            finite = np.isfinite(values)
            axes.plot(epochs[finite], values[finite], marker="." if finite.sum() < 30 else None, label=name)
        axes.set_title(panel_title)
        axes.set_xlabel("epoch")
        axes.grid(True, alpha=0.3)
        if len(names) > 1 or names[0].startswith(("train/", "val/")):
            axes.legend(fontsize="small")
    if title:
        figure.suptitle(title)
    return figure
