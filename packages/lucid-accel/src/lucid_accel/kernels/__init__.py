"""Triton kernels (optional ``[cuda]`` extra); the launch wrappers import Triton only when first called."""
