"""``--accel.*``: lucid-accel's opt-in GPU fast paths in a training run.

:class:`AccelFlags` is the flag group of ``lucid-train`` (``--accel.capture_network true`` ...), linked into the
module's ``accel`` argument as a plain mapping; it mirrors ``lucid_accel.AccelConfig`` field for field (tested) so
the flags exist even where the optional ``lucid-accel`` (the ``lucid-train[cuda]`` extra) is not installed. With
every flag off (the default) nothing of lucid-accel is imported. With any flag on, :func:`attach_accel` builds a
``lucid_accel.AccelSession`` at fit start and attaches it to the model, the optimizer and the objective; each fast
path falls back to the native path with one warning where it does not apply (CPU, unsupported shape/dtype, ...).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from torch import Tensor

from lucid_train.errors import TrainingSetupError

ACCEL_EXTRA_HINT = "pip install 'lucid-train[cuda]' (installs lucid-accel and triton)"


@dataclass
class AccelFlags:
    """Opt-in fast paths (all off by default; see lucid-accel's README).

    Args:
        capture_network: replay the network's forward + backward as CUDA graphs.
        capture_orthogonalization: replay MuSGD's batched Newton–Schulz as a CUDA graph.
        capture_updates: replay MuSGD's update preparation and momentum per group as CUDA graphs.
        fused_assignment: Triton kernels for the task-aligned assigner's dense stages.
    """

    capture_network: bool = False
    capture_orthogonalization: bool = False
    capture_updates: bool = False
    fused_assignment: bool = False


def accel_flags(value: AccelFlags | dict[str, Any] | None) -> dict[str, bool]:
    """The module's ``accel`` argument as a plain ``{flag: bool}`` mapping (unknown keys are an error)."""
    if value is None:
        return asdict(AccelFlags())
    if isinstance(value, AccelFlags):
        return asdict(value)
    if isinstance(value, dict):
        known = set(asdict(AccelFlags()))
        unknown = sorted(set(value) - known)
        if unknown:
            raise TrainingSetupError(
                f"model.accel: unknown flag(s) {unknown}; expected some of {sorted(known)} (--accel.<flag> true)."
            )
        return asdict(AccelFlags(**value))
    raise TrainingSetupError(f"model.accel: expected a mapping of flag to true/false, got {value!r}")


def attach_accel(module: Any, flags: dict[str, bool]) -> Any:
    """An attached ``lucid_accel.AccelSession`` for the module's model/optimizer/objective, or None when every
    flag is off."""
    if not any(flags.values()):
        return None
    try:
        from lucid_accel import AccelSession  # the lucid-train[cuda] extra
    except ImportError as exc:
        enabled = sorted(k for k, v in flags.items() if v)
        raise TrainingSetupError(
            f"--accel: {enabled} need the optional lucid-accel package, which is not installed; {ACCEL_EXTRA_HINT}, "
            "or drop the --accel.* flags (the native path gives identical results)."
        ) from exc
    optimizers = list(getattr(module.trainer, "optimizers", []) or [])
    return AccelSession(flags).attach(
        module.model, optimizer=optimizers[0] if optimizers else None, criterion=module.criterion
    )


def train_forward(module: Any, images: Tensor) -> Any:
    """The training forward of ``module.model``: through the attached session (``module._accel``) if any."""
    session = getattr(module, "_accel", None)
    return module.model(images) if session is None else session.forward(module.model, images)
