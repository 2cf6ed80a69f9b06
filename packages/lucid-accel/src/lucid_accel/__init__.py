"""lucid-accel: opt-in GPU acceleration for lucid-YOLO (CUDA-graph replay, Triton kernels), always with a native
fallback. This release ships the capability probe and the guarded Triton import; the fast paths themselves land
with the acceleration milestone, each byte-identical to the native lucid-core path it replaces.
"""

from __future__ import annotations

from lucid_accel.capabilities import Capabilities, capabilities, require_triton

__version__ = "0.1.0"

__all__ = ["Capabilities", "__version__", "capabilities", "require_triton"]
