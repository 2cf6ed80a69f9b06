"""Building blocks: shapes, parameter structure, DFL integral, RealNVP flow and Conv+BN folding."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lucid_core.nn.attention import C2PSA, Attention
from lucid_core.nn.blocks import SPPF, C2f, C3k, C3k2
from lucid_core.nn.conv import Conv, DWConv
from lucid_core.nn.dfl import DFL
from lucid_core.nn.flow import RealNVP
from lucid_core.nn.fuse import fold_batchnorm
from lucid_core.nn.proto import MultiScaleProto, Proto


def test_conv_unit_is_conv_bn_silu_with_reference_bn_settings() -> None:
    conv = Conv(8, 16, 3, 2)
    assert conv.conv.bias is None
    assert conv.bn.eps == 1e-3 and conv.bn.momentum == 0.03
    assert isinstance(conv.act, nn.SiLU)
    assert conv(torch.rand(1, 8, 10, 10)).shape == (1, 16, 5, 5)
    assert DWConv(16, 32, 3).conv.groups == 16


@pytest.mark.parametrize(
    "block",
    [
        C2f(16, 32, 2, shortcut=True),
        C3k(16, 32),
        C3k2(16, 32, 1, c3k=True),
        C3k2(32, 32, 1, attn=True),
        SPPF(32, 16),
    ],
    ids=["C2f", "C3k", "C3k2-c3k", "C3k2-attn", "SPPF"],
)
def test_blocks_keep_resolution(block: nn.Module) -> None:
    x = torch.rand(2, block.cv1.conv.in_channels, 12, 10)  # type: ignore[union-attr]
    y = block(x)
    assert y.shape == (2, block.cv2.conv.out_channels if not isinstance(block, C3k) else 32, 12, 10)  # type: ignore[union-attr]


def test_sppf_shortcut_adds_the_input() -> None:
    plain, residual = SPPF(16, 16), SPPF(16, 16, shortcut=True)
    residual.load_state_dict(plain.state_dict())
    plain.eval(), residual.eval()
    # the YOLO26 (shortcut) variant's 1x1 reduction has no activation (reference checkpoint yolo26n-seg-shapes.pt)
    assert isinstance(residual.cv1.act, nn.Identity) and not isinstance(plain.cv1.act, nn.Identity)
    plain.cv1.act = nn.Identity()
    x = torch.rand(1, 16, 8, 8)
    torch.testing.assert_close(residual(x), plain(x) + x)


def test_attention_is_permutation_equivariant_apart_from_the_positional_conv() -> None:
    attn = Attention(64, num_heads=1).eval()
    with torch.no_grad():
        attn.pe.conv.weight.zero_()
        attn.pe.bn.bias.zero_()
    x = torch.rand(1, 64, 1, 6)
    perm = torch.tensor([3, 1, 5, 0, 2, 4])
    out = attn(x)
    torch.testing.assert_close(attn(x[..., perm]), out[..., perm], rtol=1e-5, atol=1e-5)
    assert C2PSA(128, 128).m[0].attn.num_heads == 1  # type: ignore[union-attr]


def test_dfl_is_a_frozen_expectation_over_bins() -> None:
    dfl = DFL(16)
    assert sum(p.numel() for p in dfl.parameters()) == 16
    assert not any(p.requires_grad for p in dfl.parameters())
    logits = torch.full((1, 64, 3), -1e4)
    logits[0, 5, 0] = 0.0  # side 0 -> bin 5
    logits[0, 16 + 2, 0] = logits[0, 16 + 3, 0] = 0.0  # side 1 -> 2.5
    dist = dfl(logits)
    assert dist.shape == (1, 4, 3)
    assert dist[0, 0, 0].item() == pytest.approx(5.0)
    assert dist[0, 1, 0].item() == pytest.approx(2.5)


def test_realnvp_has_the_rle_size_and_a_normalised_density() -> None:
    torch.manual_seed(0)
    flow = RealNVP()
    assert sum(p.numel() for p in flow.parameters()) == 53_784
    assert flow.mask.tolist() == [[0, 1], [1, 0]] * 3
    # the density integrates to ~1 over a wide grid
    g = torch.linspace(-8, 8, 321)
    grid = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).view(-1, 2)
    with torch.no_grad():
        mass = flow.log_prob(grid).exp().sum() * (g[1] - g[0]) ** 2
    assert mass.item() == pytest.approx(1.0, abs=0.02)
    loss = -flow.log_prob(torch.randn(8, 2)).mean()
    loss.backward()
    assert flow.s[0][0].weight.grad is not None


def test_realnvp_starts_with_near_zero_weights_and_default_biases() -> None:
    """Linear weights Xavier-uniform with gain 0.01 (the reference's flow at initialisation, measured black box:
    docs/TRAINING.md "Initialisation, checked black box"), biases PyTorch's default U(±1/sqrt(fan_in))."""
    torch.manual_seed(0)
    flow = RealNVP()
    linears = [m for m in flow.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 36
    for layer in linears:
        fan_out, fan_in = layer.weight.shape
        bound = 0.01 * math.sqrt(6 / (fan_in + fan_out))
        assert layer.weight.abs().max().item() <= bound
        assert layer.weight.abs().max().item() > 0.8 * bound  # drawn over the whole range, not zero
        if layer.bias.numel() > 8:
            assert layer.bias.abs().max().item() > 0.8 / math.sqrt(fan_in)


def test_proto_shapes() -> None:
    assert Proto(16, 32, 8)(torch.rand(1, 16, 6, 5)).shape == (1, 8, 12, 10)
    proto, semseg = MultiScaleProto((16, 32, 64), 16, 8, 3)(
        [torch.rand(1, 16, 8, 8), torch.rand(1, 32, 4, 4), torch.rand(1, 64, 2, 2)], with_semseg=True
    )
    assert proto.shape == (1, 8, 16, 16)
    assert semseg is not None and semseg.shape == (1, 3, 8, 8)


def test_multiscale_semantic_branch_reads_the_summed_feature_before_the_fuse() -> None:
    """The reference's semantic loss of its own checkpoint is reproduced only with this wiring (docs/TRAINING.md,
    "Step parity"): the 3x3 fuse feeds the prototypes alone."""
    torch.manual_seed(0)
    head = MultiScaleProto((16, 32, 64), 16, 8, 3)
    feats = [torch.rand(1, 16, 8, 8), torch.rand(1, 32, 4, 4), torch.rand(1, 64, 2, 2)]
    proto, semseg = head(feats, with_semseg=True)
    assert semseg is not None
    torch.testing.assert_close(semseg, head.semseg(head.summed_feature(feats)))
    with torch.no_grad():
        head.feat_fuse.conv.weight.mul_(-3.0)  # a different fuse moves the prototypes, not the semantic map
    proto2, semseg2 = head(feats, with_semseg=True)
    assert not torch.allclose(proto, proto2)
    assert semseg2 is not None
    torch.testing.assert_close(semseg2, semseg)


def test_fold_batchnorm_equals_conv_then_bn() -> None:
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(4, 6, 3, padding=1, groups=2, bias=False), nn.BatchNorm2d(6, eps=1e-3)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)  # type: ignore[union-attr]
        bn.running_var.uniform_(0.5, 2)  # type: ignore[union-attr]
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    bn.eval()
    x = torch.rand(2, 4, 7, 7)
    torch.testing.assert_close(fold_batchnorm(conv, bn)(x), bn(conv(x)), rtol=1e-5, atol=1e-5)
