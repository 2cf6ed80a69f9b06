"""lucid-train: Lightning training, evaluation and the lucid-train / lucid-eval CLIs."""

__version__ = "0.1.0"
