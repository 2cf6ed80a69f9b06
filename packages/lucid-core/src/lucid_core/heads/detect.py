"""Decoupled anchor-free detection head (box branch ``cv2``, class branch ``cv3``, optional one-to-one copy).

Layout and naming follow shared/weights/checkpoints.json: per level ``cv2.{i}`` = Conv3x3, Conv3x3, Conv2d 1x1 to
``4 * reg_max``; ``cv3.{i}`` = either plain Conv3x3, Conv3x3, Conv2d 1x1 (YOLOv8, ``depthwise_cls=False``) or two
depthwise-separable pairs ``(DWConv3x3, Conv1x1)`` then Conv2d 1x1 (YOLO11/YOLO26); ``dfl`` is the frozen DFL
integral (reg_max > 1). Widths: box ``max(16, ch0 // 4, 4 * reg_max)``, class ``max(ch0, min(nc, 100))``.
End-to-end heads (YOLO26) hold deep copies ``one2one_cv2`` / ``one2one_cv3`` (+ task branches) evaluated on
detached features (the one-to-one branch trains only the head).

Train mode returns :class:`~lucid_core.outputs.TrainOutput`; eval mode returns the dense decoded tensor
``(B, 4 + nc + extra, A)`` of shared/fixtures/README.md (``import_<checkpoint>.pt``, ``output_unfused``).
Initial biases (reference initialisation, :data:`BOX_BIAS_INIT` and :func:`class_bias_prior`): every box output
2.0, class ``log(5 / nc / (640 / stride) ** 2)``, in both branches of an end-to-end head.
"""

from __future__ import annotations

import copy
import math
from typing import Literal

import torch
from torch import Tensor, nn

from lucid_core.geometry.anchors import make_anchors
from lucid_core.nn.conv import Conv, DWConv
from lucid_core.nn.dfl import DFL
from lucid_core.outputs import BranchOutput, TrainOutput

DecodeBranch = Literal["one2one", "one2many"]
ONE2ONE_PREFIX = "one2one_"


def conv_stack(in_channels: int, hidden: int, out_channels: int) -> nn.Sequential:
    """Conv3x3 -> Conv3x3 -> Conv2d 1x1 (with bias): the plain per-level branch."""
    return nn.Sequential(
        Conv(in_channels, hidden, 3), Conv(hidden, hidden, 3), nn.Conv2d(hidden, out_channels, 1)
    )


def depthwise_cls_stack(in_channels: int, hidden: int, out_channels: int) -> nn.Sequential:
    """(DWConv3x3, Conv1x1) x 2 -> Conv2d 1x1: the YOLO11/YOLO26 class branch."""
    return nn.Sequential(
        nn.Sequential(DWConv(in_channels, in_channels, 3), Conv(in_channels, hidden, 1)),
        nn.Sequential(DWConv(hidden, hidden, 3), Conv(hidden, hidden, 1)),
        nn.Conv2d(hidden, out_channels, 1),
    )


#: Initial bias of every box-regression output (all families and tasks; one-to-one copies too). Measured black-box
#: on the reference 8.4.190 (the parameters of a freshly built model of every family and task, refbench venv): 2.0
#: (older releases used 1.0). With reg_max = 1 (YOLO26) it is the initial ltrb distance in strides.
BOX_BIAS_INIT = 2.0


def class_bias_prior(num_classes: int, stride: int, imgsz: int = 640) -> float:
    """Initial class logit: about 5 objects of ``num_classes`` classes per ``(imgsz / stride)²`` cells."""
    return math.log(5 / num_classes / (imgsz / stride) ** 2)


class DetectHead(nn.Module):
    """Detection head over ``len(in_channels)`` levels; subclasses add task branches via ``_build_extras``."""

    task_extras: tuple[str, ...] = ()

    def __init__(
        self,
        num_classes: int,
        in_channels: tuple[int, ...],
        strides: tuple[int, ...],
        reg_max: int = 16,
        depthwise_cls: bool = True,
        end2end: bool = False,
    ) -> None:
        super().__init__()
        if len(in_channels) != len(strides):
            raise ValueError(f"head: {len(in_channels)} input levels but {len(strides)} strides")
        self.nc = num_classes
        self.nl = len(in_channels)
        self.reg_max = reg_max
        self.in_channels = tuple(in_channels)
        self.strides = tuple(strides)
        self.end2end = end2end
        ch0 = in_channels[0]
        box_hidden = max(16, ch0 // 4, reg_max * 4)
        cls_hidden = max(ch0, min(num_classes, 100))
        self.cv2 = nn.ModuleList(conv_stack(c, box_hidden, 4 * reg_max) for c in in_channels)
        cls_stack = depthwise_cls_stack if depthwise_cls else conv_stack
        self.cv3 = nn.ModuleList(cls_stack(c, cls_hidden, num_classes) for c in in_channels)
        self.dfl: nn.Module = DFL(reg_max) if reg_max > 1 else nn.Identity()
        self._build_extras()
        self._init_biases()
        if end2end:
            for name in self.branch_module_names():
                self.add_module(ONE2ONE_PREFIX + name, copy.deepcopy(getattr(self, name)))

    # -- structure -------------------------------------------------------------------------------------------
    def _build_extras(self) -> None:
        """Register task branches (``cv4`` ...); the base detect head has none."""

    def branch_module_names(self) -> tuple[str, ...]:
        """Names of the per-branch modules (copied for the one-to-one branch of end-to-end heads)."""
        return ("cv2", "cv3")

    def training_only_module_names(self) -> tuple[str, ...]:
        """Modules (dotted, relative to the head) dropped by :meth:`to_deployed` besides the one-to-many branch."""
        return ()

    def auxiliary_module_names(self) -> tuple[str, ...]:
        """Training-only auxiliary outputs that the reference FLOP count does not include (see ``lucid_core.info``)."""
        return ()

    def _init_biases(self) -> None:
        with torch.no_grad():
            for box, cls, stride in zip(self.cv2, self.cv3, self.strides, strict=True):
                box_out, cls_out = box[-1], cls[-1]  # type: ignore[index]
                assert isinstance(box_out, nn.Conv2d) and isinstance(cls_out, nn.Conv2d)
                assert box_out.bias is not None and cls_out.bias is not None
                box_out.bias.fill_(BOX_BIAS_INIT)
                cls_out.bias[: self.nc].fill_(class_bias_prior(self.nc, stride))

    @property
    def deployed(self) -> bool:
        """True once :meth:`to_deployed` removed the one-to-many branch."""
        return not hasattr(self, "cv2")

    def to_deployed(self) -> None:
        """Deployed end-to-end form: delete the one-to-many branch and training-only parts (in place)."""
        if not self.end2end:
            raise ValueError("to_deployed: only end-to-end (yolo26) heads have a branch to drop")
        for name in (*self.branch_module_names(), *self.training_only_module_names()):
            parent_name, _, child = name.rpartition(".")
            parent = self.get_submodule(parent_name) if parent_name else self
            if hasattr(parent, child):
                delattr(parent, child)

    # -- forward ---------------------------------------------------------------------------------------------
    def _task_outputs(self, feats: list[Tensor], prefix: str) -> dict[str, Tensor]:
        """Per-task extra outputs (each (B, C, A), raw) of the branch whose modules start with ``prefix``."""
        return {}

    def _branch(self, feats: list[Tensor], prefix: str) -> BranchOutput:
        box_mods: nn.ModuleList = getattr(self, prefix + "cv2")
        cls_mods: nn.ModuleList = getattr(self, prefix + "cv3")
        boxes = torch.cat([m(f).flatten(2) for m, f in zip(box_mods, feats, strict=True)], 2)
        scores = torch.cat([m(f).flatten(2) for m, f in zip(cls_mods, feats, strict=True)], 2)
        return BranchOutput(boxes=boxes, scores=scores, extras=self._task_outputs(feats, prefix))

    def _aux(self, feats: list[Tensor]) -> tuple[Tensor | None, Tensor | None]:
        """``(proto, semseg)`` of segmentation heads; ``(None, None)`` otherwise."""
        return None, None

    def forward(
        self, feats: list[Tensor], branch: DecodeBranch | None = None
    ) -> TrainOutput | Tensor | tuple[Tensor, Tensor]:
        """Training mode: both branches' raw outputs. Eval mode: the decoded dense tensor of ``branch``.

        ``branch`` (eval only): ``"one2one"`` (the default of end-to-end heads, and the only one a deployed head
        has) or ``"one2many"``; heads without a one-to-one branch always decode their single branch.
        """
        level_shapes = [(f.shape[-2], f.shape[-1]) for f in feats]  # traced sizes when exporting
        if self.training:
            one2many = self._branch(feats, "")
            one2one = self._branch([f.detach() for f in feats], ONE2ONE_PREFIX) if self.end2end else None
            proto, semseg = self._aux(feats)
            return TrainOutput(one2many, one2one, level_shapes, self.strides, proto=proto, semseg=semseg)
        if branch not in (None, "one2one", "one2many"):
            raise ValueError(f"head: branch must be None, 'one2one' or 'one2many', got {branch!r}")
        use_one2one = self.end2end and (branch != "one2many" or self.deployed)
        decoded = self.decode(self._branch(feats, ONE2ONE_PREFIX if use_one2one else ""), level_shapes)
        proto, _ = self._aux(feats)
        return (decoded, proto) if proto is not None else decoded

    # -- decoding --------------------------------------------------------------------------------------------
    def distances(self, boxes: Tensor) -> Tensor:
        """(B, 4, A) side distances in grid units (DFL expectation for reg_max > 1)."""
        return self.dfl(boxes) if self.reg_max > 1 else boxes

    def decode_boxes(
        self, dist: Tensor, anchors: Tensor, stride: Tensor, extras: dict[str, Tensor]
    ) -> Tensor:
        """Centre/size boxes in pixels: (B, 4, A) from distances (B, 4, A), anchors (2, A), strides (1, A)."""
        lt, rb = dist.chunk(2, 1)
        x1y1 = anchors - lt
        x2y2 = anchors + rb
        return torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * stride

    def decode_extras(self, extras: dict[str, Tensor], anchors: Tensor, stride: Tensor) -> list[Tensor]:
        """Decoded task rows appended after the class probabilities."""
        return []

    def decode(self, branch: BranchOutput, level_shapes: list[tuple[int, int]]) -> Tensor:
        """Dense decoded tensor ``(B, 4 + nc + extra, A)`` (shared/fixtures/README.md, ``output_unfused``)."""
        anchor_points, stride_tensor = make_anchors(
            level_shapes, self.strides, dtype=branch.boxes.dtype, device=branch.boxes.device
        )
        anchors, stride = anchor_points.T, stride_tensor.T
        box = self.decode_boxes(self.distances(branch.boxes), anchors, stride, branch.extras)
        rows = [box, branch.scores.sigmoid(), *self.decode_extras(branch.extras, anchors, stride)]
        return torch.cat(rows, 1)
