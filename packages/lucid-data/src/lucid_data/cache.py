"""Opt-in RAM cache of decoded uint8 images (`cache="ram"`) and the per-process buffer of recent decodes.

The cache holds the images exactly as the dataset's load step returns them, so cached and uncached pipelines
produce identical samples. Before decoding anything it estimates the bytes needed (h·w·3 per image, from the header
sizes), prints that RAM bill, and refuses with the numbers when it exceeds `max_fraction` of MemAvailable in
/proc/meminfo (Linux `proc(5)`). The pixels live in one contiguous uint8 arena filled in the main process and every
cached image is a read-only view into it, so forked DataLoader workers share its pages copy-on-write; under
``spawn`` each worker gets a pickled copy (docs/DATA.md, "The dataset, collate and the RAM cache").
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "DEFAULT_DECODE_BUFFER_MIB",
    "CacheTooLargeError",
    "RamImageCache",
    "RecentDecodes",
    "available_memory_bytes",
    "estimate_cache_bytes",
]

DEFAULT_MAX_FRACTION = 0.7
DEFAULT_DECODE_BUFFER_MIB = 128


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
    """Index → decoded uint8 image, filled once by the dataset after the size check (see module docstring).

    Args:
        sizes_hw: (h, w) of every image to be cached (from the headers, after the load step's resize).
        max_fraction: refuse when the bill exceeds this fraction of the available memory (0 < f ≤ 1).
        available_bytes: the available memory (default: MemAvailable of /proc/meminfo).
        report: print the RAM bill to stderr before anything is decoded (the dataset's default).
    """

    def __init__(
        self,
        sizes_hw: Sequence[tuple[int, int]],
        *,
        max_fraction: float = DEFAULT_MAX_FRACTION,
        available_bytes: int | None = None,
        report: bool = False,
    ) -> None:
        if not 0.0 < float(max_fraction) <= 1.0:
            raise ValueError(
                f"cache max_fraction must be in (0, 1] (a fraction of the available memory), got {max_fraction!r}"
            )
        self.needed_bytes = estimate_cache_bytes(sizes_hw)
        available = available_memory_bytes() if available_bytes is None else int(available_bytes)
        self.available_bytes = available
        self.max_fraction = float(max_fraction)
        if report:
            print(
                f'lucid-data: cache="ram" will hold {len(sizes_hw)} decoded images in '
                f"{_format_bytes(self.needed_bytes)} of {_format_bytes(available)} available "
                f"(limit {max_fraction:.0%}), shared copy-on-write by the DataLoader workers",
                file=sys.stderr,
            )
        if self.needed_bytes > max_fraction * available:
            raise CacheTooLargeError(
                f'cache="ram" refused: {len(sizes_hw)} images need {_format_bytes(self.needed_bytes)} '
                f"({self.needed_bytes} bytes) but only {_format_bytes(available)} ({available} bytes) are available "
                f"(MemAvailable, /proc/meminfo; limit {max_fraction:.0%} of it). Use cache=None, a smaller imgsz "
                "or a larger cache_max_fraction."
            )
        self._arena = np.empty(self.needed_bytes, dtype=np.uint8)
        self._used = 0
        self._images: dict[int, np.ndarray] = {}

    def put(self, index: int, image: np.ndarray) -> None:
        """Store the decoded image of `index` (copied into the arena; read-only afterwards)."""
        image = np.asarray(image)
        end = self._used + image.nbytes
        if image.dtype == np.uint8 and end <= self._arena.nbytes:
            slot = self._arena[self._used : end].reshape(image.shape)
            slot[...] = image
            self._used = end
            image = slot
        # else (a decode larger than its header said, or not uint8): kept as its own array
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

    @property
    def arena(self) -> np.ndarray:
        """The shared pixel buffer (read-only view) every arena-held image is a view of."""
        view = self._arena.view()
        view.setflags(write=False)
        return view


class RecentDecodes:
    """The most recently decoded images of one process, bounded in bytes (the uncached path's reuse).

    Keeps the last decodes, least recently used out first, exactly as the load step returned them (read-only
    afterwards), so an image drawn again while it is still here is not decoded twice and a sample is the same bytes
    either way. Filled lazily in each loader process separately: the bill is ``max_bytes`` (the dataset's
    ``decode_buffer_mib``) per process. A pickled copy starts empty.

    Args:
        max_bytes: the most pixel bytes held at once; an image larger than that alone is not kept. 0 = off.
    """

    def __init__(self, max_bytes: int) -> None:
        if int(max_bytes) < 0:
            raise ValueError(f"decode buffer size must be >= 0 bytes, got {max_bytes!r}")
        self.max_bytes = int(max_bytes)
        self._images: OrderedDict[int, np.ndarray] = OrderedDict()
        self._bytes = 0
        #: decodes answered from the buffer / stored (for the benchmark and the tests)
        self.hits = 0
        self.misses = 0

    def __getstate__(self) -> dict[str, object]:
        """Pickled (a ``spawn`` worker's copy of the dataset) empty: each process fills its own."""
        state = dict(self.__dict__)
        state.update(_images=OrderedDict(), _bytes=0, hits=0, misses=0)
        return state

    def get(self, index: int) -> np.ndarray | None:
        image = self._images.get(index)
        if image is None:
            self.misses += 1
            return None
        self._images.move_to_end(index)
        self.hits += 1
        return image

    def put(self, index: int, image: np.ndarray) -> None:
        """Keep `image` (made read-only) as the newest entry, dropping the oldest ones beyond the bound."""
        if image.nbytes > self.max_bytes:
            return
        old = self._images.pop(index, None)
        if old is not None:
            self._bytes -= old.nbytes
        image.setflags(write=False)
        self._images[index] = image
        self._bytes += image.nbytes
        while self._bytes > self.max_bytes:
            _, evicted = self._images.popitem(last=False)
            self._bytes -= evicted.nbytes

    def __len__(self) -> int:
        return len(self._images)

    def __contains__(self, index: object) -> bool:
        return index in self._images

    @property
    def stored_bytes(self) -> int:
        return self._bytes
