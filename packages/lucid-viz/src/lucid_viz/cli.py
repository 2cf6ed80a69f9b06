"""``lucid-viz``: ``curves RUN_DIR -o curves.png``, ``predict --weights W --source IMG -o out.png`` and
``labels STATS_DIR -o labels.png`` (the ``labels.npz`` that ``lucid-data stats --output`` writes).

The command line is its own process, so it selects matplotlib's non-interactive Agg backend (the library
itself never selects one).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import numpy as np

from lucid_core.cli_errors import refuse_overwrite, run_cli
from lucid_core.tasks import TASKS
from lucid_viz.curves import plot_curves
from lucid_viz.eval_figures import LABELS_NPZ, plot_labels
from lucid_viz.figures import save_figure
from lucid_viz.grid import expand_sources, show_predictions


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lucid-viz", description="Plots of lucid-YOLO runs and predictions."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    curves = commands.add_parser("curves", help="training curves of a run directory (its metrics.csv)")
    curves.add_argument("run_dir", help="run directory holding metrics.csv, or the csv file itself")
    curves.add_argument("-o", "--output", default="curves.png", help="image to write (default: curves.png)")
    curves.add_argument("--title", default=None, help="figure title (default: the run directory's name)")
    labels = commands.add_parser("labels", help="dataset overview of a `lucid-data stats --output` folder")
    labels.add_argument("stats", help="folder holding labels.npz, or the file itself")
    labels.add_argument("-o", "--output", default=None, help="image to write (default: labels.png beside it)")
    predict = commands.add_parser("predict", help="predictions of a checkpoint drawn over images")
    predict.add_argument("--weights", required=True, help="checkpoint file")
    predict.add_argument("--source", required=True, nargs="+", help="image file(s) or a directory of images")
    predict.add_argument("-o", "--output", default="predictions.png", help="image to write")
    predict.add_argument("--task", choices=tuple(TASKS), default=None)
    predict.add_argument("--conf", type=float, default=None, help="confidence threshold passed to predict")
    predict.add_argument("--imgsz", type=int, default=None, help="inference size passed to predict")
    predict.add_argument("--ncols", type=int, default=None, help="grid columns")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    matplotlib.use("Agg")  # the command draws to files; a library import never picks the backend

    def body() -> int:
        if arguments.command == "labels":
            return _labels(arguments.stats, arguments.output)
        inputs = (
            [arguments.run_dir] if arguments.command == "curves" else [arguments.weights, *arguments.source]
        )
        refuse_overwrite("--output", arguments.output, inputs)
        if arguments.command == "curves":
            figure = plot_curves(arguments.run_dir, title=arguments.title)
        else:
            sources = [image for source in arguments.source for image in expand_sources(source)]
            extra = {
                key: getattr(arguments, key)
                for key in ("conf", "imgsz")
                if getattr(arguments, key) is not None
            }
            figure = show_predictions(
                arguments.weights, sources, task=arguments.task, ncols=arguments.ncols, **extra
            )
        print(save_figure(figure, arguments.output))
        return 0

    # ValueError: lucid-viz reports bad inputs (a run without metrics.csv, an unknown task, ...) as ValueError
    return run_cli("lucid-viz", body, extra_known=(ValueError,))


def _labels(stats: str, output: str | None) -> int:
    path = Path(stats)
    arrays = path / LABELS_NPZ if path.is_dir() else path
    if not arrays.is_file():
        raise ValueError(f"{stats}: no {LABELS_NPZ} (write it with `lucid-data stats DATA --output DIR`)")
    target = Path(output) if output else arrays.with_name("labels.png")
    refuse_overwrite("--output", target, [arrays])
    with np.load(arrays) as data:
        loaded = SimpleNamespace(**{key: data[key] for key in data.files})
    print(save_figure(plot_labels(loaded), target))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
