"""Error types shared by modules that must not import each other."""

from __future__ import annotations

import pickle

__all__ = ["CheckpointError", "CheckpointImportError", "RefusedGlobalError"]


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, or does not match the model its config describes."""


class CheckpointImportError(ValueError):
    """A reference checkpoint cannot be imported (unreadable, unknown layout, inconsistent metadata)."""


class RefusedGlobalError(pickle.UnpicklingError):
    """The pickle names a global outside the allowlist (the message names it as ``module.name``)."""

    def __init__(
        self, qualified_name: str, reason: str = "not on the allowlist", source: str | None = None
    ) -> None:
        self.qualified_name = qualified_name
        self.reason = reason
        where = f"{source}: " if source else ""
        super().__init__(
            f"{where}refused global {qualified_name!r} in pickle ({reason}); nothing was executed"
        )
