"""The hook object a trainer attaches: one :class:`AccelSession` per training run.

lucid-accel does not depend on Lightning; lucid-train builds a session from its ``--accel.*`` flags at fit start
and calls :meth:`AccelSession.attach` (network, optimizer, objective) and :meth:`AccelSession.forward` in its
training step. With every flag off nothing is installed and :meth:`forward` is ``model(images)``.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from lucid_accel.assign import fuse_assigners
from lucid_accel.config import AccelConfig
from lucid_accel.graph_network import CapturedNetwork
from lucid_accel.graph_optim import MuSGDReplay, attach_musgd_replay
from lucid_accel.notices import FallbackNotices


class AccelSession:
    """Installs the requested fast paths; every fallback warns once per session (per flag)."""

    def __init__(self, config: AccelConfig | dict[str, Any] | None = None) -> None:
        self.config = AccelConfig.from_value(config)
        self.notices = FallbackNotices()
        self.network: CapturedNetwork | None = None
        self.optimizer_replay: MuSGDReplay | None = None
        self.fused_assigners = 0

    @property
    def enabled(self) -> bool:
        return bool(self.config.enabled)

    def attach(self, model: nn.Module, optimizer: Any = None, criterion: Any = None) -> AccelSession:
        """Install the fast paths of the enabled flags on ``model``, the raw ``optimizer`` and ``criterion``."""
        cfg = self.config
        if cfg.capture_network:
            self.network = CapturedNetwork(model, self.notices)
        if cfg.capture_orthogonalization or cfg.capture_updates:
            if optimizer is None:
                self.notices.fallback("capture_updates", "no optimizer was attached")
            else:
                self.optimizer_replay = attach_musgd_replay(
                    optimizer,
                    self.notices,
                    orthogonalization=cfg.capture_orthogonalization,
                    updates=cfg.capture_updates,
                )
        if cfg.fused_assignment:
            self.fused_assigners = fuse_assigners(criterion, self.notices) if criterion is not None else 0
            if not self.fused_assigners:
                self.notices.fallback("fused_assignment", "the objective has no task-aligned assigner")
        return self

    def forward(self, model: nn.Module, images: Tensor) -> Any:
        """The training forward: through the recorded graphs for the attached model, else ``model(images)``."""
        if self.network is not None and self.network.model is model:
            return self.network(images)
        return model(images)

    def detach(self) -> None:
        """Remove what :meth:`attach` installed on the optimizer (the model and objective keep working natively
        once the session is dropped; the fused assigners stay, they fall back by themselves)."""
        if self.optimizer_replay is not None:
            self.optimizer_replay.detach()
            self.optimizer_replay = None
        self.network = None
