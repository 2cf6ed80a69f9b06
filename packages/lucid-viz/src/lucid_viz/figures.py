"""Figures without pyplot: creation on an Agg canvas, rasterising to an array, atomic saving.

Every figure lucid-viz makes is a ``matplotlib.figure.Figure`` bound to a ``FigureCanvasAgg`` directly (the
pattern of matplotlib's "Embedding in a web application server" example), so drawing never selects a backend,
never registers a figure with pyplot's figure manager and never closes a figure of the caller's.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from lucid_core.atomic import atomic_path

DEFAULT_DPI = 100


def new_figure(width_in: float, height_in: float, dpi: float = DEFAULT_DPI, **kwargs: object) -> Figure:
    """A Figure of the given size (inches) on its own Agg canvas; ``kwargs`` go to ``Figure``."""
    figure = Figure(figsize=(width_in, height_in), dpi=dpi, **kwargs)  # type: ignore[arg-type]
    FigureCanvasAgg(figure)
    return figure


def _agg_canvas(figure: Figure) -> FigureCanvasAgg:
    canvas = figure.canvas
    if not isinstance(canvas, FigureCanvasAgg):
        canvas = FigureCanvasAgg(figure)
    return canvas


def render_rgb(figure: Figure) -> np.ndarray:
    """Rasterise ``figure`` at its own dpi; returns a (H, W, 3) uint8 RGB array (a copy)."""
    canvas = _agg_canvas(figure)
    canvas.draw()  # type: ignore[no-untyped-call]
    rgba = np.asarray(canvas.buffer_rgba())  # type: ignore[no-untyped-call]
    return rgba[..., :3].copy()


def save_figure(figure: Figure, path: str | os.PathLike[str], *, compress_level: int | None = None) -> Path:
    """Write ``figure`` to ``path`` atomically (temp file in the same folder, then ``os.replace``).

    The format comes from the suffix (``.png``, ``.jpg``, ``.pdf``, ``.svg``); the figure's own dpi is used so a
    figure made by ``draw_predictions`` is written at the image's native pixel size. ``compress_level`` (PNG
    only): zlib level 0-9 (``None``: PIL's default, 6); 1 writes several times faster.
    """
    target = Path(path)
    file_format = target.suffix.lstrip(".").lower()
    if not file_format:
        raise ValueError(f"{target}: cannot tell the image format, give the file a suffix such as .png")
    target.parent.mkdir(parents=True, exist_ok=True)
    _agg_canvas(figure)
    png_options = {"compress_level": int(compress_level)} if compress_level is not None else None
    pil_kwargs = png_options if file_format == "png" else None
    with atomic_path(target) as tmp, tmp.open("wb") as stream:
        if pil_kwargs is None:
            figure.savefig(stream, format=file_format, dpi=figure.dpi)
        else:
            figure.savefig(stream, format=file_format, dpi=figure.dpi, pil_kwargs=pil_kwargs)
    return target
