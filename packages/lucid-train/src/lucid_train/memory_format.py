"""The training network's memory format when ``--model.channels_last`` is not given (issue 18, the CPU step).

On the CPU, PyTorch's oneDNN convolutions work in NHWC: a contiguous (NCHW) network pays layout conversions around
its convolutions, forward and backward (the forward of a yolo26n bs8@640 step ~0.5 s contiguous against ~0.34 s
channels-last on the Zen 5 machine, ``tools/bench/train.py --step --profile``), that a channels-last one does not. Measured side
by side with the reference's training step (``tools/bench/train.py --step --threads 2 --sizes 640 --vs-reference
--pairs 3``, yolo26n and yolo11n at bs8@640, median ours / reference step time, lower is better), over the four
machine classes it was run on: contiguous 0.87-1.19x, channels-last 0.67-0.98x (docs/benchmarks.md). The two
layouts compute the same step up to float rounding (loss within 1e-5 relative, ``tests/train/test_train_compile.py``);
over 8 + 4 + 4 + 4 seeds of the trajectory recipe on four machine classes their curves are indistinguishable
(docs/TRAINING.md).

Off on CUDA (not measured here: the reference trains NCHW there) and under ``--model.compile`` (inductor picks its
own layouts; its figures were measured contiguous).
"""

from __future__ import annotations

__all__ = ["resolve_channels_last"]


def resolve_channels_last(option: bool | None, device_type: str, *, compile: bool = False) -> bool:
    """``option`` when given; else channels-last exactly when training on the CPU without ``torch.compile``."""
    if option is not None:
        return bool(option)
    return device_type == "cpu" and not compile
