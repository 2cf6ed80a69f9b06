"""Fused assignment kernels (``--accel.fused_assignment``) equal the eager assigner exactly (issue 19).

The kernels run under ``TRITON_INTERPRET=1`` on the CPU and are compared with ``lucid_core``'s eager
``TaskAlignedAssigner`` (and its stage expressions) with ``torch.equal`` on random batches and edge cases: no
positives, all background, ties, degenerate boxes, an empty batch; plus the public fixture's inputs.

Shapes are whole multiples of 16 elements: this torch build's CPU ``pow`` is position dependent (a vectorised
body and a scalar tail that use different ``powf`` implementations), so only tail-free tensors have one eager
value per input (on a GPU every element takes the same ``powf``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from lucid_accel.assign import FusedAssigner, fuse_assigners
from lucid_accel.notices import AccelFallbackWarning, FallbackNotices
from lucid_core.assign import TaskAlignedAssigner

pytest.importorskip("triton")

from lucid_accel.kernels import assign as kernels

VARIANTS: dict[str, dict[str, Any]] = {
    "classic": {"topk": 10},
    "small_target": {"topk": 10, "small_target_stride": 16.0},
    "one_to_one": {"topk": 7, "topk2": 1, "small_target_stride": 16.0},
}
STRIDES = (8, 16, 32)
IMGSZ = 128  # 336 anchors: every (B, M, A) grid is a multiple of 16 elements


@pytest.fixture(autouse=True)
def _interpret(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    yield


def _anchors(imgsz: int = IMGSZ) -> torch.Tensor:
    points = []
    for s in STRIDES:
        n = imgsz // s
        ys, xs = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
        points.append(torch.stack(((xs + 0.5) * s, (ys + 0.5) * s), -1).reshape(-1, 2).float())
    return torch.cat(points)


def _batch(seed: int, batch: int = 3, rows: int = 6, classes: int = 5) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    anchors = _anchors()
    num_anchors = anchors.shape[0]
    xy = torch.rand(batch, rows, 2, generator=gen) * (IMGSZ - 8)
    wh = torch.rand(batch, rows, 2, generator=gen) * 40 + 1
    gt = torch.cat((xy, xy + wh), -1)
    mask = (torch.rand(batch, rows, 1, generator=gen) > 0.25).float()
    gt = gt * mask
    centres = (
        anchors.unsqueeze(0).expand(batch, -1, -1) + torch.randn(batch, num_anchors, 2, generator=gen) * 3
    )
    sizes = torch.rand(batch, num_anchors, 2, generator=gen) * 24 + 2
    return {
        "pd_scores": torch.rand(batch, num_anchors, classes, generator=gen),
        "pd_bboxes": torch.cat((centres - sizes / 2, centres + sizes / 2), -1),
        "anc_points": anchors,
        "gt_labels": torch.randint(0, classes, (batch, rows, 1), generator=gen).float(),
        "gt_bboxes": gt,
        "mask_gt": mask,
    }


def _edge_cases() -> dict[str, dict[str, torch.Tensor]]:
    cases: dict[str, dict[str, torch.Tensor]] = {}
    base = _batch(1)
    # all background: every row is padding
    cases["all_background"] = {
        **base,
        "gt_bboxes": torch.zeros_like(base["gt_bboxes"]),
        "mask_gt": torch.zeros_like(base["mask_gt"]),
    }
    # no positives: real rows whose boxes contain no anchor point (outside the image / between anchors)
    far = base["gt_bboxes"].clone()
    far[..., :2] = 1000.0
    far[..., 2:] = 1001.0
    cases["no_positives"] = {**base, "gt_bboxes": far, "mask_gt": torch.ones_like(base["mask_gt"])}
    # degenerate boxes: zero width, zero height, inverted corners, a point
    degenerate = base["gt_bboxes"].clone()
    degenerate[:, 0, 2] = degenerate[:, 0, 0]
    degenerate[:, 1, 3] = degenerate[:, 1, 1]
    degenerate[:, 2, :2], degenerate[:, 2, 2:] = base["gt_bboxes"][:, 2, 2:], base["gt_bboxes"][:, 2, :2]
    degenerate[:, 3, 2:] = degenerate[:, 3, :2]
    cases["degenerate_boxes"] = {**base, "gt_bboxes": degenerate, "mask_gt": torch.ones_like(base["mask_gt"])}
    # ties: duplicated rows (same box, same class) and constant scores / identical predictions
    tied = base["gt_bboxes"].clone()
    tied[:, 1] = tied[:, 0]
    labels = base["gt_labels"].clone()
    labels[:, 1] = labels[:, 0]
    same_box = torch.tensor([4.0, 4.0, 40.0, 40.0]).expand_as(base["pd_bboxes"]).clone()
    cases["ties"] = {
        **base,
        "gt_bboxes": tied,
        "gt_labels": labels,
        "mask_gt": torch.ones_like(base["mask_gt"]),
        "pd_scores": torch.full_like(base["pd_scores"], 0.5),
        "pd_bboxes": same_box,
    }
    # an image without ground truth inside a batch with rows; one row per image
    single = _batch(2, rows=1)
    single["mask_gt"][1] = 0
    single["gt_bboxes"][1] = 0
    cases["one_row_and_empty_image"] = single
    return cases


def _assigners(name: str, classes: int = 5) -> tuple[TaskAlignedAssigner, FusedAssigner, FallbackNotices]:
    eager = TaskAlignedAssigner(num_classes=classes, **VARIANTS[name])
    notices = FallbackNotices()
    return eager, FusedAssigner(eager, notices), notices


def _assert_same(result: Any, expected: Any) -> None:
    for field in expected._fields:
        got, want = getattr(result, field), getattr(expected, field)
        assert got.dtype == want.dtype and got.shape == want.shape, field
        assert torch.equal(got, want), f"{field} differs"


def _run(assigner: Any, inputs: dict[str, torch.Tensor]) -> Any:
    keys = ("pd_scores", "pd_bboxes", "anc_points", "gt_labels", "gt_bboxes", "mask_gt")
    return assigner(*(inputs[k] for k in keys))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("seed", [0, 7])
def test_fused_assigner_equals_eager_on_random_batches(variant: str, seed: int) -> None:
    eager, fused, notices = _assigners(variant)
    inputs = _batch(seed)
    _assert_same(_run(fused, inputs), _run(eager, inputs))
    assert not notices.reasons, notices.reasons  # the kernels ran (no fallback)


@pytest.mark.parametrize("case", sorted(_edge_cases()))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fused_assigner_equals_eager_on_edge_cases(case: str, variant: str) -> None:
    eager, fused, notices = _assigners(variant)
    inputs = _edge_cases()[case]
    expected = _run(eager, inputs)
    _assert_same(_run(fused, inputs), expected)
    assert not notices.reasons, notices.reasons
    if case in ("all_background", "no_positives"):
        assert not expected.fg_mask.any()


def test_empty_batch_takes_the_native_constants() -> None:
    eager, fused, _ = _assigners("classic")
    inputs = _batch(3)
    inputs.update(
        gt_labels=torch.zeros(3, 0, 1), gt_bboxes=torch.zeros(3, 0, 4), mask_gt=torch.zeros(3, 0, 1)
    )
    _assert_same(_run(fused, inputs), _run(eager, inputs))


@pytest.mark.parametrize("exponents", [(0.5, 6.0), (1.0, 2.0), (3.0, 0.0), (0.25, 1.5)])
def test_metric_kernel_mirrors_tensor_pow(exponents: tuple[float, float]) -> None:
    alpha, beta = exponents
    gen = torch.Generator().manual_seed(5)
    scores = torch.rand(2, 3, 704, generator=gen)
    overlaps = torch.rand(2, 3, 704, generator=gen) * (torch.rand(2, 3, 704, generator=gen) > 0.3)
    expected = scores.pow(alpha) * overlaps.pow(beta)
    assert torch.equal(kernels.alignment_metric(scores, overlaps, alpha, beta), expected)


def test_conflict_kernel_first_maximum_and_nan_like_argmax() -> None:
    gen = torch.Generator().manual_seed(9)
    overlaps = torch.rand(2, 4, 300, generator=gen)
    overlaps[:, 2] = overlaps[:, 0]  # exact ties: the first row wins
    overlaps[0, 3, :50] = float("nan")  # NaN is argmax's maximum
    overlaps[0, 1, 25:50] = float("nan")
    in_topk = (torch.rand(2, 4, 300, generator=gen) > 0.4).float()
    candidate = (torch.rand(2, 4, 300, generator=gen) > 0.2).float()
    mask = in_topk * candidate
    best = torch.nn.functional.one_hot(overlaps.argmax(1), 4).float().permute(0, 2, 1)
    expected = torch.where(mask.sum(1, keepdim=True) > 1, best, mask)
    assert torch.equal(kernels.resolve_conflicts(in_topk, candidate, overlaps), expected)


def test_cpu_without_interpreter_warns_once_and_stays_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    eager, fused, notices = _assigners("small_target")
    inputs = _batch(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            _assert_same(_run(fused, inputs), _run(eager, inputs))
    accel = [w for w in caught if issubclass(w.category, AccelFallbackWarning)]
    assert len(accel) == 1 and "fused_assignment" in str(accel[0].message)
    assert "device cpu" in notices.reasons["fused_assignment"]


def test_float64_input_falls_back() -> None:
    eager, fused, notices = _assigners("classic")
    inputs = {k: v.double() for k, v in _batch(5).items()}
    with pytest.warns(AccelFallbackWarning, match="float32"):
        _assert_same(_run(fused, inputs), _run(eager, inputs))
    assert "float64" in notices.reasons["fused_assignment"]


def test_fuse_assigners_replaces_both_yolo26_branches() -> None:
    from lucid_core.loss import E2EDetectionLoss

    loss = E2EDetectionLoss(num_classes=5)
    assert fuse_assigners(loss, FallbackNotices()) == 2
    assert isinstance(loss.one2many.assigner, FusedAssigner)
    assert isinstance(loss.one2one.assigner, FusedAssigner)
    assert loss.one2one.assigner.topk2 == 1  # attributes forward to the wrapped assigner
    inner = loss.one2many.assigner.inner
    assert fuse_assigners(loss, FallbackNotices()) == 2  # a second fit re-attaches without wrapping twice
    assert loss.one2many.assigner.inner is inner


@pytest.mark.shared
@pytest.mark.slow  # ~35 s of interpreted kernels on 8400 anchors
def test_fused_assigner_equals_eager_on_the_public_fixture(shared_dir: Path) -> None:
    fx: dict[str, Any] = torch.load(
        shared_dir / "fixtures" / "assigner_public.pt", weights_only=True, map_location="cpu"
    )
    inputs = {k: v for k, v in fx["inputs"].items() if k != "stride_tensor"}
    inputs["pd_scores"] = inputs["pd_scores"].float()
    for name, case in fx["variants"].items():
        params = case["params"]
        eager = TaskAlignedAssigner(
            topk=params["topk"],
            num_classes=params["num_classes"],
            alpha=params["alpha"],
            beta=params["beta"],
            eps=params["eps"],
            topk2=params["topk2"],
            small_target_stride=params["stride_val"] if params["small_box_expansion"] else None,
        )
        notices = FallbackNotices()
        _assert_same(_run(FusedAssigner(eager, notices), inputs), _run(eager, inputs))
        assert not notices.reasons, (name, notices.reasons)


@pytest.mark.parametrize("method", ["__call__", "assign"])
def test_an_assigner_with_its_own_pipeline_stays_native(method: str) -> None:
    def own(self: TaskAlignedAssigner, *args: Any, **kwargs: Any) -> Any:
        return getattr(super(OwnPipeline, self), method)(*args, **kwargs)

    OwnPipeline = type("OwnPipeline", (TaskAlignedAssigner,), {method: own})
    notices = FallbackNotices()
    fused = FusedAssigner(OwnPipeline(num_classes=5), notices)
    inputs = _batch(6)
    with pytest.warns(AccelFallbackWarning, match="own assignment pipeline"):
        _assert_same(_run(fused, inputs), _run(fused.inner, inputs))
