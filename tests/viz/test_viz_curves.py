"""Training curves from metrics.csv / dicts: panels, data, titles, tolerance to missing columns, clear errors."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from lucid_viz import load_metrics, plot_curves, render_rgb, save_figure
from lucid_viz.curves import curve_panels

EPOCHS = 6


def metric_rows() -> list[dict[str, float]]:
    return [
        {
            "epoch": epoch,
            "train/box_loss": 2.0 / (epoch + 1),
            "train/cls_loss": 3.0 / (epoch + 1),
            "train/dfl_loss": 1.5 / (epoch + 1),
            "val/box_loss": 2.2 / (epoch + 1),
            "val/cls_loss": 3.1 / (epoch + 1),
            "val/dfl_loss": 1.6 / (epoch + 1),
            "metrics/mAP50-95": 0.05 * epoch,
            "metrics/mAP50": 0.1 * epoch,
            "lr/pg0": 0.01 * (1 - epoch / 10),
            "lr/pg1": 0.01 * (1 - epoch / 10),
            "lr/pg2": 0.1 * (1 - epoch / 10),
            "epoch_seconds": 12.5,
        }
        for epoch in range(1, EPOCHS + 1)
    ]


def write_csv(path: Path, rows: list[dict[str, float]]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    with (path / "metrics.csv").open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def panel_titles(figure) -> list[str]:
    return [axes.get_title() for axes in figure.axes if axes.get_visible()]


def test_one_panel_per_loss_term_metric_and_learning_rate(tmp_path: Path) -> None:
    run_dir = write_csv(tmp_path / "exp7", metric_rows())
    figure = plot_curves(run_dir)
    assert panel_titles(figure) == ["box_loss", "cls_loss", "dfl_loss", "mAP50", "mAP50-95", "learning rate"]
    assert figure.get_suptitle() == "exp7"
    by_title = {axes.get_title(): axes for axes in figure.axes}
    box = by_title["box_loss"]
    assert [line.get_label() for line in box.get_lines()] == ["train/box_loss", "val/box_loss"]
    rows = metric_rows()
    np.testing.assert_allclose(box.get_lines()[1].get_ydata(), [row["val/box_loss"] for row in rows])
    np.testing.assert_allclose(box.get_lines()[1].get_xdata(), [row["epoch"] for row in rows])
    assert [line.get_label() for line in by_title["learning rate"].get_lines()] == [
        "lr/pg0",
        "lr/pg1",
        "lr/pg2",
    ]
    pixels = render_rgb(figure)
    assert (pixels < 128).any() and pixels.std() > 10, "something was drawn"


def test_list_of_dicts_and_dict_of_lists_give_the_same_panels(tmp_path: Path) -> None:
    rows = metric_rows()
    columns = {name: [row[name] for row in rows] for name in rows[0]}
    assert curve_panels(load_metrics(rows)) == curve_panels(load_metrics(columns))
    from_csv = load_metrics(write_csv(tmp_path / "run", rows))
    for name, values in load_metrics(columns).items():
        np.testing.assert_allclose(from_csv[name], values)
    figure = plot_curves(rows, title="in memory")
    assert figure.get_suptitle() == "in memory"


def test_missing_columns_skip_their_panels(tmp_path: Path) -> None:
    rows = [
        {"epoch": r["epoch"], "train/box_loss": r["train/box_loss"], "lr/pg0": r["lr/pg0"]}
        for r in metric_rows()
    ]
    assert panel_titles(plot_curves(rows)) == ["box_loss", "learning rate"]
    # a metric present only from some epoch on (validation every other epoch): NaNs are skipped, not plotted
    sparse = metric_rows()
    for row in sparse[::2]:
        row["metrics/mAP50"] = ""  # type: ignore[assignment]
    figure = plot_curves(write_csv(tmp_path / "sparse", sparse))
    (map50,) = [axes for axes in figure.axes if axes.get_title() == "mAP50"]
    assert len(map50.get_lines()[0].get_xdata()) == EPOCHS // 2
    empty_metric = [{**row, "metrics/mAP50": ""} for row in metric_rows()]
    assert "mAP50" not in panel_titles(plot_curves(empty_metric))


def test_header_whitespace_and_missing_epoch_are_tolerated(tmp_path: Path) -> None:
    run_dir = tmp_path / "padded"
    run_dir.mkdir()
    (run_dir / "metrics.csv").write_text("  train/box_loss ,  val/box_loss\n 1.0, 1.5\n0.5,0.7\n\n")
    figure = plot_curves(run_dir / "metrics.csv")
    (axes,) = [a for a in figure.axes if a.get_visible()]
    np.testing.assert_allclose(axes.get_lines()[0].get_xdata(), [0, 1])
    assert figure.get_suptitle() == "padded"


def test_nothing_to_plot_or_no_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"metrics\.csv"):
        plot_curves(tmp_path / "missing")
    with pytest.raises(ValueError, match="no loss"):
        plot_curves([{"epoch": 1, "epoch_seconds": 3.0}])
    with pytest.raises(ValueError, match="different lengths"):
        plot_curves({"train/box_loss": [1.0, 2.0], "epoch": [1]})
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metrics.csv").write_text("epoch,train/box_loss\n1,2,3\n")
    with pytest.raises(ValueError, match=r"metrics\.csv:2"):
        plot_curves(bad)


def test_curves_png_is_written_atomically(tmp_path: Path) -> None:
    run_dir = write_csv(tmp_path / "run", metric_rows())
    out = save_figure(plot_curves(run_dir), run_dir / "curves.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in run_dir.iterdir() if p.name.startswith(".")] == [], "no temp file left behind"
    with pytest.raises(ValueError, match="suffix"):
        save_figure(plot_curves(run_dir), run_dir / "curves")
