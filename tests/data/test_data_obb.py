"""OBB data side: the polygon → xywhr label convention against the fixtures' stored pairs, rotated-box
augmentation (affine / flip / mosaic on the polygons, refit, clipping as polygons) and the synthetic rotated
shapes.

Label convention: ``shared/fixtures/README.md``, section "obb_loss_*.pt", "Label convention" (steps 1-4; the
minimum-area rectangle matches within about 5e-4 px / 5e-5 rad, ties match one of the equal-area candidates,
squares match modulo π/2; steps 1 and 4 are bit-exact). Every case is read from the fixture files.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
import yaml

from lucid_data.augment.flip import flip_horizontal
from lucid_data.augment.geometry import transform_points, warp_targets
from lucid_data.augment.mosaic import mosaic4
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.readers.common import corners_to_rbox
from lucid_data.readers.geometry import (
    THETA_MAX,
    THETA_MIN,
    canonical_rboxes,
    hull_edge_rectangles,
    min_area_rboxes,
    rboxes_to_corners,
)
from lucid_data.synth import synthesize
from lucid_data.targets import Targets

PX_TOL, RAD_TOL = 5e-4, 5e-5  # README: "test a converter with tolerances of about 5e-4 px / 5e-5 rad"
# ... for coordinates up to the public 320-px input; the px tolerance grows with the magnitude compared
PX_TOL_SCALE = 320.0
TIE_CANDIDATE_RTOL = 1e-4  # equal-area candidates (OpenCV decides ties in float32)


def _obb_fixtures(shared_dir: Path) -> list[dict[str, Any]]:
    files = sorted((shared_dir / "fixtures").glob("obb_loss_*.pt"))
    assert files, "no obb_loss_*.pt fixture"
    out = []
    for path in files:
        fx: dict[str, Any] = torch.load(path, weights_only=True, map_location="cpu")
        assert fx["schema"] == "lucid-fixture/obb_loss/1"
        out.append(fx)
    return out


def _angle_diff(a: float, b: float, period: float) -> float:
    d = (a - b) % period
    return min(d, period - d)


def _assert_same_label(
    got: np.ndarray, polygon: np.ndarray, expected: np.ndarray, tie: bool, square: bool
) -> None:
    """``got`` (5,) equals ``expected`` under the README's rules for unflagged, tie and square rows (the px
    tolerance relative to the polygon's coordinates, the angle's absolute)."""
    px_tol = PX_TOL * max(1.0, float(np.abs(polygon).max()) / PX_TOL_SCALE)
    if square:  # any θ modulo π/2 is right; the sides are equal up to 1e-4·w
        np.testing.assert_allclose(got[:2], expected[:2], atol=px_tol, rtol=0)
        np.testing.assert_allclose(
            sorted(got[2:4]), sorted(expected[2:4]), atol=max(px_tol, 1e-4 * got[2]), rtol=0
        )
        assert _angle_diff(float(got[4]), float(expected[4]), math.pi / 2) <= RAD_TOL
        return
    candidates = [got]
    if tie:
        rects, areas = hull_edge_rectangles(polygon)
        candidates = list(rects[areas <= areas.min() * (1 + TIE_CANDIDATE_RTOL)])
    errors = [
        max(
            np.abs(c[:4] - expected[:4]).max() / px_tol,
            _angle_diff(float(c[4]), float(expected[4]), math.pi) / RAD_TOL,
        )
        for c in candidates
    ]
    assert min(errors) <= 1.0, (got, expected, candidates)
    assert THETA_MIN - 1e-6 <= got[4] < THETA_MAX and got[2] >= got[3]


@pytest.mark.shared
def test_min_area_conversion_matches_fixture_labels(shared_dir: Path) -> None:
    for fx in _obb_fixtures(shared_dir):
        labels = fx["labels"]
        polygons = labels["polygons_px"].double().numpy()
        expected = labels["xywhr_px"].double().numpy()
        ours = min_area_rboxes(polygons)
        readers = corners_to_rbox(polygons)  # the readers' entry point gives the same rectangles
        np.testing.assert_allclose(readers, ours.astype(np.float32), atol=1e-4, rtol=0)
        for i in range(len(polygons)):
            _assert_same_label(
                ours[i],
                polygons[i],
                expected[i],
                bool(labels["min_area_rect_tie"][i]),
                bool(labels["square"][i]),
            )


@pytest.mark.shared
def test_collate_normalises_rboxes_bit_exactly(shared_dir: Path) -> None:
    """README step 4: cx, w ÷ W and cy, h ÷ H in float32, θ untouched → ``targets.bboxes`` bit-exact."""
    for fx in _obb_fixtures(shared_dir):
        labels, flat = fx["labels"], fx["targets"]
        height, width = (int(v) for v in labels["input_hw"])
        image_index = labels["image_index"].numpy()
        samples = []
        for b in range(int(fx["meta"]["input_shape"][0])):
            rows = np.flatnonzero(image_index == b)
            rboxes = labels["xywhr_px"].numpy()[rows]
            hull = rboxes_to_corners(rboxes)
            boxes = np.concatenate((hull.min(1), hull.max(1)), -1)
            targets = Targets(boxes=boxes, labels=labels["cls"].numpy()[rows], rboxes=rboxes)
            samples.append(
                {"image": torch.zeros(3, height, width, dtype=torch.uint8), "targets": targets, "meta": {}}
            )
        batch = collate(samples)
        assert torch.equal(batch["rboxes"], flat["bboxes"])
        assert torch.equal(batch["batch_idx"], flat["batch_idx"]) and torch.equal(batch["cls"], flat["cls"])


def _reletterboxed(labels: dict[str, Any], scale: int, extra_w: int) -> dict[str, Any]:
    """Another valid case of the same schema, its expected values given by the README's steps 1-4: the input
    ``scale`` × larger (every px value × scale, exact in float32) and ``extra_w`` px wider (a rectangular batch
    shape: centred padding, so ``left`` grows by extra_w / 2 and every x by the same)."""
    shift = extra_w // 2
    height, width = (int(v) for v in labels["input_hw"])
    polygons = labels["polygons_px"] * scale
    polygons[..., 0] += shift
    xywhr = labels["xywhr_px"].clone()
    xywhr[:, :4] *= scale
    xywhr[:, 0] += shift
    letterbox = [
        {
            **lb,
            "resized_hw": [int(v) * scale for v in lb["resized_hw"]],
            "new_unpad_wh": [int(v) * scale for v in lb["new_unpad_wh"]],
            "left": int(lb["left"]) * scale + shift,
            "top": int(lb["top"]) * scale,
        }
        for lb in labels["letterbox"]
    ]
    hw = [height * scale, width * scale + extra_w]
    return {**labels, "polygons_px": polygons, "xywhr_px": xywhr, "letterbox": letterbox, "input_hw": hw}


def _check_dataset_pipeline(labels: dict[str, Any], nc: int, root: Path) -> None:
    """``labels``' rows written as a YOLO-OBB dataset under ``root``, read back through the evaluation pipeline at
    the input geometry of the file: long side resized to imgsz, padded to ``input_hw`` (a rectangular batch shape,
    or the square imgsz of the plain evaluation letterbox)."""
    (root / "images" / "val").mkdir(parents=True)
    (root / "labels" / "val").mkdir(parents=True)
    image_index = labels["image_index"].numpy()
    polygons_norm = labels["polygons_norm"].numpy()
    order = np.lexsort((labels["row_in_label_file"].numpy(), image_index))
    for b, letterbox in enumerate(labels["letterbox"]):
        h0, w0 = (int(v) for v in letterbox["source_hw"])
        cv2.imwrite(str(root / "images" / "val" / f"img{b}.png"), np.zeros((h0, w0, 3), np.uint8))
        lines = [
            f"{int(labels['cls'][i])} " + " ".join(f"{v:.9g}" for v in polygons_norm[i])
            for i in order
            if image_index[i] == b
        ]
        (root / "labels" / "val" / f"img{b}.txt").write_text("\n".join(lines) + "\n")
    names = {i: f"c{i}" for i in range(nc)}
    (root / "data.yaml").write_text(
        yaml.safe_dump({"path": ".", "val": "images/val", "task": "obb", "names": names})
    )
    height, width = (int(v) for v in labels["input_hw"])
    imgsz = max(max(int(v) for v in lb["resized_hw"]) for lb in labels["letterbox"])
    dataset = DetectionDataset(root / "data.yaml", imgsz=imgsz, split="val", task="obb", verify="none")
    if (height, width) != (imgsz, imgsz):
        dataset.rect_shapes = dict.fromkeys(range(len(dataset.records)), (height, width))
    for b in range(len(labels["letterbox"])):
        sample = dataset[[Path(r.path).stem for r in dataset.records].index(f"img{b}")]
        assert tuple(sample["image"].shape[1:]) == (height, width)
        got = sample["targets"].rboxes.astype(np.float64)
        rows = [i for i in order if image_index[i] == b]
        assert len(got) == len(rows)
        for g, i in zip(got, rows, strict=True):
            _assert_same_label(
                g,
                labels["polygons_px"][i].double().numpy(),
                labels["xywhr_px"][i].double().numpy(),
                bool(labels["min_area_rect_tie"][i]),
                bool(labels["square"][i]),
            )


@pytest.mark.shared
def test_dataset_pipeline_reproduces_fixture_labels(shared_dir: Path, tmp_path: Path) -> None:
    """The fixture's label rows written as a YOLO-OBB dataset, read back through the evaluation pipeline."""
    for k, fx in enumerate(_obb_fixtures(shared_dir)):
        _check_dataset_pipeline(fx["labels"], int(fx["meta"]["nc"]), tmp_path / f"set{k}")


@pytest.mark.shared
@pytest.mark.parametrize(("scale", "extra_w"), [(1, 64), (2, 0), (2, 64)], ids=["rect", "upscaled", "both"])
def test_dataset_pipeline_on_reletterboxed_cases(
    shared_dir: Path, tmp_path: Path, scale: int, extra_w: int
) -> None:
    """The same check on other valid cases of the schema: a rectangular batch shape and an up-scaled input."""
    for k, fx in enumerate(_obb_fixtures(shared_dir)):
        labels = _reletterboxed(fx["labels"], scale, extra_w)
        _check_dataset_pipeline(labels, int(fx["meta"]["nc"]), tmp_path / f"set{k}")


# ------------------------------------------------------------------------------------------------ conventions


def test_canonical_form_long_side_and_angle_range() -> None:
    boxes = np.array(
        [
            [0, 0, 10, 4, 0.0],  # wider than tall: θ = 0
            [0, 0, 4, 10, 0.0],  # taller than wide: θ = π/2
            [0, 0, 10, 4, math.pi],  # θ mod π
            [0, 0, 10, 4, 3 * math.pi / 4],  # upper end excluded → −π/4
            [0, 0, 10, 4, -math.pi / 2],
        ]
    )
    out = canonical_rboxes(boxes)
    np.testing.assert_allclose(out[:, 2:4], [[10, 4]] * 5)
    np.testing.assert_allclose(out[:, 4], [0, math.pi / 2, 0, -math.pi / 4, math.pi / 2], atol=1e-12)
    # the same rectangles
    np.testing.assert_allclose(
        np.sort(rboxes_to_corners(out).reshape(5, -1), 1),
        np.sort(rboxes_to_corners(boxes).reshape(5, -1), 1),
        atol=1e-9,
    )


# ---------------------------------------------------------------------------------------------- augmentation


def _obb_targets(rboxes: np.ndarray, polygons: list[np.ndarray] | None = None) -> Targets:
    corners = rboxes_to_corners(rboxes)
    boxes = np.concatenate((corners.min(1), corners.max(1)), -1)
    return Targets(
        boxes=boxes,
        labels=np.zeros(len(rboxes), np.int64),
        rboxes=rboxes,
        polygons=polygons if polygons is not None else list(corners.astype(np.float32)),
    )


def _assert_min_area_enclosing(rboxes: np.ndarray, polygons: list[np.ndarray]) -> None:
    """Each rotated box encloses its polygon and has the polygon's minimum enclosing area (ties either way)."""
    refit = min_area_rboxes(polygons)
    np.testing.assert_allclose(rboxes[:, 2] * rboxes[:, 3], refit[:, 2] * refit[:, 3], rtol=1e-3, atol=1e-2)
    for rbox, polygon in zip(rboxes.astype(np.float64), polygons, strict=True):
        cos, sin = math.cos(rbox[4]), math.sin(rbox[4])
        offset = polygon.astype(np.float64) - rbox[:2]
        along, across = offset @ [cos, sin], offset @ [-sin, cos]
        assert (np.abs(along) <= rbox[2] / 2 + 1e-2).all() and (np.abs(across) <= rbox[3] / 2 + 1e-2).all()


def _similarity(angle_deg: float, scale: float, tx: float, ty: float) -> np.ndarray:
    m = np.eye(3)
    m[:2] = cv2.getRotationMatrix2D(center=(0, 0), angle=angle_deg, scale=scale)
    m[0, 2], m[1, 2] = tx, ty
    return m


@pytest.mark.parametrize("with_polygons", [True, False])
def test_affine_moves_a_rotated_box_as_its_refitted_corners(with_polygons: bool) -> None:
    rbox = np.array([[100.0, 80.0, 40.0, 12.0, 0.3]])
    matrix = _similarity(20.0, 1.3, 40.0, 60.0)
    targets = _obb_targets(rbox) if with_polygons else _obb_targets(rbox).select([0])
    if not with_polygons:
        targets.polygons = None
    out = warp_targets(targets, matrix, (300, 300), filter_candidates=False)
    expected = min_area_rboxes(transform_points(rboxes_to_corners(rbox), matrix))
    np.testing.assert_allclose(out.rboxes, expected, atol=1e-3)
    # cv2 rotates by −angle in image axes (y down): the direction turns by −20°, sides scale by 1.3
    cx, cy = transform_points(rbox[:, :2], matrix)[0]
    analytic = canonical_rboxes(np.array([[cx, cy, 52.0, 15.6, 0.3 - math.radians(20.0)]]))
    np.testing.assert_allclose(out.rboxes, analytic, atol=1e-3)


def test_affine_refits_from_the_labelled_polygon_not_the_box() -> None:
    """A non-rectangular labelled quad under a shear: the refit is its transformed polygon's rectangle."""
    quad = np.array([[50.0, 50.0], [90.0, 56.0], [86.0, 70.0], [52.0, 62.0]])
    rbox = min_area_rboxes([quad])
    shear = np.eye(3)
    shear[0, 1] = 0.4
    shear[0, 2] = 10.0
    out = warp_targets(
        _obb_targets(rbox, [quad.astype(np.float32)]), shear, (200, 200), filter_candidates=False
    )
    from_quad = min_area_rboxes([transform_points(quad, shear)])
    from_corners = min_area_rboxes([transform_points(rboxes_to_corners(rbox)[0], shear)])
    np.testing.assert_allclose(out.rboxes, from_quad, atol=1e-3)
    assert np.abs(from_quad - from_corners)[:, :4].max() > 0.5  # the two refits do differ here
    np.testing.assert_allclose(out.polygons[0], transform_points(quad, shear), atol=1e-3)


def _clip_left(polygon: np.ndarray) -> np.ndarray:
    """Independent half-plane clip x >= 0 of a convex polygon (vertices inside + edge crossings, in order)."""
    out = []
    for p, q in zip(polygon, np.roll(polygon, -1, axis=0), strict=True):
        if p[0] >= 0:
            out.append(p)
        if (p[0] >= 0) != (q[0] >= 0):
            t = p[0] / (p[0] - q[0])
            out.append(p + t * (q - p))
    return np.asarray(out)


def test_box_partly_outside_the_canvas_is_clipped_as_a_polygon() -> None:
    """A 60x20 box at 30° sticking out of the left edge keeps its inside part as a polygon, refitted from it."""
    rbox = np.array([[10.0, 100.0, 60.0, 20.0, math.pi / 6]])
    out = warp_targets(_obb_targets(rbox), np.eye(3), (200, 200), filter_candidates=False)
    inside = _clip_left(rboxes_to_corners(rbox)[0])
    polygon = np.unique(out.polygons[0].astype(np.float64).round(4), axis=0)
    assert len(polygon) == len(inside)
    assert np.abs(polygon[:, None, :] - inside[None]).max(-1).min(0).max() < 1e-3
    np.testing.assert_allclose(out.boxes[0], [*inside.min(0), *inside.max(0)], atol=1e-3)
    got = out.rboxes[0].astype(np.float64)
    np.testing.assert_allclose(got, min_area_rboxes([inside])[0], atol=1e-3)
    # not the envelope: the clipped axis-aligned hull of the box is larger than the polygon's rectangle
    envelope = np.prod(inside.max(0) - inside.min(0))
    assert got[2] * got[3] < 0.9 * envelope
    assert got[3] < 20.0 + 1e-3 and got[2] < 60.0  # the cut shortened the box along its length


def test_flip_turns_a_rotated_box_as_its_mirrored_corners() -> None:
    rbox = np.array([[60.0, 40.0, 30.0, 10.0, 0.3], [20.0, 70.0, 12.0, 8.0, 1.4]])
    image = np.zeros((100, 120, 3), np.uint8)
    _, out = flip_horizontal(image, _obb_targets(rbox))
    mirrored = rboxes_to_corners(rbox)
    mirrored[..., 0] = 120 - mirrored[..., 0]
    np.testing.assert_allclose(out.rboxes, min_area_rboxes(mirrored), atol=1e-4)
    _, back = flip_horizontal(image, out)
    np.testing.assert_allclose(back.rboxes, canonical_rboxes(rbox), atol=1e-4)


def test_mosaic_keeps_every_rotated_box_fitted_to_its_clipped_polygon() -> None:
    rng = np.random.default_rng(3)
    images, targets = [], []
    for _ in range(4):
        images.append(np.zeros((64, 64, 3), np.uint8))
        n = 3
        rb = np.stack(
            (
                rng.uniform(0, 64, n),
                rng.uniform(0, 64, n),
                rng.uniform(8, 30, n),
                rng.uniform(4, 12, n),
                rng.uniform(-1, 2, n),
            ),
            -1,
        )
        targets.append(_obb_targets(canonical_rboxes(rb)))
    _, out = mosaic4(images, targets, rng, 64)
    assert out.rboxes is not None and out.polygons is not None and len(out) > 0
    _assert_min_area_enclosing(out.rboxes, out.polygons)
    for polygon in out.polygons:
        assert polygon.min() >= -1e-4 and polygon.max() <= 128 + 1e-4


# -------------------------------------------------------------------------------------------- synthetic shapes


def test_synthetic_rotated_shapes_train_pipeline(tmp_path: Path) -> None:
    """`lucid-data synth --task obb` data: canonical rectangles, and augmented samples collate to ``rboxes``."""
    from lucid_data.cli import main

    assert (
        main(
            [
                "synth",
                "--task",
                "obb",
                "--output",
                str(tmp_path / "s"),
                "--n-train",
                "4",
                "--n-val",
                "1",
                "--imgsz",
                "64",
            ]
        )
        == 0
    )
    yaml_path = tmp_path / "s" / "data.yaml"
    assert yaml.safe_load(yaml_path.read_text())["task"] == "obb"
    dataset = DetectionDataset(yaml_path, imgsz=64, augment=True, split="train", verify="none")
    assert dataset.task == "obb"
    samples = [dataset[i] for i in range(len(dataset))]
    for sample in samples:
        t = sample["targets"]
        assert t.rboxes is not None and t.polygons is not None
        if len(t):
            assert ((t.rboxes[:, 4] >= THETA_MIN - 1e-6) & (t.rboxes[:, 4] < THETA_MAX)).all()
            _assert_min_area_enclosing(t.rboxes, t.polygons)
    batch = collate(samples)
    assert batch["rboxes"].shape == (batch["batch_idx"].shape[0], 5)
    assert "segments" not in batch and "masks" not in batch


def test_synth_obb_labels_are_the_drawn_rectangles(tmp_path: Path) -> None:
    """Rectangles of squashed shapes: never square (their direction is visible), w the long side."""
    yaml_path = synthesize("obb", tmp_path / "o", n_train=6, n_val=0, imgsz=96, num_classes=3, seed=1)
    from lucid_data import load_dataset

    for record in load_dataset(yaml_path, "train").records:
        r = record.targets.rboxes
        assert r is not None and (r[:, 3] <= 0.76 * r[:, 2]).all()
