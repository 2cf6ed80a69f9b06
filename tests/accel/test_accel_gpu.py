"""On a CUDA device: every lucid-accel fast path equals the native path bit for bit (issue 19; ``gpu`` marker).

Skipped without CUDA. Small models, so they run in seconds on a GPU; the full 20-step yolo26 n comparison is
``tools/gpu/check.sh``.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch import nn

from lucid_accel import AccelFallbackWarning, AccelSession
from lucid_accel.notices import FallbackNotices

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


class TwoHeads(nn.Module):
    """Conv + BatchNorm trunk with two output heads (the second can be left unused by the loss)."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.SiLU())
        self.head_a = nn.Conv2d(16, 4, 1)
        self.head_b = nn.Conv2d(16, 2, 1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.trunk(x)
        return {"a": self.head_a(features), "b": self.head_b(features)}


def _run_network(capture: bool, use_b: list[bool], shapes: list[int]) -> tuple[list[Any], dict[str, Any]]:
    torch.manual_seed(0)
    model = TwoHeads().cuda().train()
    forward: Any = AccelSession({"capture_network": capture}).attach(model).forward
    record: list[Any] = []
    for step, (b, size) in enumerate(zip(use_b, shapes, strict=True)):
        gen = torch.Generator(device="cuda").manual_seed(step)
        x = torch.randn(4, 3, size, size, device="cuda", generator=gen)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = forward(model, x)
        loss = out["a"].float().square().mean() + (out["b"].float().abs().mean() if b else 0)
        loss.backward()
        record.append(loss.detach().cpu())
        record.append([None if p.grad is None else p.grad.detach().cpu().clone() for p in model.parameters()])
        model.zero_grad(set_to_none=True)
    return record, {k: v.detach().cpu() for k, v in model.state_dict().items()}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def test_captured_network_equals_native_and_keeps_absent_gradients_absent() -> None:
    use_b = [True, True, False, True, True]
    shapes = [16, 16, 16, 24, 16]  # a new signature re-records, the old one replays again
    native = _run_network(False, use_b, shapes)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        captured = _run_network(True, use_b, shapes)
    assert _same(captured, native)
    grads_step_2 = native[0][5]  # step 2 did not use head b: its gradients are absent natively
    assert grads_step_2[-1] is None and grads_step_2[-2] is None


def _musgd_run(flags: dict[str, bool], steps: int = 6) -> tuple[dict[str, Any], Any]:
    from lucid_core.optim import MuSGD

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.Conv2d(16, 16, 3), nn.Conv2d(16, 8, 1)
    ).cuda()
    optimizer = MuSGD(
        [
            {"params": [p for p in model.parameters() if p.ndim > 1], "use_muon": True, "weight_decay": 5e-4},
            {"params": [p for p in model.parameters() if p.ndim <= 1], "use_muon": False},
        ],
        lr=0.01,
        momentum=0.9,
        nesterov=True,
    )
    session = AccelSession(flags).attach(model, optimizer=optimizer)
    for step in range(steps):
        gen = torch.Generator(device="cuda").manual_seed(step)
        model(torch.randn(2, 3, 12, 12, device="cuda", generator=gen)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    state = {
        "params": [p.detach().cpu() for p in model.parameters()],
        "optimizer": [v.detach().cpu() for st in optimizer.state.values() for _, v in sorted(st.items())],
    }
    return state, session


def test_musgd_replay_equals_native() -> None:
    native, _ = _musgd_run({})
    replayed, session = _musgd_run({"capture_orthogonalization": True, "capture_updates": True})
    assert _same(replayed, native)
    replays = session.optimizer_replay.replays
    assert replays["capture_orthogonalization"] == 6 and replays["capture_updates"] > 0


def test_fused_assigner_equals_eager_on_cuda() -> None:
    pytest.importorskip("triton")
    from lucid_accel.assign import FusedAssigner
    from lucid_core.assign import TaskAlignedAssigner

    gen = torch.Generator().manual_seed(0)
    batch, rows, classes = 4, 9, 5
    s = (8, 16, 32)
    anchors = torch.cat(
        [
            torch.stack(torch.meshgrid(torch.arange(640 // k), torch.arange(640 // k), indexing="xy"), -1)
            .reshape(-1, 2)
            .float()
            .add(0.5)
            .mul(k)
            for k in s
        ]
    )
    xy = torch.rand(batch, rows, 2, generator=gen) * 560
    gt = torch.cat((xy, xy + torch.rand(batch, rows, 2, generator=gen) * 80 + 2), -1)
    mask = (torch.rand(batch, rows, 1, generator=gen) > 0.2).float()
    centres = anchors + torch.randn(batch, anchors.shape[0], 2, generator=gen) * 4
    sizes = torch.rand(batch, anchors.shape[0], 2, generator=gen) * 60 + 2
    inputs = [
        torch.rand(batch, anchors.shape[0], classes, generator=gen),
        torch.cat((centres - sizes / 2, centres + sizes / 2), -1),
        anchors,
        torch.randint(0, classes, (batch, rows, 1), generator=gen).float(),
        gt * mask,
        mask,
    ]
    inputs = [t.cuda() for t in inputs]
    for kwargs in ({"topk": 10}, {"topk": 10, "small_target_stride": 16.0}, {"topk": 7, "topk2": 1}):
        eager = TaskAlignedAssigner(num_classes=classes, **kwargs)
        notices = FallbackNotices()
        with warnings.catch_warnings():
            warnings.simplefilter("error", AccelFallbackWarning)
            fused = FusedAssigner(eager, notices)(*inputs)
        assert _same(list(fused), list(eager(*inputs))), kwargs
