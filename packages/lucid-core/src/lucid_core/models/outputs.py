"""Re-export of :mod:`lucid_core.outputs` (the train-mode output types live outside ``models`` so that heads and
objectives can import them without importing the registry)."""

from lucid_core.outputs import BranchOutput, TrainOutput

__all__ = ["BranchOutput", "TrainOutput"]
