"""Class colours: a fixed palette indexed by the class index only.

A colour depends on nothing but the class index (never on the image, the score or the order of detections), so
the same class looks the same in every image of a grid and in every run. The palette is a hand-picked list of
20 saturated, mutually distinct colours (no greys, so they stand out on photographs and on the grey letterbox
padding, value 114); class ``c`` gets ``PALETTE[c % 20]``.
"""

from __future__ import annotations

RGB = tuple[float, float, float]

_PALETTE_HEX: tuple[str, ...] = (
    "#ff3838",  # red
    "#2c99a8",  # teal
    "#ff9d1f",  # orange
    "#1f5cff",  # blue
    "#48f90a",  # green
    "#cb38ff",  # violet
    "#ffd21f",  # yellow
    "#00c2ff",  # sky
    "#ff37c7",  # magenta
    "#1a9334",  # dark green
    "#8438ff",  # purple
    "#00d4bb",  # aqua
    "#ff7060",  # salmon
    "#3d2fb0",  # indigo
    "#b7e000",  # lime
    "#a52a6e",  # plum
    "#ff8000",  # deep orange
    "#0071a8",  # ocean
    "#6ee07b",  # mint
    "#c46a00",  # brown
)


def _hex_to_rgb(code: str) -> RGB:
    return (int(code[1:3], 16) / 255.0, int(code[3:5], 16) / 255.0, int(code[5:7], 16) / 255.0)


PALETTE: tuple[RGB, ...] = tuple(_hex_to_rgb(code) for code in _PALETTE_HEX)


def class_color(class_index: int) -> RGB:
    """RGB colour in [0, 1] of class ``class_index`` (``PALETTE[class_index % len(PALETTE)]``)."""
    index = int(class_index)
    if index < 0:
        raise ValueError(f"class index must be >= 0, got {index}")
    return PALETTE[index % len(PALETTE)]


def class_color_uint8(class_index: int) -> tuple[int, int, int]:
    """The colour of :func:`class_color` as 0..255 integers (what a rendered PNG holds)."""
    r, g, b = class_color(class_index)
    return (round(r * 255), round(g * 255), round(b * 255))
