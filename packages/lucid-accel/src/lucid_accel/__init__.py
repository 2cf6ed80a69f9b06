"""lucid-accel: opt-in GPU acceleration (graph replay, Triton kernels) with native fallbacks."""

__version__ = "0.1.0"
