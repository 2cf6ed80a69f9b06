"""lucid-viz: training curves and prediction/ground-truth overlays.

Importing this package selects no matplotlib backend and never touches pyplot: figures are
``matplotlib.figure.Figure`` objects on their own Agg canvas (see :mod:`lucid_viz.figures`).
"""

from lucid_viz.colors import PALETTE, class_color, class_color_uint8
from lucid_viz.curves import load_metrics, plot_curves
from lucid_viz.draw import (
    COCO_SKELETON,
    RenderOptions,
    draw_ground_truth,
    draw_predictions,
    overlay_predictions,
)
from lucid_viz.figures import render_rgb, save_figure
from lucid_viz.geometry import rboxes_to_corners
from lucid_viz.grid import draw_grid, show_predictions

__version__ = "0.1.0"

__all__ = [
    "COCO_SKELETON",
    "PALETTE",
    "RenderOptions",
    "__version__",
    "class_color",
    "class_color_uint8",
    "draw_grid",
    "draw_ground_truth",
    "draw_predictions",
    "load_metrics",
    "overlay_predictions",
    "plot_curves",
    "rboxes_to_corners",
    "render_rgb",
    "save_figure",
    "show_predictions",
]
