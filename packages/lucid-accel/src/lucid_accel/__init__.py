"""lucid-accel: opt-in GPU fast paths for lucid-YOLO training, each byte-identical to the native path it replaces
and each with a native fallback taken with one warning where it does not apply.

``AccelConfig`` holds the flags (``capture_network``, ``capture_orthogonalization``, ``capture_updates``,
``fused_assignment``; all off by default); ``AccelSession`` is the hook object a trainer attaches. Importing this
package needs neither CUDA nor Triton (the Triton kernels load on first use).
"""

from __future__ import annotations

from lucid_accel.capabilities import Capabilities, capabilities, require_triton
from lucid_accel.config import AccelConfig
from lucid_accel.notices import AccelFallbackWarning, FallbackNotices
from lucid_accel.session import AccelSession

__version__ = "0.1.0"

__all__ = [
    "AccelConfig",
    "AccelFallbackWarning",
    "AccelSession",
    "Capabilities",
    "FallbackNotices",
    "__version__",
    "capabilities",
    "require_triton",
]
