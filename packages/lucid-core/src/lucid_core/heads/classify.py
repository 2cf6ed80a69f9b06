"""Classification head: 1×1 :class:`~lucid_core.nn.conv.Conv` to ``hidden`` channels (BatchNorm, SiLU), global
average pooling, dropout, linear to ``num_classes``.

State-dict names follow shared/fixtures/classify_params.json ``layers_n.*.head.param_shapes``: ``conv.conv.weight``,
``conv.bn.*``, ``linear.weight``, ``linear.bias``. Train mode returns logits ``(B, nc)``, eval mode softmax
probabilities ``(B, nc)``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lucid_core.nn.conv import Conv

__all__ = ["CLASSIFY_HIDDEN", "ClassifyHead"]

#: Width of the 1×1 convolution before pooling, at every scale.
CLASSIFY_HIDDEN = 1280


class ClassifyHead(nn.Module):
    """Image-level class scores from the last backbone feature map (stride ``stride``).

    Has the attributes :class:`~lucid_core.models.YOLOModel` reads of any head: ``strides`` (the input level's
    stride), ``end2end`` (False), ``reg_max`` (0: no box distribution), ``deployed`` and ``to_deployed``.
    """

    end2end = False
    reg_max = 0

    def __init__(
        self,
        num_classes: int,
        in_channels: int,
        stride: int = 32,
        hidden: int = CLASSIFY_HIDDEN,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"ClassifyHead: dropout must be in [0, 1), got {dropout}")
        self.nc = num_classes
        self.in_channels = (in_channels,)
        self.strides = (int(stride),)
        self.conv = Conv(in_channels, hidden, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(p=dropout)
        self.linear = nn.Linear(hidden, num_classes)

    @property
    def deployed(self) -> bool:
        """Always False: a classifier has no training-only branch."""
        return False

    def to_deployed(self) -> None:
        raise ValueError("to_deployed: only end-to-end (yolo26) detection heads have a branch to drop")

    def forward(self, feats: list[Tensor] | Tensor, branch: str | None = None) -> Tensor:
        """Logits in train mode, probabilities (softmax over classes) in eval mode; ``branch`` is ignored."""
        x = feats[-1] if isinstance(feats, list | tuple) else feats
        logits: Tensor = self.linear(self.drop(self.pool(self.conv(x)).flatten(1)))
        return logits if self.training else torch.softmax(logits, dim=1)
