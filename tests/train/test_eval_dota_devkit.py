"""Split → predict → merge → score on the DOTA devkit scene with the imported OBB checkpoint (issue 17 acceptance).

The scene (`../shared/data/dota-devkit`, P1888, 712×557) is smaller than the devkit's default 1024 tile, so it is
first made into a 2×2 mirror mosaic (1424×1114, labels mirrored with it): the default split (1024, gap 200,
rate 1) then really cuts it into four overlapping tiles. The tiles are predicted and merged by `lucid-eval --task
obb --merge-tiles` (predictions at scale 1: tiles at imgsz 1024, and the whole mosaic, padded to a multiple of 32
at the bottom/right, at imgsz 1440). Every confident whole-image box (score ≥ `CONFIDENT`, after the same polygon
NMS 0.1 as the merge) that lies wholly inside one tile must have a merged box within 2 px (largest corner
distance). The checkpoint was trained on electron-microscopy fibrils, not aerial imagery: on this scene its
best scores are about 0.07 (the boxes it finds are the parked large vehicles), hence the low `CONFIDENT`. It is
saved under the class name ``large-vehicle`` so that the DOTA score of the merged result is a real number.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.shared, pytest.mark.slow]

CONFIDENT = 0.03
TOLERANCE_PX = 2.0


def _mirror_mosaic(image: np.ndarray, label_text: str) -> tuple[np.ndarray, str]:
    """2×2 mosaic [I, flipLR(I); flipUD(I), flip(I)] and its labelTxt (header kept, corners mirrored)."""
    h, w = image.shape[:2]
    top = np.concatenate([image, image[:, ::-1]], 1)
    mosaic = np.ascontiguousarray(np.concatenate([top, top[::-1]], 0))
    header, objects = [], []
    for line in label_text.splitlines():
        tokens = line.split()
        if len(tokens) < 9:
            header.append(line)
            continue
        xy = np.array([float(t) for t in tokens[:8]]).reshape(4, 2)
        rest = " ".join(tokens[8:])
        for fx, fy in ((False, False), (True, False), (False, True), (True, True)):
            p = xy.copy()
            if fx:
                p[:, 0] = 2 * w - p[:, 0]
            if fy:
                p[:, 1] = 2 * h - p[:, 1]
            if fx != fy:  # one reflection reverses the corner order: keep it clockwise
                p = p[::-1]
            objects.append(" ".join(f"{v:g}" for v in p.reshape(-1)) + f" {rest}")
    return mosaic, "\n".join(header + objects) + "\n"


def test_split_predict_merge_score_matches_whole_image(shared_dir: Path, tmp_path: Path) -> None:
    import cv2

    from lucid_core.checkpoint import save_model
    from lucid_core.geometry.rotated import rboxes_to_polygons
    from lucid_core.inference import predict_prepared, prepare_inference_model
    from lucid_core.interop import import_checkpoint
    from lucid_data.dota_tiles import parse_tile_name, polygon_nms, split_image_dir
    from lucid_data.imageio import load_image
    from lucid_data.readers.dota import tile_windows
    from lucid_train.eval.cli import main
    from lucid_train.eval.dota import read_task1_dir

    root = shared_dir / "data" / "dota-devkit"
    image_path = next((root / "images").iterdir())
    label_path = root / "labelTxt" / f"{image_path.stem}.txt"
    mosaic, labels = _mirror_mosaic(load_image(image_path), label_path.read_text(encoding="utf-8"))
    scene = f"{image_path.stem}-mosaic"
    (tmp_path / "images").mkdir()
    (tmp_path / "labelTxt").mkdir()
    assert cv2.imwrite(str(tmp_path / "images" / f"{scene}.png"), mosaic[..., ::-1])
    (tmp_path / "labelTxt" / f"{scene}.txt").write_text(labels, encoding="utf-8")

    tiles = split_image_dir(tmp_path / "images", tmp_path / "tiles")  # devkit defaults: 1024, gap 200, rate 1
    h, w = mosaic.shape[:2]
    windows = tile_windows(h, w, 1024, 200)
    assert sorted(t.stem for t in tiles) == sorted(f"{scene}__1__{x0}___{y0}" for x0, y0, _, _ in windows)
    assert len(windows) > 1 and all(parse_tile_name(t.stem).scene == scene for t in tiles)

    model, _ = import_checkpoint(shared_dir / "weights" / "yolov8n-obb-taufibrils.pt")
    save_model(model, tmp_path / "obb", names=["large-vehicle"], imgsz=1024)
    out = tmp_path / "report.json"
    code = main(
        [
            "--task", "obb", "--merge-tiles", "--weights", str(tmp_path / "obb"), "--data", str(tmp_path / "tiles"),
            "--dota-labels", str(tmp_path / "labelTxt"), "--imgsz", "1024", "--conf", "0.01",
            "--merged-dets", str(tmp_path / "merged"), "--output", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    per = {c["class"]: c for c in report["per_class"]}
    n_objects = sum(1 for line in labels.splitlines() if len(line.split()) >= 9)
    assert sum(c["num_gt"] + c["num_difficult"] for c in per.values()) == n_objects
    assert per["large-vehicle"]["num_det"] > 0 and per["large-vehicle"]["AP07"] is not None
    merged = read_task1_dir(tmp_path / "merged")["large-vehicle"]
    assert set(merged.images) == {scene}

    # whole-image prediction at scale 1, same NMS as the merge
    net, mode = prepare_inference_model(model)
    stride = 32
    padded = np.full((-(-h // stride) * stride, -(-w // stride) * stride, 3), 114, np.uint8)
    padded[:h, :w] = mosaic
    (whole,) = predict_prepared(net, padded, mode=mode, imgsz=max(padded.shape[:2]), conf=0.01)
    polys = rboxes_to_polygons(whole.rboxes.double()).numpy()
    scores = whole.scores.double().numpy()
    keep = polygon_nms(polys, scores, 0.1)
    polys, scores = polys[keep], scores[keep]
    lo, hi = polys.min(1), polys.max(1)
    uncut = np.array(
        [any(lo[i, 0] >= x0 and lo[i, 1] >= y0 and hi[i, 0] <= x1 and hi[i, 1] <= y1 for x0, y0, x1, y1 in windows)
         for i in range(len(polys))],
        dtype=bool,
    )  # fmt: skip
    checked = np.flatnonzero((scores >= CONFIDENT) & uncut)
    assert checked.size >= 3, f"only {checked.size} confident uncut boxes: the comparison would be vacuous"
    shifts = np.stack([np.roll(polys, r, axis=1) for r in range(4)], 1)  # (N, 4 corner orders, 4, 2)
    for i in checked:
        dist = np.abs(merged.polygons[:, None] - shifts[i][None]).max(-1).max(-1).min(-1)
        assert dist.min() <= TOLERANCE_PX, (i, float(scores[i]), polys[i].tolist(), float(dist.min()))
