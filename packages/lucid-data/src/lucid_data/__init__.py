"""lucid-data: dataset readers, targets, augmentation, caches and synthetic shapes."""

__version__ = "0.1.0"
