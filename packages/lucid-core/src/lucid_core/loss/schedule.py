"""YOLO26 one-to-many / one-to-one branch weights across epochs.

Rule from ``shared/fixtures/README.md`` ("YOLO26 end-to-end combination"): o2m starts at 0.8 and
o2o = max(1 − o2m, 0); after n updates o2m = max(1 − n / max(epochs − 1, 1), 0) · (0.8 − 0.1) + 0.1, all in
float64 (Python floats). The trainer updates once at the end of every epoch, so epoch e trains with the weights
after e updates; on resume the stored ``updates`` is restored.
"""

from __future__ import annotations

from collections.abc import Mapping


class BranchWeightSchedule:
    """Linear o2m decay from ``o2m_init`` to ``o2m_final``, stepped once per epoch."""

    def __init__(self, epochs: int, o2m_init: float = 0.8, o2m_final: float = 0.1, updates: int = 0) -> None:
        if epochs < 1:
            raise ValueError(f"BranchWeightSchedule: epochs must be >= 1, got {epochs}")
        self.epochs = int(epochs)
        self.o2m_init = float(o2m_init)
        self.o2m_final = float(o2m_final)
        self.updates = 0
        self.o2m = self.o2m_init
        self.o2o = max(1.0 - self.o2m, 0.0)
        self.set_updates(updates)

    def weights_after(self, updates: int) -> tuple[float, float]:
        """(o2m, o2o) after ``updates`` schedule updates."""
        if updates == 0:
            o2m = self.o2m_init
        else:
            o2m = (
                max(1 - updates / max(self.epochs - 1, 1), 0) * (self.o2m_init - self.o2m_final)
                + self.o2m_final
            )
        return o2m, max(1 - o2m, 0.0)

    def set_updates(self, updates: int) -> None:
        if updates < 0:
            raise ValueError(f"BranchWeightSchedule: updates must be >= 0, got {updates}")
        self.updates = int(updates)
        self.o2m, self.o2o = self.weights_after(self.updates)

    def step(self) -> None:
        """One update (end of an epoch)."""
        self.set_updates(self.updates + 1)

    def state_dict(self) -> dict[str, float | int]:
        return {
            "updates": self.updates,
            "epochs": self.epochs,
            "o2m_init": self.o2m_init,
            "o2m_final": self.o2m_final,
        }

    def load_state_dict(self, state: Mapping[str, float | int]) -> None:
        missing = {"updates"} - set(state)
        if missing:
            raise KeyError(
                f"BranchWeightSchedule.load_state_dict: missing {sorted(missing)} in {sorted(state)}"
            )
        # ``epochs`` stays this run's value: a resumed run may be configured to train for more epochs.
        self.o2m_init = float(state.get("o2m_init", self.o2m_init))
        self.o2m_final = float(state.get("o2m_final", self.o2m_final))
        self.set_updates(int(state["updates"]))
