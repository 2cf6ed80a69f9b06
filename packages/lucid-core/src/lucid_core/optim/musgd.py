"""MuSGD: Muon-orthogonalised momentum mixed with SGD (YOLO26's optimiser) and quintic Newton–Schulz.

Muon: K. Jordan et al., "Muon: An optimizer for hidden layers in neural networks" (2024), which
orthogonalises the momentum of matrix parameters with a quintic Newton–Schulz iteration. The exact arithmetic
(bfloat16 NS with fused ``baddbmm`` forms, coefficients (3.4445, −4.7750, 2.0315), eps 1e-7, the
sqrt(max(1, rows/cols)) scale, the Muon buffer ``m = μ·m + (1 − μ)·g``, and the SGD part applied afterwards with
weight decay on the already-updated parameter) follows ``shared/fixtures/README.md``, section "musgd_public.pt".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import torch
from torch import Tensor

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
NS_EPS = 1e-7
NsDtype = Literal["auto", "bfloat16", "float32"]
_NS_DTYPES: dict[str, torch.dtype] = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def resolve_ns_dtype(ns_dtype: str, device: torch.device) -> torch.dtype:
    """Newton–Schulz compute dtype: "bfloat16" (the reference's arithmetic), "float32", or "auto".

    "auto" is bfloat16 (the reference) on accelerators and float32 on CPU: a CPU without native bf16 GEMMs
    emulates them ~20× slower than float32 (``tools/bench/optim.py``), and the fixture README ("musgd_public.pt")
    documents the float32 replay as within 6e-5 of the reference parameters (tolerance 1e-4).
    """
    if ns_dtype == "auto":
        return torch.float32 if device.type == "cpu" else torch.bfloat16
    if ns_dtype not in _NS_DTYPES:
        raise ValueError(f"MuSGD: ns_dtype must be 'auto', 'bfloat16' or 'float32', got {ns_dtype!r}")
    return _NS_DTYPES[ns_dtype]


def newton_schulz5(
    matrix: Tensor, steps: int = NS_STEPS, eps: float = NS_EPS, dtype: torch.dtype = torch.bfloat16
) -> Tensor:
    """Approximate orthogonalisation (U Vᵀ of the SVD) of a matrix (r, c) or a batch (n, r, c).

    X is cast to ``dtype`` (bfloat16 = the reference), normalised by its Frobenius norm (+ eps) per matrix,
    transposed when r > c, and iterated ``A = X Xᵀ; B = b·A + c·A·A; X = a·X + B·X`` with both updates as one
    fused ``baddbmm`` (needed for the reference's bf16 rounding). Returns ``dtype`` of the input's shape.

    Runs with autocast off: inside an autocast region (a manual-optimization ``training_step`` under ``16-mixed``)
    ``bmm``/``baddbmm`` would otherwise be cast to float16 or bfloat16 whatever ``dtype`` says.
    """
    device_type = matrix.device.type
    if device_type in ("cpu", "cuda") and torch.is_autocast_enabled(device_type):
        with torch.autocast(device_type=device_type, enabled=False):
            return newton_schulz5(matrix, steps, eps, dtype)
    if matrix.ndim not in (2, 3):
        raise ValueError(
            f"newton_schulz5: expected a (r, c) or (n, r, c) tensor, got shape {tuple(matrix.shape)}"
        )
    a, b, c = NS_COEFFICIENTS
    x = matrix.to(dtype)
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


def matrix_shape(tensor: Tensor) -> tuple[int, int]:
    """The (rows, cols) a tensor is orthogonalised as: (shape[0], prod(shape[1:]))."""
    return tensor.shape[0], tensor[0].numel()


def shape_batches(shapes: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Indices of the matrices to orthogonalise together: those of exactly the same (rows, cols).

    The reference zero-pads matrices with equal column counts to a common height (zero rows do not change the
    result; fixture README), but padding a (64, 256) to (256, 256) makes NS work on a 256×256 Gram matrix instead
    of 64×64 — on yolo26 n it more than doubles the arithmetic — so only identical shapes share a batch.
    """
    batches: dict[tuple[int, int], list[int]] = {}
    for i, shape in enumerate(shapes):
        batches.setdefault(shape, []).append(i)
    return list(batches.values())


def orthogonalise_batched(
    updates: list[Tensor], dtype: torch.dtype = torch.bfloat16, batches: list[list[int]] | None = None
) -> list[Tensor]:
    """NS5 (in ``dtype``) of several matrix-shaped directions, batching matrices of equal matrix shape.

    Each tensor is viewed as (shape[0], prod(rest)); ``batches`` (default: :func:`shape_batches` of those
    shapes; callers stepping every iteration cache it) lists the indices stacked into one NS call. Returns float32
    tensors of the original shapes.
    """
    if batches is None:
        batches = shape_batches([matrix_shape(u) for u in updates])
    results: list[Tensor | None] = [None] * len(updates)
    for indices in batches:
        stacked = torch.stack([updates[i].reshape(updates[i].shape[0], -1) for i in indices])
        ortho = newton_schulz5(stacked, dtype=dtype).float()
        for k, i in enumerate(indices):
            results[i] = ortho[k].reshape(updates[i].shape)
    if any(r is None for r in results):
        raise ValueError(f"orthogonalise_batched: batches {batches} do not cover all {len(updates)} updates")
    return [r for r in results if r is not None]


class MuSGD(torch.optim.Optimizer):
    """SGD with an additional Muon step for groups marked ``use_muon=True``.

    Per group: ``lr``, ``momentum``, ``weight_decay``, ``nesterov``, ``use_muon``. Non-muon groups are plain SGD
    (dampening 0, optional Nesterov, L2 weight decay added to the gradient). Muon groups first apply
    ``p -= lr·muon·scale·NS5(u)`` with its own momentum buffer, then the SGD step with ``lr·sgd``.

    ``ns_dtype`` is the Newton–Schulz compute dtype (:func:`resolve_ns_dtype`): "bfloat16" reproduces the
    reference (fixture tolerance 1e-5), "float32" stays within the fixture's float32 tolerance (1e-4) and is ~20×
    faster on CPUs without native bf16; "auto" (default) picks float32 for CPU parameters, bfloat16 otherwise.
    The NS batching (:func:`shape_batches`) is computed once per set of matrix shapes and reused every step.
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
        ns_dtype: NsDtype = "auto",
    ) -> None:
        resolve_ns_dtype(ns_dtype, torch.device("cpu"))  # validates the name early
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
        self.ns_dtype: NsDtype = ns_dtype
        self._ns_batches: dict[tuple[tuple[int, int], ...], list[list[int]]] = {}

    def _batches_for(self, directions: Sequence[Tensor]) -> list[list[int]]:
        """The cached :func:`shape_batches` of these directions' matrix shapes."""
        shapes = tuple(matrix_shape(d) for d in directions)
        batches = self._ns_batches.get(shapes)
        if batches is None:
            batches = self._ns_batches[shapes] = shape_batches(shapes)
        return batches

    def _sgd_steps(self, params: list[Tensor], group: Mapping[str, Any], lr: float) -> None:
        """The SGD part for all ``params`` of a group at once (``torch._foreach_*``: the same element-wise ops
        as one ``p.add_`` per tensor, without ~370 small kernel launches per step on yolo26 n)."""
        torch._foreach_add_(params, self._sgd_directions(params, group), alpha=-lr)

    def _sgd_directions(self, params: list[Tensor], group: Mapping[str, Any]) -> list[Tensor]:
        """The SGD update preparation: ``g' = g + wd·p``, the momentum buffers ``b = μ·b + g'`` and the
        direction (``b``, Nesterov ``g' + μ·b``) that :meth:`_sgd_steps` applies with ``-lr`` (a seam for
        lucid-accel's graph replay)."""
        momentum, wd = float(group["momentum"]), float(group["weight_decay"])
        grads = [p.grad for p in params if p.grad is not None]
        if wd != 0:
            grads = list(torch._foreach_add(grads, params, alpha=wd))
        if momentum != 0:
            states = [self.state[p] for p in params]
            old = [
                (state["momentum_buffer"], grad)
                for state, grad in zip(states, grads, strict=True)
                if "momentum_buffer" in state
            ]
            if old:
                torch._foreach_mul_([buf for buf, _ in old], momentum)
                torch._foreach_add_([buf for buf, _ in old], [grad for _, grad in old])
            for state, grad in zip(states, grads, strict=True):
                if "momentum_buffer" not in state:  # first step of this parameter: buf = g'
                    state["momentum_buffer"] = grad.detach().clone()
            bufs = [state["momentum_buffer"] for state in states]
            grads = list(torch._foreach_add(grads, bufs, alpha=momentum)) if group["nesterov"] else bufs
        return grads

    def _orthogonalise(self, directions: list[Tensor], dtype: torch.dtype) -> list[Tensor]:
        """NS5 of a Muon group's directions (:func:`orthogonalise_batched` with the cached batching; a seam for
        lucid-accel's graph replay)."""
        return orthogonalise_batched(directions, dtype, self._batches_for(directions))

    def _muon_directions(self, params: list[Tensor], group: Mapping[str, Any]) -> list[Tensor]:
        """Update the Muon buffers ``m = μ·m + (1 − μ)·g`` and return ``u`` (Nesterov: ``μ·m + (1 − μ)·g``)."""
        momentum = float(group["momentum"])
        grads = [p.grad for p in params if p.grad is not None]
        states = [self.state[p] for p in params]
        for state, grad in zip(states, grads, strict=True):
            if "muon_momentum_buffer" not in state:
                state["muon_momentum_buffer"] = torch.zeros_like(grad)
        bufs = [state["muon_momentum_buffer"] for state in states]
        torch._foreach_mul_(bufs, momentum)
        torch._foreach_add_(bufs, grads, alpha=1 - momentum)
        if not group["nesterov"]:
            return bufs
        directions = list(torch._foreach_mul(grads, 1 - momentum))
        torch._foreach_add_(directions, bufs, alpha=momentum)
        return directions

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
                directions = self._muon_directions(params, group)
                dtype = resolve_ns_dtype(self.ns_dtype, params[0].device)
                orthos = self._orthogonalise(directions, dtype)
                for p, ortho in zip(params, orthos, strict=True):
                    shape = p.shape
                    scale = math.sqrt(max(1.0, shape[-2] / shape[-1])) if len(shape) >= 2 else 1.0
                    p.add_(ortho.to(p.dtype), alpha=-lr * self.muon * scale)
                self._sgd_steps(params, group, lr * self.sgd)
            else:
                self._sgd_steps(params, group, lr)
        return loss
