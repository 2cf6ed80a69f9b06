"""Opt-in RAM cache of decoded uint8 images (`cache="ram"`).

The cache holds the images exactly as the dataset's load step returns them (training: long side resized to
imgsz; evaluation: the original decode), so cached and uncached pipelines produce identical samples. Before
decoding anything it estimates the bytes needed (h·w·3 per image, from the header sizes) and refuses with the
numbers when they exceed `max_fraction` of MemAvailable in /proc/meminfo (Linux `proc(5)`). The dataset fills it
eagerly in the main process so DataLoader workers share it copy-on-write after fork.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["CacheTooLargeError", "RamImageCache", "available_memory_bytes", "estimate_cache_bytes"]

DEFAULT_MAX_FRACTION = 0.7


class CacheTooLargeError(MemoryError):
    """The requested RAM cache would not fit in the available memory."""


def available_memory_bytes(meminfo: str | Path = "/proc/meminfo") -> int:
    """MemAvailable from /proc/meminfo in bytes (falls back to MemFree); raises OSError if unreadable."""
    values: dict[str, int] = {}
    for line in Path(meminfo).read_text().splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            values[key.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1].lower() == "kb" else 1)
    for key in ("MemAvailable", "MemFree"):
        if key in values:
            return values[key]
    raise OSError(f"{meminfo}: no MemAvailable/MemFree line")


def estimate_cache_bytes(sizes_hw: Sequence[tuple[int, int]], channels: int = 3) -> int:
    """Bytes of uint8 images of the given (h, w) sizes."""
    return int(sum(int(h) * int(w) * channels for h, w in sizes_hw))


def _format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


class RamImageCache:
    """Index → decoded uint8 image, filled once by `fill(load)` after the size check."""

    def __init__(
        self,
        sizes_hw: Sequence[tuple[int, int]],
        *,
        max_fraction: float = DEFAULT_MAX_FRACTION,
        available_bytes: int | None = None,
    ) -> None:
        self.needed_bytes = estimate_cache_bytes(sizes_hw)
        available = available_memory_bytes() if available_bytes is None else int(available_bytes)
        self.available_bytes = available
        if self.needed_bytes > max_fraction * available:
            raise CacheTooLargeError(
                f'cache="ram" refused: {len(sizes_hw)} images need {_format_bytes(self.needed_bytes)} '
                f"({self.needed_bytes} bytes) but only {_format_bytes(available)} ({available} bytes) are available "
                f"(MemAvailable, /proc/meminfo; limit {max_fraction:.0%} of it). Use cache=None or a smaller imgsz."
            )
        self._images: dict[int, np.ndarray] = {}

    def put(self, index: int, image: np.ndarray) -> None:
        """Store the decoded image of `index` (read-only afterwards)."""
        image.setflags(write=False)
        self._images[int(index)] = image

    def get(self, index: int) -> np.ndarray | None:
        return self._images.get(index)

    def __contains__(self, index: object) -> bool:
        return index in self._images

    def __len__(self) -> int:
        return len(self._images)

    @property
    def stored_bytes(self) -> int:
        return int(sum(im.nbytes for im in self._images.values()))
