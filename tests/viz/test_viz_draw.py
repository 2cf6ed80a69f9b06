"""Overlays rendered to pixels, per task: class colours where the geometry is, dashed ground truth, rotated boxes
drawn as rotated rectangles (not their envelope), translucent masks, keypoints with visibility."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.image import imread

from lucid_core.results import Detections
from lucid_core.tasks import Task, register_task, unregister_task
from lucid_viz import (
    COCO_SKELETON,
    RenderOptions,
    class_color,
    class_color_uint8,
    draw_ground_truth,
    draw_predictions,
    rboxes_to_corners,
    render_rgb,
    save_figure,
)

BACKGROUND = 40
HEIGHT, WIDTH = 240, 320
PLAIN = RenderOptions(show_labels=False)


def blank_image() -> np.ndarray:
    return np.full((HEIGHT, WIDTH, 3), BACKGROUND, dtype=np.uint8)


def near(pixels: np.ndarray, rgb: tuple[float, ...], tol: float = 12.0) -> np.ndarray:
    """Boolean map of pixels within ``tol`` (per channel) of ``rgb``."""
    return (np.abs(pixels.astype(np.float64) - np.asarray(rgb, dtype=np.float64)) <= tol).all(axis=-1)


def is_background(pixel: np.ndarray) -> bool:
    return bool((np.abs(pixel.astype(int) - BACKGROUND) <= 3).all())


def detections(**fields: object) -> Detections:
    return Detections(**{k: torch.as_tensor(v) for k, v in fields.items()})  # type: ignore[arg-type]


def png_pixels(figure, tmp_path: Path, name: str) -> np.ndarray:
    """Write the figure as a PNG and read it back as uint8 RGB (the file is what a person sees)."""
    path = save_figure(figure, tmp_path / f"{name}.png")
    pixels = imread(path)
    return np.round(pixels[..., :3] * 255).astype(np.uint8)


def test_figure_is_the_image_size_and_shows_the_image(tmp_path: Path) -> None:
    image = blank_image()
    image[10:20, 30:50] = (200, 10, 10)
    pixels = png_pixels(draw_predictions(image, None, "detect"), tmp_path, "plain")
    assert pixels.shape == image.shape
    np.testing.assert_array_equal(pixels, image)


def test_detect_box_edges_have_the_class_colour_and_the_inside_stays_clear(tmp_path: Path) -> None:
    result = detections(
        boxes=[[40.0, 50.0, 160.0, 170.0], [200.0, 40.0, 300.0, 200.0]],
        scores=[0.9, 0.6],
        labels=[3, 7],
    )
    pixels = png_pixels(draw_predictions(blank_image(), result, "detect", PLAIN), tmp_path, "detect")
    first, second = near(pixels, class_color_uint8(3)), near(pixels, class_color_uint8(7))
    # each edge of box 0 is a solid line of its class colour
    assert first[60:160, 40].all() and first[60:160, 160].all()
    assert first[50, 50:150].all() and first[170, 50:150].all()
    assert not first[80:140, 70:130].any(), "a prediction box is unfilled"
    assert second[50:190, 200].all() and not second[:, :180].any()
    assert not first[:, 180:].any(), "colour belongs to the class, not to the position"


def test_colour_depends_on_the_class_index_only(tmp_path: Path) -> None:
    a = detections(boxes=[[20.0, 20.0, 100.0, 100.0]], scores=[0.95], labels=[5])
    b = detections(
        boxes=[[150.0, 150.0, 250.0, 220.0], [20.0, 20.0, 100.0, 100.0]], scores=[0.3, 0.5], labels=[2, 5]
    )
    pixels_a = png_pixels(draw_predictions(blank_image(), a, "detect", PLAIN), tmp_path, "a")
    pixels_b = png_pixels(draw_predictions(blank_image(), b, "detect", PLAIN), tmp_path, "b")
    np.testing.assert_array_equal(pixels_a[15:105, 15:105], pixels_b[15:105, 15:105])
    assert class_color(5) != class_color(2)
    assert class_color(5) == class_color(5 + 20 * 3), "the palette repeats per class index"
    with pytest.raises(ValueError, match="class index"):
        class_color(-1)


def test_labels_show_name_and_score_in_the_class_colour() -> None:
    result = detections(boxes=[[40.0, 60.0, 200.0, 200.0]], scores=[0.875], labels=[1])
    figure = draw_predictions(blank_image(), result, "detect", RenderOptions(names={1: "bicycle"}))
    texts = [text.get_text() for text in figure.axes[0].texts]
    assert texts == ["bicycle 0.88"]
    pixels = render_rgb(figure)
    above = pixels[45:60, 40:100]
    assert (above.min(axis=-1) > 200).any(), "white label text above the box"
    assert near(above, class_color_uint8(1), tol=45).any(), "label background in the class colour"
    unlabelled = render_rgb(draw_predictions(blank_image(), result, "detect", PLAIN))
    assert (unlabelled[45:57, 40:100] == BACKGROUND).all()


def test_score_threshold_hides_low_scores() -> None:
    result = detections(boxes=[[40.0, 60.0, 200.0, 200.0]], scores=[0.2], labels=[0])
    options = RenderOptions(show_labels=False, score_threshold=0.25)
    pixels = render_rgb(draw_predictions(blank_image(), result, "detect", options))
    assert (pixels == BACKGROUND).all()


def _row_runs(line: np.ndarray) -> int:
    """Number of coloured runs along a boolean line."""
    return int(np.count_nonzero(np.diff(line.astype(np.int8)) == 1) + int(line[0]))


def test_ground_truth_is_dashed_and_predictions_solid(tmp_path: Path) -> None:
    image = blank_image()
    figure = draw_predictions(image, detections(boxes=[[20.0, 40.0, 140.0, 200.0]], scores=[0.9], labels=[4]),
                              "detect", PLAIN)  # fmt: skip
    draw_ground_truth(
        figure.axes[0], {"boxes": [[180.0, 40.0, 300.0, 200.0]], "labels": [4]}, "detect", PLAIN
    )
    coloured = near(png_pixels(figure, tmp_path, "dashed"), class_color_uint8(4))
    solid_top, dashed_top = coloured[40, 25:135], coloured[40, 185:295]
    assert solid_top.all() and _row_runs(solid_top) == 1
    assert _row_runs(dashed_top) >= 4 and 0.3 < dashed_top.mean() < 0.9
    solid_left, dashed_left = coloured[45:195, 20], coloured[45:195, 180]
    assert solid_left.all() and _row_runs(dashed_left) >= 5
    assert not coloured[60:180, 200:280].any(), "ground truth is unfilled"


def test_obb_is_drawn_as_the_rotated_rectangle_not_its_envelope(tmp_path: Path) -> None:
    rbox = np.array([[160.0, 120.0, 160.0, 40.0, math.pi / 4]])
    corners = rboxes_to_corners(rbox)[0]
    hull = np.array([corners.min(axis=0), corners.max(axis=0)])
    result = detections(boxes=hull.reshape(1, 4), scores=[0.8], labels=[2], rboxes=rbox)
    pixels = png_pixels(draw_predictions(blank_image(), result, "obb", PLAIN), tmp_path, "obb")
    coloured = near(pixels, class_color_uint8(2))
    for x, y in corners:
        assert coloured[int(y), int(x)], f"rotated corner ({x:.1f}, {y:.1f}) is drawn"
    (x0, y0), (x1, y1) = hull
    for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)):
        patch = pixels[int(y) - 2 : int(y) + 3, int(x) - 2 : int(x) + 3]
        assert (patch == BACKGROUND).all(), f"envelope corner ({x:.1f}, {y:.1f}) stays empty"
    centre = corners.mean(axis=0)
    assert is_background(pixels[int(centre[1]), int(centre[0])])


def test_obb_ground_truth_is_a_dashed_rotated_outline() -> None:
    rbox = np.array([[160.0, 120.0, 200.0, 80.0, 0.4]])
    axes = draw_predictions(blank_image(), None, "obb").axes[0]
    draw_ground_truth(axes, {"boxes": np.zeros((1, 4)), "labels": [6], "rboxes": rbox}, "obb", PLAIN)
    coloured = near(render_rgb(axes.figure), class_color_uint8(6))
    corners = rboxes_to_corners(rbox)[0]
    start, end = corners[0], corners[1]
    samples = [start + (end - start) * t for t in np.linspace(0.1, 0.9, 120)]
    along = np.array([coloured[round(y - 0.5), round(x - 0.5)] for x, y in samples])
    assert 0.3 < along.mean() < 0.95 and _row_runs(along) >= 4


def test_obb_without_rboxes_is_refused() -> None:
    result = detections(boxes=[[10.0, 10.0, 50.0, 50.0]], scores=[0.9], labels=[0])
    with pytest.raises(ValueError, match="rboxes"):
        draw_predictions(blank_image(), result, "obb")
    with pytest.raises(ValueError, match="task must be one of"):
        draw_predictions(blank_image(), result, "depth")  # not a registered task


def test_segment_masks_are_translucent_fills_and_ground_truth_outlines(tmp_path: Path) -> None:
    mask = np.zeros((1, HEIGHT, WIDTH), dtype=bool)
    mask[0, 60:180, 40:150] = True
    result = detections(
        boxes=[[40.0, 60.0, 150.0, 180.0]], scores=[0.7], labels=[9], masks=torch.from_numpy(mask)
    )
    options = RenderOptions(show_labels=False, mask_alpha=0.5)
    figure = draw_predictions(blank_image(), result, "segment", options)
    ground_truth = {
        "boxes": [[180.0, 60.0, 300.0, 180.0]],
        "labels": [9],
        "polygons": [np.array([[180.0, 60.0], [300.0, 60.0], [240.0, 180.0]])],
    }
    draw_ground_truth(figure.axes[0], ground_truth, "segment", options)
    pixels = png_pixels(figure, tmp_path, "segment").astype(np.float64)
    blend = BACKGROUND * 0.5 + np.asarray(class_color_uint8(9), dtype=np.float64) * 0.5
    inside = pixels[90:150, 70:120]
    assert (np.abs(inside - blend) <= 2).all(), "mask interior = 50 % class colour over the image"
    assert (pixels[200:230, 40:150] == BACKGROUND).all(), "nothing outside the mask"
    assert (pixels[100:120, 230:250] == BACKGROUND).all(), "ground-truth polygon is unfilled"
    edge = near(pixels, class_color_uint8(9))
    assert edge[61:179, 180].any(), "ground-truth box drawn"


def test_segment_ground_truth_masks_become_outlines() -> None:
    mask = np.zeros((1, HEIGHT, WIDTH), dtype=bool)
    mask[0, 60:180, 100:220] = True
    axes = draw_predictions(blank_image(), None, "segment").axes[0]
    draw_ground_truth(axes, {"boxes": [[100.0, 60.0, 220.0, 180.0]], "labels": [0], "masks": mask}, "segment",
                      PLAIN)  # fmt: skip
    pixels = render_rgb(axes.figure)
    assert (pixels[90:150, 130:190] == BACKGROUND).all()
    assert near(pixels, class_color_uint8(0)).sum() > 200


def test_pose_keypoints_respect_visibility_and_skeleton() -> None:
    keypoints = np.array([[[60.0, 80.0, 0.9], [160.0, 80.0, 0.95], [160.0, 190.0, 0.1]]])
    result = detections(boxes=[[20.0, 20.0, 300.0, 220.0]], scores=[0.9], labels=[0], keypoints=keypoints)
    options = RenderOptions(show_labels=False, skeleton=((0, 1), (1, 2)))
    coloured = near(
        render_rgb(draw_predictions(blank_image(), result, "pose", options)), class_color_uint8(0)
    )
    assert coloured[80, 60] and coloured[80, 160], "visible keypoints drawn"
    assert coloured[80, 100:120].all(), "edge between two visible keypoints drawn"
    assert not coloured[120:200, 150:170].any(), "a hidden keypoint and its edges are not drawn"


def test_pose_ground_truth_keypoints_are_hollow_and_unlabelled_ones_hidden() -> None:
    keypoints = np.array([[[80.0, 100.0, 2.0], [200.0, 100.0, 1.0], [140.0, 180.0, 0.0]]])
    targets = {"boxes": [[30.0, 30.0, 290.0, 210.0]], "labels": [1], "keypoints": keypoints}
    options = RenderOptions(show_labels=False, skeleton=((0, 1), (1, 2)), keypoint_size=14.0)
    axes = draw_predictions(blank_image(), None, "pose", options).axes[0]
    draw_ground_truth(axes, targets, "pose", options)
    pixels = render_rgb(axes.figure)
    coloured = near(pixels, class_color_uint8(1))
    assert (np.abs(pixels[97:104, 73:79].astype(int) - BACKGROUND) <= 3).all(), "hollow marker"
    assert coloured[88:112, 68:92].any(), "ring around the keypoint"
    assert coloured[100, 100:180].any() and not coloured[100, 100:180].all(), "dashed skeleton edge"
    assert not coloured[150:200, 120:160].any(), "v = 0 keypoint and its edge hidden"


def test_default_skeleton_is_coco() -> None:
    assert len(COCO_SKELETON) == 19
    assert all(0 <= a < 17 and 0 <= b < 17 for a, b in COCO_SKELETON)
    assert RenderOptions().skeleton == COCO_SKELETON
    with pytest.raises(ValueError, match="skeleton"):
        RenderOptions(skeleton=((0, -1),))


@pytest.mark.shared
def test_default_skeleton_matches_the_coco_keypoint_category(shared_dir: Path) -> None:
    coco = json.loads((shared_dir / "data/coco-mmpose/test_coco.json").read_text())
    (person,) = [c for c in coco["categories"] if c.get("keypoints")]
    assert {(a - 1, b - 1) for a, b in person["skeleton"]} == set(COCO_SKELETON)


@pytest.mark.shared
def test_rotated_corners_match_the_reference_predictions(shared_dir: Path, tmp_path: Path) -> None:
    fixture = torch.load(shared_dir / "fixtures/import_yolov8n-obb-taufibrils.pt", weights_only=True)
    for case in fixture["cases"].values():
        pred = case["pred"]
        corners = rboxes_to_corners(pred["xywhr"].double().numpy())
        np.testing.assert_allclose(corners, pred["xyxyxyxy"].double().numpy(), atol=1e-3)
        hull = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)
        np.testing.assert_allclose(hull, pred["xyxy"].double().numpy(), atol=1e-3)
        result = detections(
            boxes=pred["xyxy"], scores=pred["conf"], labels=pred["cls"].long(), rboxes=pred["xywhr"]
        )
        image = shared_dir / case["image"]
        pixels = png_pixels(draw_predictions(image, result, "obb", PLAIN), tmp_path, "real_obb")
        assert pixels.shape[:2] == tuple(case["orig_shape_hw"])
        colour = near(pixels, class_color_uint8(int(pred["cls"][0])), tol=20)
        for x, y in corners.reshape(-1, 2):
            assert colour[int(y) - 1 : int(y) + 2, int(x) - 1 : int(x) + 2].any()


def test_drawing_follows_the_fields_a_result_carries_not_the_task_name() -> None:
    mask = np.zeros((2, HEIGHT, WIDTH), dtype=bool)
    mask[0, 60:180, 40:150] = True
    keypoints = np.array([[[60.0, 80.0, 0.9], [100.0, 80.0, 0.9]]] * 2)
    everything = detections(
        boxes=[[40.0, 60.0, 150.0, 180.0], [10.0, 10.0, 30.0, 30.0]],
        scores=[0.7, 0.6],
        labels=[9, 1],
        masks=torch.from_numpy(mask),
        keypoints=keypoints,
    )
    ground_truth = {
        "boxes": [[180.0, 60.0, 300.0, 180.0]],
        "labels": [9],
        "polygons": [np.array([[180.0, 60.0], [300.0, 60.0], [240.0, 180.0]])],
        "keypoints": np.array([[[200.0, 100.0, 2.0]]]),
    }
    rendered = []
    for task in ("detect", "segment", "pose"):
        figure = draw_predictions(blank_image(), everything, task, PLAIN)
        draw_ground_truth(figure.axes[0], ground_truth, task, PLAIN)
        rendered.append(render_rgb(figure))
    for pixels in rendered[1:]:
        np.testing.assert_array_equal(pixels, rendered[0])
    rbox = np.array([[160.0, 120.0, 160.0, 40.0, math.pi / 4]])
    rotated = detections(boxes=[[0.0, 0.0, 1.0, 1.0]], scores=[0.8], labels=[2], rboxes=rbox)
    np.testing.assert_array_equal(
        render_rgb(draw_predictions(blank_image(), rotated, "detect", PLAIN)),
        render_rgb(draw_predictions(blank_image(), rotated, "obb", PLAIN)),
    )


def test_a_registered_task_is_drawn_by_its_fields() -> None:
    register_task(Task(name="toy_boxes"))
    try:
        result = detections(boxes=[[40.0, 50.0, 160.0, 170.0]], scores=[0.9], labels=[3])
        np.testing.assert_array_equal(
            render_rgb(draw_predictions(blank_image(), result, "toy_boxes", PLAIN)),
            render_rgb(draw_predictions(blank_image(), result, "detect", PLAIN)),
        )
    finally:
        unregister_task("toy_boxes")


def test_no_task_name_dispatch_in_lucid_viz(repo_root: Path) -> None:
    pattern = re.compile(r"task ?(==|!=|in) ?[\"'(]")
    source = repo_root / "packages" / "lucid-viz" / "src" / "lucid_viz"
    hits = [
        f"{path.name}:{n}"
        for path in sorted(source.rglob("*.py"))
        if path.name != "cli.py"  # the command line's argument choices
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if pattern.search(line)
    ]
    assert hits == []
