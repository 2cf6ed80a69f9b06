"""lucid-core: YOLO geometry, blocks, model registry, heads, assigners, losses, decoders, optimizer math, checkpoints and predict."""

__version__ = "0.1.0"
