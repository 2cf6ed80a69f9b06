"""Per-task loss terms on the task seam: ``segment``, ``pose``, ``obb`` (each only what the task adds)."""
