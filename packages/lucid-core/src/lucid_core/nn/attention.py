"""Position-sensitive attention (YOLOv10 paper, Wang et al. 2024, "PSA"): ``Attention``, ``PSABlock``, ``C2PSA``.

Multi-head self-attention over the H·W positions of a feature map with a depthwise 3x3 positional encoding on
the values. Names (``qkv``, ``proj``, ``pe``, ``attn``, ``ffn``) follow shared/weights/checkpoints.json.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lucid_core.nn.conv import Conv


class Attention(nn.Module):
    """Multi-head attention with key width ``head_dim * attn_ratio`` and a depthwise positional encoding."""

    def __init__(self, dim: int, num_heads: int = 8, attn_ratio: float = 0.5) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"Attention: dim={dim} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.key_dim = int(self.head_dim * attn_ratio)
        self.scale = self.key_dim**-0.5
        qkv_channels = dim + 2 * self.key_dim * num_heads
        self.qkv = Conv(dim, qkv_channels, 1, act=False)
        self.proj = Conv(dim, dim, 1, act=False)
        self.pe = Conv(dim, dim, 3, groups=dim, act=False)

    def forward(self, x: Tensor) -> Tensor:
        b, c, h, w = x.shape
        n = h * w
        qkv = self.qkv(x).view(b, self.num_heads, 2 * self.key_dim + self.head_dim, n)
        q, k, v = qkv.split([self.key_dim, self.key_dim, self.head_dim], dim=2)
        attn = ((q.transpose(-2, -1) @ k) * self.scale).softmax(dim=-1)  # (b, heads, n, n)
        out = (v @ attn.transpose(-2, -1)).view(b, c, h, w) + self.pe(v.reshape(b, c, h, w))
        projected: Tensor = self.proj(out)
        return projected


class PSABlock(nn.Module):
    """Attention then a 2x feed-forward (1x1 convs), each with a residual connection."""

    def __init__(self, dim: int, attn_ratio: float = 0.5, num_heads: int = 4, shortcut: bool = True) -> None:
        super().__init__()
        self.attn = Attention(dim, num_heads=num_heads, attn_ratio=attn_ratio)
        self.ffn = nn.Sequential(Conv(dim, dim * 2, 1), Conv(dim * 2, dim, 1, act=False))
        self.add = shortcut

    def forward(self, x: Tensor) -> Tensor:
        attended: Tensor = self.attn(x)
        x = x + attended if self.add else attended
        fed: Tensor = self.ffn(x)
        return x + fed if self.add else fed


class C2PSA(nn.Module):
    """CSP wrapper: ``cv1`` splits into two halves, ``n`` PSA blocks run on the second, ``cv2`` fuses them."""

    def __init__(self, in_channels: int, out_channels: int, n: int = 1, expansion: float = 0.5) -> None:
        super().__init__()
        if in_channels != out_channels:
            raise ValueError(f"C2PSA needs in_channels == out_channels, got {in_channels} != {out_channels}")
        self.c = int(in_channels * expansion)
        self.cv1 = Conv(in_channels, 2 * self.c, 1)
        self.cv2 = Conv(2 * self.c, in_channels, 1)
        self.m = nn.Sequential(
            *(PSABlock(self.c, attn_ratio=0.5, num_heads=max(self.c // 64, 1)) for _ in range(n))
        )

    def forward(self, x: Tensor) -> Tensor:
        a, b = self.cv1(x).split((self.c, self.c), dim=1)
        out: Tensor = self.cv2(torch.cat((a, self.m(b)), 1))
        return out
