"""RealNVP normalising flow over 2-D residuals, as used by Residual Log-likelihood Estimation.

Li et al. 2021, "Human Pose Regression with Residual Log-likelihood Estimation" (RLE), and Dinh et al. 2017,
"Density estimation using Real NVP": 6 affine coupling layers with alternating masks [0, 1] / [1, 0]; each has a
scale net ``Linear(2,64)-SiLU-Linear(64,64)-SiLU-Linear(64,2)-Tanh`` and a translation net of the same
shape without the Tanh (53,784 parameters, = ``params_flow_model`` in shared/fixtures/model_params.json).
The prior is a standard 2-D normal. Used only by the pose RLE loss; never run by the model's forward. SiLU and the
inverse-pass op order follow shared/fixtures/README.md ("pose_loss_*.pt", step 8 "Flow log-density"), which the
fixture's stored ``flow_state`` reproduces (tests/core/test_core_loss_pose.py).

Initialisation: every linear weight is Xavier-uniform with gain 0.01 (near zero, so the untrained flow is close to
the identity and the RLE density starts as the prior); biases keep PyTorch's default. Measured black box: the
reference's yolo26n-pose weights after an epoch at lr 0 lie in exactly ±0.01·sqrt(6 / (fan_in + fan_out))
(docs/TRAINING.md, "Initialisation, checked black box").
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def _coupling_net(hidden: int, final_tanh: bool) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Linear(2, hidden),
        nn.SiLU(),
        nn.Linear(hidden, hidden),
        nn.SiLU(),
        nn.Linear(hidden, 2),
    ]
    if final_tanh:
        layers.append(nn.Tanh())
    return nn.Sequential(*layers)


class RealNVP(nn.Module):
    """2-D RealNVP; :meth:`log_prob` gives ``log p(x)`` under the flow (prior N(0, I))."""

    mask: Tensor
    loc: Tensor
    cov: Tensor

    def __init__(self, num_layers: int = 6, hidden: int = 64) -> None:
        super().__init__()
        masks = torch.tensor([[0.0, 1.0], [1.0, 0.0]] * (num_layers // 2), dtype=torch.float32)
        # Persistent like the reference's flow module (fixture README "pose_loss_*.pt", step 8: a YOLO26 pose
        # checkpoint stores the `mask` buffer and two unused prior buffers `loc`, `cov`), so its state dict
        # imports key for key; the prior used by `log_prob` is the standard normal these describe.
        self.register_buffer("mask", masks)
        self.register_buffer("loc", torch.zeros(2))
        self.register_buffer("cov", torch.eye(2))
        self.s = nn.ModuleList(_coupling_net(hidden, final_tanh=True) for _ in range(num_layers))
        self.t = nn.ModuleList(_coupling_net(hidden, final_tanh=False) for _ in range(num_layers))
        for net in (*self.s, *self.t):
            for layer in net:
                if isinstance(layer, nn.Linear):
                    nn.init.xavier_uniform_(layer.weight, gain=0.01)

    def inverse(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Map data ``x`` (N, 2) to the latent ``z`` and return ``(z, log|det dz/dx|)``."""
        log_det = x.new_zeros(x.shape[0])
        z = x
        for i in reversed(range(len(self.s))):
            keep = self.mask[i]
            z_kept = keep * z
            scale = self.s[i](z_kept) * (1 - keep)
            shift = self.t[i](z_kept) * (1 - keep)
            z = (1 - keep) * (z - shift) * torch.exp(-scale) + z_kept
            log_det = log_det - scale.sum(dim=1)
        return z, log_det

    def log_prob(self, x: Tensor) -> Tensor:
        """``log p(x)`` (N,) for residuals ``x`` (N, 2)."""
        z, log_det = self.inverse(x)
        prior = -0.5 * (z**2).sum(dim=1) - math.log(2 * math.pi)
        return prior + log_det
