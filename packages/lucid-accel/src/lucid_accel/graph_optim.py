"""``--accel.capture_orthogonalization`` / ``--accel.capture_updates``: MuSGD's Newton–Schulz and update
preparation replayed as CUDA graphs.

:func:`attach_musgd_replay` replaces two seams of one ``lucid_core.optim.MuSGD`` instance: ``_orthogonalise``
(recorded per set of direction shapes on owned stacked inputs; every step replays) and ``_muon_directions`` /
``_sgd_directions`` (MuSGD's own methods recorded with ``p.grad`` pointed at owned buffers; the learning rate and
the parameter write stay eager). An update recording is keyed by the momentum and weight decay it bakes in and is
made only once the same values were seen on two consecutive steps, so momentum warm-up steps and a parameter's
first step run natively; loading optimizer state drops the recordings. The native methods run instead, with one
warning per path, on CPU/MPS, while tracing, or after a failed recording.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from lucid_accel.notices import FallbackNotices, tracing
from lucid_core.optim import MuSGD
from lucid_core.optim.musgd import newton_schulz5

ORTHO_PATH = "capture_orthogonalization"
UPDATES_PATH = "capture_updates"
MAX_RECORDINGS = 8


def _why_not(tensors: Sequence[Tensor]) -> str | None:
    if not tensors:
        return "nothing to update"
    device = tensors[0].device
    if device.type != "cuda":
        return f"device {device.type} (CUDA graphs need CUDA)"
    if not hasattr(torch.cuda, "CUDAGraph"):
        return "this torch build has no CUDA graphs"
    if tracing():
        return "tracing/compiling"
    return None


@dataclass
class _OrthoRecording:
    graph: Any
    inputs: list[Tensor]  # one stacked (n, r, c) buffer per shape batch
    outputs: list[Tensor]  # float32 NS results, same shapes
    batches: list[list[int]]


@dataclass
class _UpdateRecording:
    graph: Any
    grads: list[Tensor]  # owned gradient buffers the graph reads
    directions: list[Tensor]  # what the method returned under capture
    state_ids: tuple[int, ...]


class MuSGDReplay:
    """The replacements installed on one MuSGD instance; :meth:`detach` restores the native methods."""

    def __init__(
        self, optimizer: Any, notices: FallbackNotices, orthogonalization: bool, updates: bool
    ) -> None:
        self.optimizer = optimizer
        self.notices = notices
        self.ortho: dict[tuple[Any, ...], _OrthoRecording] = {}
        self.updates: dict[tuple[Any, ...], _UpdateRecording] = {}
        self._last_scalars: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.disabled: set[str] = set()
        self.replays = {ORTHO_PATH: 0, UPDATES_PATH: 0}
        cls = type(optimizer)
        self._native_orthogonalise: Callable[..., list[Tensor]] = cls._orthogonalise.__get__(optimizer)
        self._native_muon: Callable[..., list[Tensor]] = cls._muon_directions.__get__(optimizer)
        self._native_sgd: Callable[..., list[Tensor]] = cls._sgd_directions.__get__(optimizer)
        if orthogonalization:
            optimizer._orthogonalise = self.orthogonalise
        if updates:
            optimizer._muon_directions = self.muon_directions
            optimizer._sgd_directions = self.sgd_directions
        optimizer.register_load_state_dict_post_hook(lambda _opt: self.invalidate())

    def invalidate(self) -> None:
        """Drop every recording (optimizer state was loaded or replaced)."""
        self.ortho.clear()
        self.updates.clear()
        self._last_scalars.clear()

    def detach(self) -> None:
        """Remove the replacements (the optimizer uses its own methods again)."""
        for name in ("_orthogonalise", "_muon_directions", "_sgd_directions"):
            self.optimizer.__dict__.pop(name, None)

    def _fail(self, path: str, exc: Exception) -> None:
        self.disabled.add(path)
        self.invalidate()
        self.notices.fallback(path, f"recording failed: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ Newton–Schulz
    def orthogonalise(self, directions: list[Tensor], dtype: torch.dtype) -> list[Tensor]:
        reason = "disabled after a failed recording" if ORTHO_PATH in self.disabled else _why_not(directions)
        if reason is not None:
            self.notices.fallback(ORTHO_PATH, reason)
            return self._native_orthogonalise(directions, dtype)
        key = (dtype, tuple((tuple(d.shape), d.dtype, d.device) for d in directions))
        try:
            recording = self.ortho.get(key)
            if recording is None:
                recording = self._record_ortho(directions, dtype)
                if len(self.ortho) >= MAX_RECORDINGS:
                    self.ortho.pop(next(iter(self.ortho)))
                self.ortho[key] = recording
            for stacked, indices in zip(recording.inputs, recording.batches, strict=True):
                views = [stacked[k] for k in range(len(indices))]
                sources = [directions[i].reshape(directions[i].shape[0], -1) for i in indices]
                torch._foreach_copy_(views, sources)
            recording.graph.replay()
        except Exception as exc:
            self._fail(ORTHO_PATH, exc)
            return self._native_orthogonalise(directions, dtype)
        self.replays[ORTHO_PATH] += 1
        results: list[Tensor | None] = [None] * len(directions)
        for ortho, indices in zip(recording.outputs, recording.batches, strict=True):
            for k, i in enumerate(indices):
                results[i] = ortho[k].reshape(directions[i].shape)
        return [r for r in results if r is not None]

    def _record_ortho(self, directions: list[Tensor], dtype: torch.dtype) -> _OrthoRecording:
        batches = self.optimizer._batches_for(directions)
        inputs = [
            torch.stack([directions[i].reshape(directions[i].shape[0], -1) for i in indices])
            for indices in batches
        ]
        device = directions[0].device
        stream = torch.cuda.Stream(device=device)  # type: ignore[no-untyped-call]
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):  # warm-up (cuBLAS handles/workspaces); NS has no side effects
            for _ in range(2):
                for stacked in inputs:
                    newton_schulz5(stacked, dtype=dtype).float()
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            outputs = [newton_schulz5(stacked, dtype=dtype).float() for stacked in inputs]
        return _OrthoRecording(graph=graph, inputs=inputs, outputs=outputs, batches=batches)

    # ------------------------------------------------------------------ update preparation
    def muon_directions(self, params: list[Tensor], group: Mapping[str, Any]) -> list[Tensor]:
        return self._update("muon", params, group, ("muon_momentum_buffer",), self._native_muon)

    def sgd_directions(self, params: list[Tensor], group: Mapping[str, Any]) -> list[Tensor]:
        state_keys = ("momentum_buffer",) if float(group["momentum"]) != 0 else ()
        return self._update("sgd", params, group, state_keys, self._native_sgd)

    def _update(
        self,
        kind: str,
        params: list[Tensor],
        group: Mapping[str, Any],
        state_keys: tuple[str, ...],
        native: Callable[[list[Tensor], Mapping[str, Any]], list[Tensor]],
    ) -> list[Tensor]:
        reason = "disabled after a failed recording" if UPDATES_PATH in self.disabled else _why_not(params)
        if reason is not None:
            self.notices.fallback(UPDATES_PATH, reason)
            return native(params, group)
        scalars = (
            float(group["momentum"]),
            float(group["weight_decay"]),
            bool(group["nesterov"]),
            tuple(float(v) for v in _finite(group)),
        )
        group_key = (kind, id(group), tuple(id(p) for p in params))
        stable = self._last_scalars.get(group_key) == scalars
        self._last_scalars[group_key] = scalars
        states = [self.optimizer.state[p] for p in params]
        have_state = all(key in state for state in states for key in state_keys)
        if not (stable and have_state):  # warm-up momentum or a first step: native this time
            self.updates.pop(group_key, None)
            return native(params, group)
        state_ids = tuple(id(state[key]) for state in states for key in state_keys)
        try:
            recording = self.updates.get(group_key)
            if recording is None or recording.state_ids != state_ids:
                recording = self._record_update(params, group, native, state_ids)
                self.updates[group_key] = recording
            torch._foreach_copy_(recording.grads, [p.grad for p in params])  # type: ignore[misc]
            recording.graph.replay()
        except Exception as exc:
            self._fail(UPDATES_PATH, exc)
            return native(params, group)
        self.replays[UPDATES_PATH] += 1
        return list(recording.directions)

    def _record_update(
        self,
        params: list[Tensor],
        group: Mapping[str, Any],
        native: Callable[[list[Tensor], Mapping[str, Any]], list[Tensor]],
        state_ids: tuple[int, ...],
    ) -> _UpdateRecording:
        real_grads = [p.grad for p in params]
        owned = [torch.empty_like(g) for g in real_grads if g is not None]
        torch.cuda.synchronize(params[0].device)
        graph = torch.cuda.CUDAGraph()
        try:
            for p, owned_grad in zip(params, owned, strict=True):
                p.grad = owned_grad
            # No warm-up: these element-wise kernels ran natively on the previous steps, and a warm-up would
            # advance the momentum buffers. Capture records without executing.
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                directions = native(params, group)
        finally:
            for p, g in zip(params, real_grads, strict=True):
                p.grad = g
        return _UpdateRecording(graph=graph, grads=owned, directions=directions, state_ids=state_ids)


def _finite(group: Mapping[str, Any]) -> list[float]:
    """Other numeric hyper-parameters of a group that could reach the preparation (none today; future-proof key)."""
    return [
        float(v)
        for k, v in sorted(group.items())
        if k not in ("params", "lr", "initial_lr", "momentum", "weight_decay", "nesterov", "use_muon")
        and isinstance(v, int | float)
        and not isinstance(v, bool)
        and math.isfinite(float(v))
    ]


def attach_musgd_replay(
    optimizer: Any, notices: FallbackNotices, *, orthogonalization: bool, updates: bool
) -> MuSGDReplay | None:
    """Install the replay on a MuSGD optimizer; warn once and return None for any other optimizer."""
    if not isinstance(optimizer, MuSGD):
        for flag, on in ((ORTHO_PATH, orthogonalization), (UPDATES_PATH, updates)):
            if on:
                notices.fallback(flag, f"the optimizer is {type(optimizer).__name__}, not MuSGD")
        return None
    return MuSGDReplay(optimizer, notices, orthogonalization=orthogonalization, updates=updates)
