"""``--accel.capture_network``: the network's training forward + backward replayed as CUDA graphs.

:class:`CapturedNetwork` is called instead of ``model(images)`` in a training step. Per input signature (shape,
strides, dtype, device, autocast state) it records a forward and a backward graph on owned buffers (the recipe of
``torch.cuda.make_graphed_callables``) and replays them: buffers (BatchNorm statistics) update as in an eager
forward, gradients reach ``p.grad`` through autograd's own accumulation, and a step whose objective leaves outputs
without gradient has its backward computed natively (:meth:`CapturedNetwork.native_backward`). How identity with
the native step is kept: ``packages/lucid-accel/README.md``, "How identity is kept". The native forward runs
instead, with one warning, on CPU/MPS, without CUDA graphs, in eval mode or without grad, while tracing/compiling,
under distributed training, or when recording or a first replay fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn

from lucid_accel.notices import FallbackNotices, tracing

PATH = "capture_network"
WARMUP_ITERATIONS = 3


def flatten_tensors(value: Any) -> list[Tensor]:
    """Every tensor inside ``value`` (dataclasses, dicts, lists, tuples), depth first in field/key order."""
    out: list[Tensor] = []
    _collect(value, out)
    return out


def _collect(value: Any, out: list[Tensor]) -> None:
    if isinstance(value, Tensor):
        out.append(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _collect(getattr(value, f.name), out)
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect(v, out)


def rebuild(template: Any, tensors: Iterator[Tensor]) -> Any:
    """``template`` with its tensors replaced, in :func:`flatten_tensors` order, by ``tensors``."""
    if isinstance(template, Tensor):
        return next(tensors)
    if dataclasses.is_dataclass(template) and not isinstance(template, type):
        values = {f.name: rebuild(getattr(template, f.name), tensors) for f in dataclasses.fields(template)}
        init = {f.name: values[f.name] for f in dataclasses.fields(template) if f.init}
        rebuilt = dataclasses.replace(template, **init)
        for f in dataclasses.fields(template):
            if not f.init:
                object.__setattr__(rebuilt, f.name, values[f.name])
        return rebuilt
    if isinstance(template, dict):
        return {k: rebuild(v, tensors) for k, v in template.items()}
    if isinstance(template, list):
        return [rebuild(v, tensors) for v in template]
    if isinstance(template, tuple):
        items = [rebuild(v, tensors) for v in template]
        return type(template)(*items) if hasattr(template, "_fields") else tuple(items)
    return template


def _autocast_state(device_type: str) -> tuple[bool, torch.dtype]:
    return torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)


@dataclasses.dataclass
class Recording:
    """One signature's graphs and owned buffers."""

    forward_graph: Any
    backward_graph: Any
    static_input: Tensor
    template: Any  # the model output structure, for rebuild()
    outputs: list[Tensor]  # every output tensor (owned by the graph pool)
    differentiable: list[int]  # indices into outputs that require grad
    grad_outputs: list[Tensor]  # owned buffers the backward graph reads, one per differentiable output
    grads: list[Tensor | None]  # owned parameter gradients the backward graph writes (None: never reached)
    buffers: list[Tensor]  # the model's buffers (the forward graph updates them in place)
    snapshot: list[Tensor]  # their values before the last forward replay (written by the forward graph)
    autocast: tuple[bool, torch.dtype]
    param_ptrs: tuple[int, ...]


class _Replay(torch.autograd.Function):
    """Forward: replay the forward graph. Backward: replay the backward graph and return its gradients."""

    @staticmethod
    def forward(ctx: Any, owner: Any, recording: Recording, images: Tensor, *params: Tensor) -> Any:
        ctx.set_materialize_grads(False)
        ctx.recording = recording
        ctx.owner = owner
        ctx.params = params
        recording.static_input.copy_(images)
        recording.forward_graph.replay()
        return tuple(recording.outputs[i].detach() for i in recording.differentiable)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, *grads: Tensor | None) -> Any:
        recording: Recording = ctx.recording
        if any(g is None for g in grads):
            return (None, None, None, *ctx.owner.native_backward(recording, ctx.params, grads))
        for buffer, grad in zip(recording.grad_outputs, grads, strict=True):
            assert grad is not None
            if grad.data_ptr() != buffer.data_ptr():
                buffer.copy_(grad)
        recording.backward_graph.replay()
        return (None, None, None, *recording.grads)


class CapturedNetwork:
    """Calls ``model(images)`` through recorded CUDA graphs where they apply (:meth:`why_not`); a new signature
    records a new pair of graphs, at most ``max_recordings`` kept (least recently used dropped)."""

    def __init__(
        self, model: nn.Module, notices: FallbackNotices | None = None, max_recordings: int = 3
    ) -> None:
        self.model = model
        self.notices = notices if notices is not None else FallbackNotices()
        self.max_recordings = int(max_recordings)
        self.recordings: OrderedDict[tuple[Any, ...], Recording] = OrderedDict()
        self.disabled = False
        self.recorded = 0  # how many signatures were recorded (for tests/benchmarks)

    def why_not(self, images: Tensor) -> str | None:
        """The reason the graphs do not apply to this call, or None when they do."""
        if self.disabled:
            return "disabled after a failed recording or replay"
        if images.device.type != "cuda":
            return f"device {images.device.type} (CUDA graphs need CUDA)"
        if not hasattr(torch.cuda, "CUDAGraph"):
            return "this torch build has no CUDA graphs"
        if tracing():
            return "tracing/compiling"
        if not self.model.training or not torch.is_grad_enabled():
            return "not a training forward (eval mode or no grad)"
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return "distributed training"
        return None

    def __call__(self, images: Tensor) -> Any:
        reason = self.why_not(images)
        if reason is not None:
            self.notices.fallback(PATH, reason)
            return self.model(images)
        params: list[Tensor] = [p for p in self.model.parameters() if p.requires_grad]
        key = (
            tuple(images.shape),
            images.stride(),
            images.dtype,
            images.device,
            _autocast_state(images.device.type),
            len(params),
        )
        recording = self.recordings.get(key)
        if recording is not None and recording.param_ptrs != tuple(p.data_ptr() for p in params):
            del self.recordings[key]  # parameters were replaced: the graphs point at stale storage
            recording = None
        try:
            if recording is None:
                recording = self._record(images, params)
                self.recordings[key] = recording
                while len(self.recordings) > self.max_recordings:
                    self.recordings.popitem(last=False)
            else:
                self.recordings.move_to_end(key)
            outputs = _Replay.apply(self, recording, images, *params)
        except Exception as exc:  # a first recording/replay failure: native for the rest of the run
            self.disabled = True
            self.recordings.clear()
            self.notices.fallback(PATH, f"recording failed: {type(exc).__name__}: {exc}")
            return self.model(images)
        tensors = list(recording.outputs)
        for i, out in zip(recording.differentiable, outputs, strict=True):
            tensors[i] = out
        return rebuild(recording.template, iter(tensors))

    def _autocast(
        self, device_type: str, state: tuple[bool, torch.dtype] | None = None
    ) -> contextlib.AbstractContextManager[Any]:
        enabled, dtype = _autocast_state(device_type) if state is None else state
        if not enabled:
            return contextlib.nullcontext()
        return torch.autocast(device_type, dtype=dtype, cache_enabled=False)

    def native_backward(
        self, recording: Recording, params: tuple[Tensor, ...], grads: tuple[Tensor | None, ...]
    ) -> tuple[Tensor | None, ...]:
        """The backward of a step whose objective left some outputs without gradient, computed natively: put the
        buffers back to their pre-forward values, rerun the network eagerly on the same input (one buffer update,
        the same outputs) and differentiate only the used outputs; parameters reached only from unused outputs get
        no gradient (``None``, not zeros that would advance optimizer state)."""
        self.notices.fallback(
            "capture_network (a step with unused outputs)",
            "the objective left some network outputs without gradient; that step's backward is recomputed",
        )
        with torch.no_grad():
            for buffer, value in zip(recording.buffers, recording.snapshot, strict=True):
                buffer.copy_(value)
        device_type = recording.static_input.device.type
        with torch.enable_grad(), self._autocast(device_type, recording.autocast):
            outputs = flatten_tensors(self.model(recording.static_input))
            wanted = [outputs[i] for i in recording.differentiable]
            used = [(out, g) for out, g in zip(wanted, grads, strict=True) if g is not None]
            if not used:
                return tuple(None for _ in params)
            result = torch.autograd.grad(
                [out for out, _ in used], list(params), grad_outputs=[g for _, g in used], allow_unused=True
            )
        return tuple(result)

    def _record(self, images: Tensor, params: list[Tensor]) -> Recording:
        model = self.model
        buffers = list(model.buffers())
        saved = [b.detach().clone() for b in buffers]
        static_input = images.detach().clone()
        stream = torch.cuda.Stream(device=images.device)  # type: ignore[no-untyped-call]
        stream.wait_stream(torch.cuda.current_stream(images.device))
        try:
            with torch.cuda.stream(stream), self._autocast(images.device.type):
                for _ in range(WARMUP_ITERATIONS):
                    flat = flatten_tensors(model(static_input))
                    wanted = [t for t in flat if t.requires_grad]
                    torch.autograd.grad(
                        wanted, params, grad_outputs=[torch.zeros_like(t) for t in wanted], allow_unused=True
                    )
                    del flat, wanted
            torch.cuda.current_stream(images.device).wait_stream(stream)
        finally:
            with torch.no_grad():
                for buffer, value in zip(buffers, saved, strict=True):
                    buffer.copy_(value)
        # one private pool per recording: recordings replay in any order, so they must not share memory
        pool = torch.cuda.graph_pool_handle()
        forward_graph = torch.cuda.CUDAGraph()
        mode = "thread_local"  # data-loader threads may touch CUDA while this thread captures
        with (
            torch.cuda.graph(forward_graph, pool=pool, capture_error_mode=mode),
            self._autocast(images.device.type),
        ):
            with torch.no_grad():
                for value, buffer in zip(saved, buffers, strict=True):
                    value.copy_(buffer)  # the pre-forward snapshot, refreshed by every replay
            template = model(static_input)
        outputs = flatten_tensors(template)
        differentiable = [i for i, t in enumerate(outputs) if t.requires_grad]
        grad_outputs = [torch.empty_like(outputs[i]) for i in differentiable]
        backward_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(backward_graph, pool=pool, capture_error_mode=mode):
            grads = torch.autograd.grad(
                [outputs[i] for i in differentiable],
                params,
                grad_outputs=grad_outputs,
                only_inputs=True,
                allow_unused=True,
            )
        self.recorded += 1
        return Recording(
            forward_graph=forward_graph,
            backward_graph=backward_graph,
            static_input=static_input,
            template=template,
            outputs=[t.detach() for t in outputs],
            differentiable=differentiable,
            grad_outputs=grad_outputs,
            grads=list(grads),
            buffers=buffers,
            snapshot=saved,
            autocast=_autocast_state(images.device.type),
            param_ptrs=tuple(p.data_ptr() for p in params),
        )
