"""One warning per fast path when it falls back to the native path."""

from __future__ import annotations

import warnings

import torch


class AccelFallbackWarning(UserWarning):
    """A requested fast path is not taken; the native path runs instead (results are unchanged)."""


class FallbackNotices:
    """Remembers which paths already warned, so each path warns at most once per owner (e.g. per training run)."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}

    def fallback(self, path: str, reason: str) -> None:
        """Record that ``path`` runs natively because of ``reason``; warn the first time only."""
        if path in self.reasons:
            return
        self.reasons[path] = reason
        warnings.warn(
            f"lucid-accel: {path} is not applied ({reason}); using the native path (identical results).",
            AccelFallbackWarning,
            stacklevel=3,
        )

    def warned(self, path: str) -> bool:
        return path in self.reasons


def tracing() -> bool:
    """True inside ``torch.compile`` / ``torch.jit.trace``: fast paths with side buffers do not apply there."""
    is_tracing = getattr(torch.jit, "is_tracing", None)
    return bool(torch.compiler.is_compiling() or (is_tracing is not None and is_tracing()))
