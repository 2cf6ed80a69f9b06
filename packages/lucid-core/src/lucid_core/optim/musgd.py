"""MuSGD: Muon-orthogonalised momentum mixed with SGD (YOLO26's optimiser) and quintic Newton–Schulz.

Muon: K. Jordan et al., "Muon: An optimizer for hidden layers in neural networks" (2024), which
orthogonalises the momentum of matrix parameters with a quintic Newton–Schulz iteration. The exact arithmetic
(bfloat16 NS with fused ``baddbmm`` forms, coefficients (3.4445, −4.7750, 2.0315), eps 1e-7, the
sqrt(max(1, rows/cols)) scale, the Muon buffer ``m = μ·m + (1 − μ)·g``, and the SGD part applied afterwards with
weight decay on the already-updated parameter) follows ``shared/fixtures/README.md``, section "musgd_public.pt".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
NS_EPS = 1e-7


def newton_schulz5(matrix: Tensor, steps: int = NS_STEPS, eps: float = NS_EPS) -> Tensor:
    """Approximate orthogonalisation (U Vᵀ of the SVD) of a matrix (r, c) or a batch (n, r, c), in bfloat16.

    X is normalised by its Frobenius norm (+ eps) per matrix, transposed when r > c, and iterated
    ``A = X Xᵀ; B = b·A + c·A·A; X = a·X + B·X`` with both updates as one fused ``baddbmm`` (needed for the
    reference's rounding). Returns bfloat16 of the input's shape.
    """
    if matrix.ndim not in (2, 3):
        raise ValueError(
            f"newton_schulz5: expected a (r, c) or (n, r, c) tensor, got shape {tuple(matrix.shape)}"
        )
    a, b, c = NS_COEFFICIENTS
    x = matrix.to(torch.bfloat16)
    squeeze = x.ndim == 2
    if squeeze:
        x = x.unsqueeze(0)
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + eps)
    transposed = x.shape[-2] > x.shape[-1]
    if transposed:
        x = x.mT
    for _ in range(steps):
        gram = torch.bmm(x, x.mT)
        poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.baddbmm(x, poly, x, beta=a)
    if transposed:
        x = x.mT
    return x.squeeze(0) if squeeze else x


def orthogonalise_batched(updates: list[Tensor]) -> list[Tensor]:
    """NS5 of several matrix-shaped directions, batching matrices with equal column counts.

    Each tensor is viewed as (shape[0], prod(rest)); matrices sharing a column count are zero-padded by rows to a
    common height and orthogonalised together (zero rows do not change the result; fixture README). Returns
    float32 tensors of the original shapes.
    """
    results: list[Tensor | None] = [None] * len(updates)
    by_columns: dict[int, list[int]] = {}
    for i, u in enumerate(updates):
        by_columns.setdefault(u[0].numel(), []).append(i)
    for indices in by_columns.values():
        mats = [updates[i].reshape(updates[i].shape[0], -1) for i in indices]
        rows = max(m.shape[0] for m in mats)
        if len(mats) == 1:
            stacked = mats[0].unsqueeze(0)
        else:
            stacked = torch.stack([torch.nn.functional.pad(m, (0, 0, 0, rows - m.shape[0])) for m in mats])
        ortho = newton_schulz5(stacked).float()
        for k, (i, m) in enumerate(zip(indices, mats, strict=True)):
            results[i] = ortho[k, : m.shape[0]].reshape(updates[i].shape)
    return [r for r in results if r is not None]


class MuSGD(torch.optim.Optimizer):
    """SGD with an additional Muon step for groups marked ``use_muon=True``.

    Per group: ``lr``, ``momentum``, ``weight_decay``, ``nesterov``, ``use_muon``. Non-muon groups are plain SGD
    (dampening 0, optional Nesterov, L2 weight decay added to the gradient). Muon groups first apply
    ``p -= lr·muon·scale·NS5(u)`` with its own momentum buffer, then the SGD step with ``lr·sgd``.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        muon: float = 0.2,
        sgd: float = 1.0,
        lr: float = 1e-3,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        use_muon: bool = False,
    ) -> None:
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(
                f"MuSGD: lr, momentum and weight_decay must be >= 0, got {lr}, {momentum}, {weight_decay}"
            )
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "use_muon": use_muon,
        }
        super().__init__(params, defaults)
        self.muon = float(muon)
        self.sgd = float(sgd)

    @staticmethod
    def _sgd_step(
        p: Tensor, grad: Tensor, state: dict[str, Any], group: Mapping[str, Any], lr: float
    ) -> None:
        momentum, wd = float(group["momentum"]), float(group["weight_decay"])
        if wd != 0:
            grad = grad.add(p, alpha=wd)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = grad.detach().clone()
                state["momentum_buffer"] = buf
            else:
                buf.mul_(momentum).add_(grad)
            grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
        p.add_(grad, alpha=-lr)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            lr = float(group["lr"])
            if group["use_muon"]:
                momentum = float(group["momentum"])
                directions: list[Tensor] = []
                for p in params:
                    grad = p.grad
                    assert grad is not None
                    state = self.state[p]
                    buf = state.get("muon_momentum_buffer")
                    if buf is None:
                        buf = torch.zeros_like(grad)
                        state["muon_momentum_buffer"] = buf
                    buf.mul_(momentum).add_(grad, alpha=1 - momentum)
                    directions.append(
                        grad.mul(1 - momentum).add_(buf, alpha=momentum) if group["nesterov"] else buf
                    )
                for p, ortho in zip(params, orthogonalise_batched(directions), strict=True):
                    shape = p.shape
                    scale = math.sqrt(max(1.0, shape[-2] / shape[-1])) if len(shape) >= 2 else 1.0
                    p.add_(ortho.to(p.dtype), alpha=-lr * self.muon * scale)
                for p in params:
                    assert p.grad is not None
                    self._sgd_step(p, p.grad, self.state[p], group, lr * self.sgd)
            else:
                for p in params:
                    assert p.grad is not None
                    self._sgd_step(p, p.grad, self.state[p], group, lr)
        return loss
