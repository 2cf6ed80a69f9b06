"""Error types shared by modules that must not import each other."""

from __future__ import annotations

__all__ = ["CheckpointImportError"]


class CheckpointImportError(ValueError):
    """A reference checkpoint cannot be imported (unreadable, unknown layout, inconsistent metadata)."""
