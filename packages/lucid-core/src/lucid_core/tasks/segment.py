"""Instance segmentation: boxes plus per-instance masks from prototypes and coefficients."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from torch import Tensor

from lucid_core.decode.masks import assemble_masks, assemble_masks_retina
from lucid_core.geometry.letterbox import LetterboxInfo, scale_boxes_back
from lucid_core.heads.segment import SegmentHead
from lucid_core.loss.terms.segment import SegmentLoss, segment_objective
from lucid_core.results import Detections
from lucid_core.tasks.base import DecodeLayout, Task, int_attribute

if TYPE_CHECKING:
    from lucid_core.interop.unpickler import StandInModule
    from lucid_core.models.config import ModelConfig, ScaleRow
    from lucid_core.models.family import FamilySpec

__all__ = ["SEGMENT", "SegmentTask"]


class SegmentTask(Task):
    """Masks: ``num_masks`` coefficient rows decoded against the prototypes; empty masks are dropped."""

    def configure(self, config: ModelConfig, options: Mapping[str, Any]) -> None:
        config.num_masks = int(options.get("num_masks", 32))

    def build_head(
        self, common: dict[str, Any], config: ModelConfig, family: FamilySpec, row: ScaleRow
    ) -> SegmentHead:
        assert config.num_masks is not None
        return SegmentHead(
            **common,
            num_masks=config.num_masks,
            proto_channels=row.channels(family.proto_channels),
            multiscale_proto=family.multiscale_proto,
        )

    def branch_objective(self, model: Any, *, one2one: bool, **options: Any) -> SegmentLoss:
        return segment_objective(model, one2one=one2one, **options)

    def decode_layout(
        self,
        extra: int,
        *,
        kpt_shape: tuple[int, int] | None,
        proto: Tensor | None,
        input_hw: tuple[int, int] | None,
    ) -> tuple[int | None, DecodeLayout]:
        if proto is None:
            raise ValueError("postprocess: task 'segment' needs proto (B, nm, Hp, Wp)")
        if input_hw is None:
            input_hw = (int(proto.shape[2]) * 4, int(proto.shape[3]) * 4)
        return int(proto.shape[1]), DecodeLayout(kpt_shape, input_hw)

    def attach(
        self,
        det: Detections,
        extras: Tensor,
        *,
        index: int,
        proto: Tensor | None,
        layout: DecodeLayout,
        retina_letterbox: LetterboxInfo | None,
    ) -> Detections:
        assert proto is not None and layout.input_hw is not None
        if retina_letterbox is not None:
            orig_boxes = scale_boxes_back(det.boxes, retina_letterbox)
            det.masks = assemble_masks_retina(proto[index], extras, orig_boxes, retina_letterbox)
        else:
            det.masks = assemble_masks(proto[index], extras, det.boxes, layout.input_hw)
        nonempty = det.masks.flatten(1).any(1)
        if bool(nonempty.all()):
            return det
        # a detection whose cropped mask is empty is dropped (the reference predictor's rule)
        return Detections(
            boxes=det.boxes[nonempty],
            scores=det.scores[nonempty],
            labels=det.labels[nonempty],
            masks=det.masks[nonempty],
        )

    def reference_options(
        self, head: StandInModule, state: Mapping[str, Tensor], head_prefix: str
    ) -> dict[str, Any]:
        nm = int_attribute(head, "nm")
        if nm is None and f"{head_prefix}cv4.0.2.weight" in state:
            nm = int(state[f"{head_prefix}cv4.0.2.weight"].shape[0])
        return {"num_masks": nm} if nm is not None else {}


SEGMENT = SegmentTask(
    name="segment",
    suffix="-seg",
    options=(("num_masks", 32),),
    iou_types=("bbox", "segm"),
    target_fields=("masks",),
    reference_head="Segment",
)
