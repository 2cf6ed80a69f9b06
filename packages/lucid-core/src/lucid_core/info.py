"""Model size and cost: ``model_info(model, imgsz) -> ModelInfo(params, gflops)``.

FLOPs come from :class:`torch.utils.flop_counter.FlopCounterMode` (2 FLOPs per multiply-accumulate of
convolutions, transposed convolutions, linears and matmuls) on a ``meta``-device copy of the model, counted in the
mode it is in, plus :data:`BN_FLOPS_PER_ELEMENT` per BatchNorm output element; activations, pooling and upsampling
count 0, and training-only auxiliary outputs (``head.auxiliary_module_names()``) are left out. The rule lands on
the reference's ``gflops_*`` (shared/fixtures/README.md: thop MACs × 2 on a 1x3xSxS input, model as built) within
1 % for every model (tests/core/test_core_model_params.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


@dataclass(frozen=True)
class ModelInfo:
    params: int
    gflops: float


#: thop counts an affine normalisation as 4 ops per element, doubled by the reference's MACs × 2.
BN_FLOPS_PER_ELEMENT = 8


def count_flops(model: nn.Module, imgsz: int | tuple[int, int], channels: int = 3) -> int:
    """FLOPs of one forward pass of a 1 x channels x H x W input, counted on meta tensors."""
    h, w = (imgsz, imgsz) if isinstance(imgsz, int) else imgsz
    on_meta = all(p.device.type == "meta" for p in model.parameters())
    meta_model = model if on_meta else copy.deepcopy(model).to(device="meta")
    root = type(meta_model).__name__
    excluded = [f"{root}.{name}" for name in auxiliary_modules(meta_model)]
    norm_elements = [0]

    def count_norm(_module: nn.Module, _inputs: object, output: torch.Tensor) -> None:
        norm_elements[0] += output.numel()

    handles = [
        m.register_forward_hook(count_norm)
        for name, m in meta_model.named_modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm)
        and not any(f"{root}.{name}".startswith(ex + ".") for ex in excluded)
    ]
    # BatchNorm in training mode dispatches through a slow functional path; its mode changes no FLOP count.
    norms_in_training = [
        m for m in meta_model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training
    ]
    for norm in norms_in_training:
        norm.eval()
    x = torch.empty(1, channels, h, w, device="meta")
    counter = FlopCounterMode(display=False)
    try:
        with counter, torch.no_grad():
            meta_model(x)
    finally:
        for handle in handles:
            handle.remove()
        for norm in norms_in_training:
            norm.train()
    per_module = counter.get_flop_counts()
    aux_flops = sum(_module_flops(per_module, name) for name in excluded)
    return int(counter.get_total_flops()) - aux_flops + BN_FLOPS_PER_ELEMENT * norm_elements[0]


def _module_flops(per_module: dict[str, dict[object, int]], name: str) -> int:
    """Inclusive FLOPs of module ``name``; a container never called itself (ModuleList) sums its children."""
    if name in per_module:
        return sum(per_module[name].values())
    children = [k for k in per_module if k.startswith(name + ".") and "." not in k[len(name) + 1 :]]
    return sum(sum(per_module[k].values()) for k in children)


def auxiliary_modules(model: nn.Module) -> list[str]:
    """Qualified names of every head's training-only auxiliary modules (not counted as model cost)."""
    names: list[str] = []
    for name, module in model.named_modules():
        aux = getattr(module, "auxiliary_module_names", None)
        if callable(aux):
            prefix = f"{name}." if name else ""
            names.extend(prefix + a for a in aux() if _has_submodule(module, a))
    return names


def _has_submodule(module: nn.Module, dotted: str) -> bool:
    try:
        module.get_submodule(dotted)
    except AttributeError:
        return False
    return True


def model_info(model: nn.Module, imgsz: int | tuple[int, int] = 640) -> ModelInfo:
    """Parameter count (all parameters, frozen ones included) and GFLOPs at ``imgsz``."""
    params = sum(p.numel() for p in model.parameters())
    return ModelInfo(params=params, gflops=count_flops(model, imgsz) / 1e9)
