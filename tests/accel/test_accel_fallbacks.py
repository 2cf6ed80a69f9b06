"""Every lucid-accel flag on CPU takes the native path, warns once, and changes no number (issue 19).

A yolo26 n training loop (forward, E2E loss, backward, MuSGD step, EMA) runs a few steps natively and then with all
four flags on through an :class:`~lucid_accel.AccelSession`: every loss and every parameter/optimizer-state/EMA
byte must be equal, and each flag must have warned exactly once. Also: the package imports without Triton.
"""

from __future__ import annotations

import hashlib
import sys
import warnings
from typing import Any

import pytest
import torch

from lucid_accel import AccelConfig, AccelFallbackWarning, AccelSession

FLAGS = ("capture_network", "capture_orthogonalization", "capture_updates", "fused_assignment")
STEPS = 2
IMGSZ = 32


def _batch(step: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(100 + step)
    n = 5
    xy = torch.rand(n, 2, generator=gen) * 0.6 + 0.2
    wh = torch.rand(n, 2, generator=gen) * 0.3 + 0.05
    return {
        "images": torch.rand(2, 3, IMGSZ, IMGSZ, generator=gen),
        "batch_idx": torch.tensor([0, 0, 0, 1, 1], dtype=torch.float32),
        "cls": torch.randint(0, 3, (n, 1), generator=gen).float(),
        "bboxes": torch.cat((xy, wh), -1),
    }


def _digest(tensors: Any) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _state_digests(model: torch.nn.Module, optimizer: torch.optim.Optimizer, ema: Any) -> dict[str, str]:
    opt_state = [
        v for state in optimizer.state.values() for _, v in sorted(state.items()) if torch.is_tensor(v)
    ]
    return {
        "model": _digest(model.state_dict().values()),
        "optimizer": _digest(opt_state),
        "ema": _digest(ema.ema.state_dict().values()),
    }


def _train(config: AccelConfig | None) -> tuple[list[bytes], dict[str, str], AccelSession]:
    from lucid_core.loss import E2EDetectionLoss
    from lucid_core.models import build_model
    from lucid_core.optim import ModelEMA, MuSGD, build_param_groups

    torch.manual_seed(0)
    model = build_model(family="yolo26", task="detect", scale="n", num_classes=3).train()
    criterion = E2EDetectionLoss(num_classes=3, reg_max=int(model.reg_max), strides=tuple(model.strides))
    groups = build_param_groups(
        model, optimizer="MuSGD", lr=0.01, momentum=0.9, weight_decay=5e-4, batch_size=2, nominal_batch=2
    )
    optimizer = MuSGD(groups, lr=0.01, momentum=0.9)
    ema = ModelEMA(model, decay=0.9999, tau=2.0)
    session = AccelSession(config).attach(model, optimizer=optimizer, criterion=criterion)
    losses: list[bytes] = []
    for step in range(STEPS):
        batch = _batch(step)
        output = session.forward(model, batch["images"])
        total, items = criterion(output, batch)
        total.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        ema.update(model)
        losses.append(total.detach().numpy().tobytes() + items.numpy().tobytes())
    return losses, _state_digests(model, optimizer, ema), session


@pytest.mark.slow  # ~5 s unloaded: two yolo26 n runs with MuSGD on the CPU
def test_every_flag_on_cpu_is_native_warns_once_and_changes_nothing() -> None:
    native_losses, native_state, _ = _train(None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses, state, session = _train(AccelConfig(**dict.fromkeys(FLAGS, True)))
    assert losses == native_losses
    assert state == native_state
    accel = [str(w.message) for w in caught if issubclass(w.category, AccelFallbackWarning)]
    for flag in FLAGS:
        assert sum(f"lucid-accel: {flag} is not applied" in m for m in accel) == 1, (flag, accel)
    assert len(accel) == len(FLAGS), accel
    assert session.fused_assigners == 2  # both yolo26 branches were wrapped (and fell back on CPU)
    assert "cpu" in session.notices.reasons["capture_network"]


def _tiny_musgd_run(config: AccelConfig | None) -> tuple[list[bytes], str, AccelSession]:
    """A conv net with BatchNorm and MuSGD (Muon and SGD groups): the network and optimizer paths, fast."""
    from lucid_core.optim import MuSGD

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.SiLU(), torch.nn.Conv2d(8, 4, 1)
    ).train()
    weights = [p for p in model.parameters() if p.ndim > 1]
    others = [p for p in model.parameters() if p.ndim <= 1]
    optimizer = MuSGD(
        [
            {"params": weights, "use_muon": True, "weight_decay": 5e-4},
            {"params": others, "use_muon": False, "weight_decay": 0.0},
        ],
        lr=0.01,
        momentum=0.9,
        nesterov=True,
    )
    session = AccelSession(config).attach(model, optimizer=optimizer)
    outputs: list[bytes] = []
    for step in range(4):
        gen = torch.Generator().manual_seed(step)
        out = session.forward(model, torch.randn(2, 3, 8, 8, generator=gen))
        loss = out.square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        outputs.append(loss.detach().numpy().tobytes())
    state = [v for st in optimizer.state.values() for _, v in sorted(st.items())]
    return outputs, _digest([*model.state_dict().values(), *state]), session


def test_network_and_optimizer_flags_on_cpu_warn_once_and_change_nothing() -> None:
    native = _tiny_musgd_run(None)
    flags = ("capture_network", "capture_orthogonalization", "capture_updates")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        accelerated = _tiny_musgd_run(AccelConfig(**dict.fromkeys(flags, True)))
    assert accelerated[:2] == native[:2]
    accel = [str(w.message) for w in caught if issubclass(w.category, AccelFallbackWarning)]
    assert sorted(accel) == sorted(
        f"lucid-accel: {flag} is not applied (device cpu (CUDA graphs need CUDA)); using the native path "
        "(identical results)."
        for flag in flags
    )


def test_optimizer_flags_with_another_optimizer_warn_once() -> None:
    model = torch.nn.Linear(2, 2)
    with pytest.warns(AccelFallbackWarning, match="not MuSGD") as caught:
        session = AccelSession({"capture_updates": True}).attach(
            model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1)
        )
    assert session.optimizer_replay is None and len(caught) == 1


def test_no_flag_installs_nothing() -> None:
    session = AccelSession()
    model = torch.nn.Linear(2, 2)
    assert not session.enabled
    assert session.attach(model).network is None
    x = torch.randn(3, 2)
    assert torch.equal(session.forward(model, x), model(x))


def test_config_from_mapping_rejects_unknown_flags_and_non_booleans() -> None:
    assert AccelConfig.from_value({"capture_network": True}).enabled == ("capture_network",)
    with pytest.raises(ValueError, match="unknown flag"):
        AccelConfig.from_value({"capture_networks": True})
    with pytest.raises(TypeError, match=r"accel\.fused_assignment"):
        AccelConfig(fused_assignment="yes")  # type: ignore[arg-type]


def test_import_without_triton_is_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every lucid-accel module imports fresh with ``import triton`` failing; the kernels' loader names the extra."""
    import importlib

    monkeypatch.setitem(sys.modules, "triton", None)  # makes `import triton` raise ImportError
    for name in [m for m in sys.modules if m == "lucid_accel" or m.startswith("lucid_accel.")]:
        monkeypatch.delitem(sys.modules, name)
    modules = ["lucid_accel", "lucid_accel.assign", "lucid_accel.graph_network", "lucid_accel.graph_optim"]
    fresh = {name: importlib.import_module(name) for name in [*modules, "lucid_accel.kernels.assign"]}
    assert not fresh["lucid_accel"].capabilities().triton
    with pytest.raises(ImportError, match=r"lucid-accel\[cuda\]"):
        fresh["lucid_accel.kernels.assign"].load_kernels()

    from lucid_core.assign import TaskAlignedAssigner

    fused = fresh["lucid_accel.assign"].FusedAssigner(TaskAlignedAssigner(topk=3, num_classes=2))
    inputs = (
        torch.rand(1, 16, 2),
        torch.rand(1, 16, 4) * 8,
        torch.rand(16, 2) * 8,
        torch.zeros(1, 1, 1),
        torch.tensor([[[0.0, 0.0, 6.0, 6.0]]]),
        torch.ones(1, 1, 1),
    )
    with pytest.warns(fresh["lucid_accel"].AccelFallbackWarning, match="triton is not installed"):
        result = fused(*inputs)
    expected = fused.inner(*inputs)
    assert all(torch.equal(a, b) for a, b in zip(result, expected, strict=True))
