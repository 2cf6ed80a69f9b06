"""lucid-viz: training curves and prediction/ground-truth overlays."""

__version__ = "0.1.0"
