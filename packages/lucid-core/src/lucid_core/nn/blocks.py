"""CSP-style feature blocks: ``Bottleneck``, ``C2f`` (YOLOv8), ``C3k`` / ``C3k2`` (YOLO11/YOLO26) and ``SPPF``.

Channel bookkeeping and sub-module names (``cv1``, ``cv2``, ``cv3``, ``m.{i}``) follow the reference state-dict
layout listed in shared/weights/checkpoints.json; the per-layer parameter counts in
shared/fixtures/model_params.json (``layers_n``) pin every hidden width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lucid_core.nn.attention import PSABlock
from lucid_core.nn.conv import Conv


class Bottleneck(nn.Module):
    """Two convolutions ``k[0]`` then ``k[1]`` with hidden width ``int(out * expansion)``; residual if shapes allow."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        shortcut: bool = True,
        kernels: tuple[int, int] = (3, 3),
        expansion: float = 0.5,
    ) -> None:
        super().__init__()
        hidden = int(out_channels * expansion)
        self.cv1 = Conv(in_channels, hidden, kernels[0])
        self.cv2 = Conv(hidden, out_channels, kernels[1])
        self.add = shortcut and in_channels == out_channels

    def forward(self, x: Tensor) -> Tensor:
        y: Tensor = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    """Split-concat CSP block: ``cv1`` to 2c channels, chunk, run ``n`` blocks on the last chunk, concat all, ``cv2``."""

    def __init__(
        self, in_channels: int, out_channels: int, n: int = 1, shortcut: bool = False, expansion: float = 0.5
    ) -> None:
        super().__init__()
        self.c = int(out_channels * expansion)
        self.cv1 = Conv(in_channels, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, out_channels, 1)
        self.m = nn.ModuleList(self._inner_block(shortcut) for _ in range(n))

    def _inner_block(self, shortcut: bool) -> nn.Module:
        return Bottleneck(self.c, self.c, shortcut, (3, 3), expansion=1.0)

    def forward(self, x: Tensor) -> Tensor:
        ys = list(self.cv1(x).chunk(2, 1))
        for block in self.m:
            ys.append(block(ys[-1]))
        out: Tensor = self.cv2(torch.cat(ys, 1))
        return out


class C3k(nn.Module):
    """CSP block with two 1x1 stems (``cv1``/``cv2``), ``n`` bottlenecks of kernel k on the first, fused by ``cv3``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        n: int = 2,
        shortcut: bool = True,
        expansion: float = 0.5,
        kernel_size: int = 3,
    ) -> None:
        super().__init__()
        hidden = int(out_channels * expansion)
        self.cv1 = Conv(in_channels, hidden, 1)
        self.cv2 = Conv(in_channels, hidden, 1)
        self.cv3 = Conv(2 * hidden, out_channels, 1)
        self.m = nn.Sequential(
            *(Bottleneck(hidden, hidden, shortcut, (kernel_size, kernel_size), 1.0) for _ in range(n))
        )

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))
        return out


class C3k2(C2f):
    """:class:`C2f` whose inner blocks are ``C3k`` (``c3k=True``) or bottlenecks; ``attn`` appends a PSA block.

    ``attn=True`` (YOLO26's last neck block) makes each inner block ``Sequential(Bottleneck, PSABlock)``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        n: int = 1,
        c3k: bool = False,
        expansion: float = 0.5,
        shortcut: bool = True,
        attn: bool = False,
    ) -> None:
        self._c3k = c3k
        self._attn = attn
        super().__init__(in_channels, out_channels, n, shortcut, expansion)

    def _inner_block(self, shortcut: bool) -> nn.Module:
        if self._attn:
            return nn.Sequential(
                Bottleneck(self.c, self.c, shortcut),
                PSABlock(self.c, attn_ratio=0.5, num_heads=max(self.c // 64, 1)),
            )
        if self._c3k:
            return C3k(self.c, self.c, 2, shortcut)
        return Bottleneck(self.c, self.c, shortcut)


class SPPF(nn.Module):
    """Spatial pyramid pooling, fast: 1x1 reduce to ``in/2``, ``n`` chained max-pools, concat, 1x1 to ``out``.

    ``shortcut`` (YOLO26) adds the input to the output when the channel counts agree, and its 1x1 reduction has no
    activation (``cv1.act`` is ``Identity`` in the reference YOLO26 checkpoint ``shared/weights/yolo26n-seg-shapes.pt``;
    with it the import reproduces ``fixtures/import_yolo26n-seg-shapes.pt`` to 1.5e-5 px instead of 2.2 px).
    """

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int = 5, n: int = 3, shortcut: bool = False
    ) -> None:
        super().__init__()
        hidden = in_channels // 2
        self.cv1 = Conv(in_channels, hidden, 1, act=not shortcut)
        self.cv2 = Conv(hidden * (n + 1), out_channels, 1)
        self.m = nn.MaxPool2d(kernel_size, 1, kernel_size // 2)
        self.n = n
        self.add = shortcut and in_channels == out_channels

    def forward(self, x: Tensor) -> Tensor:
        ys = [self.cv1(x)]
        for _ in range(self.n):
            ys.append(self.m(ys[-1]))
        y: Tensor = self.cv2(torch.cat(ys, 1))
        return x + y if self.add else y
