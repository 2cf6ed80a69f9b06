"""Error types of the exporters (the message names the flag, file or extra to install)."""

from __future__ import annotations

__all__ = ["ExportInputError", "MissingRuntimeError"]


class ExportInputError(ValueError):
    """The weights or an argument of an export cannot be used (the message names it)."""


class MissingRuntimeError(ExportInputError):
    """An optional runtime or converter is not installed; the message names the extra that installs it."""


def missing(module: str, extra: str, what: str) -> MissingRuntimeError:
    """The one-line error for ``module`` missing: ``<what> needs <module>: pip install "lucid-core[<extra>]"``."""
    return MissingRuntimeError(
        f'{what} needs {module}, which is not installed: pip install "lucid-core[{extra}]"'
    )
