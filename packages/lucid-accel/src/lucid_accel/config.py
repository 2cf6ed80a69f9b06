"""The opt-in acceleration flags: every one defaults to off and has a native fallback.

This module imports nothing beyond the standard library, so a trainer can build its ``--accel.*`` flag group from
:class:`AccelConfig` without importing torch-level machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass
class AccelConfig:
    """Which fast paths to try; each falls back to the native path (with one warning) where it does not apply.

    Args:
        capture_network: replay the network's forward + backward as a CUDA graph (re-recorded when the input
            signature changes); targets, assignment, loss, optimizer and EMA stay eager.
        capture_orthogonalization: replay MuSGD's batched Newton–Schulz iterations on owned buffers.
        capture_updates: replay MuSGD's update preparation and momentum per group (the learning rate and the
            parameter write stay outside the graph).
        fused_assignment: Triton kernels for the task-aligned assigner's candidate test, alignment metric and
            conflict resolution (top-k and target building stay native).
    """

    capture_network: bool = False
    capture_orthogonalization: bool = False
    capture_updates: bool = False
    fused_assignment: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, bool):
                raise TypeError(f"accel.{f.name}: expected true or false, got {value!r}")

    @classmethod
    def from_value(cls, value: AccelConfig | dict[str, Any] | None) -> AccelConfig:
        """An :class:`AccelConfig` from itself, a mapping of flag → bool (unknown keys are an error), or None."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise ValueError(f"accel: unknown flag(s) {unknown}; expected some of {sorted(known)}")
            return cls(**value)
        raise TypeError(f"accel: expected AccelConfig or a mapping, got {type(value).__name__}")

    @property
    def enabled(self) -> tuple[str, ...]:
        """Names of the flags that are on."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name))
