"""Optimiser parameter groups with the reference recipe's routing and batch-scaled weight decay.

Sources: the reference's documented recipe (docs/TRAINING.md: weight decay 5e-4 scaled by batch × accumulate / 64, accumulation to a nominal batch
of 64, three groups — decayed weights, undecayed normalisation weights, undecayed biases) and
``shared/fixtures/README.md`` ("How the reference trainer builds the optimiser") for MuSGD's eight groups:
routing ndim 2/4 → muon (decayed), name containing ``bias`` → bias (no weight_decay key), normalisation weight
(or ``logit_scale``) → bn (decay 0), else weight (decayed); each split into an lr×3 "boosted" group (the head's
classification convs) and a normal one, in the order weight×3, weight, bn×3, bn, bias×3, bias, muon×3, muon.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from torch import nn

OptimizerName = Literal["SGD", "MuSGD", "AdamW"]
GROUP_ORDER = ("weight", "bn", "bias", "muon")
BOOST_FACTOR = 3.0
_NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.modules.batchnorm._NormBase,
    nn.GroupNorm,
    nn.LayerNorm,
    nn.LocalResponseNorm,
)


def gradient_accumulation(batch_size: int, nominal_batch: int = 64) -> int:
    """Optimiser steps accumulate max(round(nominal / batch), 1) batches."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return max(round(nominal_batch / batch_size), 1)


def scaled_weight_decay(weight_decay: float, batch_size: int, nominal_batch: int = 64) -> float:
    """weight_decay · batch · accumulate / nominal_batch (so the decay per nominal batch is constant)."""
    return weight_decay * batch_size * gradient_accumulation(batch_size, nominal_batch) / nominal_batch


def route_parameter(
    module: nn.Module, param_name: str, full_name: str, param_ndim: int, optimizer: str
) -> str:
    """Group name of one parameter: "muon" (MuSGD, ndim 2 or 4), "bias", "bn" or "weight"."""
    if optimizer == "MuSGD" and param_ndim in (2, 4):
        return "muon"
    if "bias" in full_name:
        return "bias"
    if isinstance(module, _NORM_TYPES) or param_name == "logit_scale":
        return "bn"
    return "weight"


def build_param_groups(
    model: nn.Module,
    *,
    optimizer: OptimizerName,
    lr: float,
    momentum: float,
    weight_decay: float,
    batch_size: int,
    nominal_batch: int = 64,
    boost: Callable[[str], bool] | None = None,
) -> list[dict[str, Any]]:
    """Parameter groups for ``torch.optim.SGD`` / ``AdamW`` or :class:`~lucid_core.optim.MuSGD`.

    SGD/AdamW: three groups "weight" (decay), "bn" (decay 0), "bias" (decay 0; warm-up drives it from
    ``warmup_bias_lr``). MuSGD: the eight-group layout above; ``boost(name)`` marks the parameters trained with
    lr × 3 (e.g. ``model.cls_branch_parameter_names().__contains__``); it is not used by SGD/AdamW.
    Each group carries ``param_group`` (its routing name), ``param_names``, ``lr_boosted_x3`` and
    ``initial_lr`` (the lr that schedules scale). Frozen parameters (``requires_grad`` False) are left out.
    """
    if optimizer not in ("SGD", "MuSGD", "AdamW"):
        raise ValueError(
            f"build_param_groups: optimizer must be 'SGD', 'MuSGD' or 'AdamW', got {optimizer!r}"
        )
    decay = scaled_weight_decay(weight_decay, batch_size, nominal_batch)
    boosted_flags = (True, False) if optimizer == "MuSGD" else (False,)
    buckets: dict[tuple[str, bool], list[tuple[str, nn.Parameter]]] = {
        (name, flag): [] for name in GROUP_ORDER for flag in boosted_flags
    }
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            full_name = f"{module_name}.{param_name}" if module_name else param_name
            routed = route_parameter(module, param_name, full_name, param.ndim, optimizer)
            is_boosted = optimizer == "MuSGD" and boost is not None and boost(full_name)
            buckets[(routed, is_boosted)].append((full_name, param))

    groups: list[dict[str, Any]] = []
    for name in GROUP_ORDER:
        if name == "muon" and optimizer != "MuSGD":
            continue
        for flag in boosted_flags:
            members = buckets[(name, flag)]
            group_lr = lr * BOOST_FACTOR if flag else lr
            group: dict[str, Any] = {
                "params": [p for _, p in members],
                "lr": group_lr,
                "initial_lr": group_lr,
            }
            if optimizer == "AdamW":
                group["betas"] = (momentum, 0.999)
            else:
                group["momentum"] = momentum
                group["nesterov"] = True
            if name in ("weight", "muon"):
                group["weight_decay"] = decay
            elif name == "bn" or optimizer != "MuSGD":
                group["weight_decay"] = 0.0
            if name == "muon":
                group["use_muon"] = True
            group.update(param_group=name, param_names=[n for n, _ in members], lr_boosted_x3=flag)
            groups.append(group)
    return groups
