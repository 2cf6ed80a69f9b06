"""Synthetic tracking video (`lucid-data synth --task track`): moving shapes and their MOTChallenge ground truth.

`synthesize_track(output)` writes one short video of the shapes of :mod:`lucid_data.synth` (same unit shapes,
colours, textured background and pixel noise, so a shapes detector trained by the embedded recipe sees what it
was trained on) moving at constant velocity over a static background, plus its ground truth in the MOTChallenge
layout (Milan et al., "MOT16: A Benchmark for Multi-Object Tracking", 2016)::

    OUTPUT/<name>.mp4            the video (OpenCV's mp4v; ``video_format="avi"``: MJPG in an .avi)
    OUTPUT/<name>/gt/gt.txt      frame,id,x,y,w,h,conf,class,visibility (frames and ids from 1)
    OUTPUT/<name>/seqinfo.ini    name, frame rate, length, size of the sequence

so ``lucid-eval track --gt OUTPUT --pred RESULTS_DIR`` scores ``RESULTS_DIR/<name>.txt`` against it.

The scene is laid out so that every seed holds the events a tracker must survive: two objects moving in opposite
directions *cross* in the upper half, so close that their boxes overlap (the shapes themselves touch at most: the
embedded recipe trains on shapes that never overlap, and its detector merges overlapping shapes into one box),
one object passes behind a static *occluder* (a textured panel in the foreground of the lower part) and is fully
hidden for about ``OCCLUDED_FRAMES`` frames, and a fourth moves on its own. The seed draws the classes, colours, sizes, orientations, small offsets of the
paths, the background and the noise; frame ``t`` is a function of ``(seed, t)`` only.

Ground truth is computed from what is drawn: each object's polygon is rasterised, the pixels hidden by the
objects drawn in front of it and by the occluder are removed, and the row's box is the hull of the visible pixels
(integer pixel edges) with ``visibility`` = visible / full pixels. Rows with ``visibility`` below
``MIN_VISIBILITY`` carry ``conf = 0`` (MOTChallenge's "ignore" flag); a fully hidden object has no row. Every
object is class 1 (MOTChallenge's evaluated class); its shape kind is in ``seqinfo.ini``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from lucid_core.atomic import atomic_write_text
from lucid_data.synth import _UNIT_SHAPES, SHAPE_KINDS, SynthConfig, _background, _random_color

__all__ = [
    "MIN_VISIBILITY",
    "OCCLUDED_FRAMES",
    "SceneObject",
    "SyntheticTrack",
    "TrackScene",
    "build_scene",
    "gt_lines",
    "render_frames",
    "synthesize_track",
]

#: rows whose object is less visible than this are flagged ``conf = 0`` (ignored by the MOT metrics).
MIN_VISIBILITY = 0.25
#: frames the occluded object spends fully behind the occluder (the panel's width is fitted to it).
OCCLUDED_FRAMES = 10
#: pixel noise amplitude of every frame (as :class:`lucid_data.synth.SynthConfig` ``noise``).
NOISE = 8.0
_FOURCC = {"mp4": "mp4v", "avi": "MJPG"}


@dataclass(frozen=True)
class SceneObject:
    """One object: its shape ``label``, RGB ``color`` and its unit polygon scaled by ``half`` and turned by
    ``theta``, moving in a straight line from ``start`` to ``end`` (centres, pixels) over the video."""

    track_id: int
    label: int
    color: tuple[int, int, int]
    half: float
    theta: float
    start: tuple[float, float]
    end: tuple[float, float]

    def polygon(self, t: float) -> np.ndarray:
        """The (P, 2) polygon in pixels at time ``t`` in [0, 1] (constant velocity)."""
        cos, sin = math.cos(self.theta), math.sin(self.theta)
        local = _UNIT_SHAPES[SHAPE_KINDS[self.label]] * self.half
        centre = np.array(self.start) + t * (np.array(self.end) - np.array(self.start))
        return np.asarray(local @ np.array([[cos, -sin], [sin, cos]]).T + centre)

    def extent(self) -> np.ndarray:
        """Width and height of the polygon's hull (the same at every time)."""
        poly = self.polygon(0.0)
        return np.asarray(poly.max(0) - poly.min(0))


@dataclass(frozen=True)
class TrackScene:
    """The whole video: its size, length, rate, objects (back to front), the occluder ``x0, y0, x1, y1`` and the
    textures of the background and of the occluder (RGB float32)."""

    width: int
    height: int
    frames: int
    fps: float
    objects: tuple[SceneObject, ...]
    occluder: tuple[int, int, int, int]
    background: np.ndarray
    panel: np.ndarray
    seed: int


def _texture(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """A low-saturation textured field of :func:`lucid_data.synth._background`, cropped to ``height x width``."""
    field = _background(rng, SynthConfig(imgsz=max(width, height, 32)))
    return np.ascontiguousarray(field[:height, :width])


def build_scene(
    *,
    frames: int = 100,
    width: int = 256,
    height: int = 192,
    fps: float = 30.0,
    num_classes: int = 3,
    seed: int = 0,
) -> TrackScene:
    """The layout of the module docstring for one seed (deterministic). Sizes are fractions of the frame, so a
    shapes detector run at 96 px sees objects of the size it was trained on at the default 256 x 192."""
    if frames < 2 * OCCLUDED_FRAMES + 20:
        raise ValueError(f"frames must be >= {2 * OCCLUDED_FRAMES + 20} to hold the occlusion, got {frames}")
    if width < 128 or height < 96:
        raise ValueError(f"the scene needs at least 128 x 96 pixels, got {width} x {height}")
    if not 1 <= num_classes <= len(SHAPE_KINDS):
        raise ValueError(f"num_classes must be in 1..{len(SHAPE_KINDS)}, got {num_classes}")
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
    background = _texture(rng, width, height)
    panel = _texture(rng, width, height) * np.float32(0.75)
    w, h = float(width), float(height)

    def jitter() -> float:
        return float(rng.uniform(-0.02, 0.02))

    def obj(track_id: int, start: tuple[float, float], end: tuple[float, float], spin: bool) -> SceneObject:
        return SceneObject(
            track_id=track_id,
            label=int(rng.integers(0, num_classes)),
            color=_random_color(rng),
            half=float(rng.uniform(0.095, 0.11)) * h,
            theta=float(rng.uniform(0, 2 * math.pi)) if spin else 0.0,
            start=(start[0] * w, start[1] * h),
            end=(end[0] * w, end[1] * h),
        )

    # the crossing pair in the upper half (2 is drawn in front of 1), then the occluded object, then a lone mover
    row = 0.19 + jitter()
    a = obj(1, (0.1 + jitter(), row), (0.9 + jitter(), row), True)
    b = obj(2, (0.9 + jitter(), row + 0.2), (0.1 + jitter(), row + 0.2), True)
    c = obj(3, (0.27 + jitter(), 0.78 + jitter()), (0.9, 0.78), False)
    e = obj(4, (0.09, 0.57 + jitter()), (0.09 + jitter(), 0.87), True)
    # the occluder: the lower part of a vertical band whose width hides object 3 for OCCLUDED_FRAMES frames
    step = (c.end[0] - c.start[0]) / (frames - 1)
    extent = float(c.extent()[0])
    centre = 0.55 * w
    half_band = (extent + OCCLUDED_FRAMES * step) / 2 + 1
    occluder = (round(centre - half_band), round(0.58 * h), round(centre + half_band), height)
    return TrackScene(
        width=width,
        height=height,
        frames=frames,
        fps=float(fps),
        objects=(a, b, c, e),
        occluder=occluder,
        background=background,
        panel=panel,
        seed=seed,
    )


def _mask(polygon: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The pixels of ``polygon`` (bool, no anti-aliasing; the same 4 fractional bits as the drawing)."""
    mask = np.zeros(shape, dtype=np.uint8)
    cv2.fillPoly(mask, [np.round(polygon * 16).astype(np.int32)], 1, cv2.LINE_8, shift=4)
    return mask.astype(bool)


@dataclass(frozen=True)
class GroundTruthRow:
    """One object in one frame: its id, visible-pixel hull ``x, y, w, h`` (integers) and visibility."""

    frame: int
    track_id: int
    box: tuple[int, int, int, int]
    visibility: float

    def line(self) -> str:
        """The MOTChallenge ``gt.txt`` line (module docstring)."""
        conf = 1 if self.visibility >= MIN_VISIBILITY else 0
        x, y, w, h = self.box
        return f"{self.frame},{self.track_id},{x},{y},{w},{h},{conf},1,{self.visibility:.4f}\n"


def render_frames(scene: TrackScene) -> Iterator[tuple[np.ndarray, list[GroundTruthRow]]]:
    """Each frame of ``scene`` as an RGB uint8 image with its ground-truth rows (frames counted from 1)."""
    shape = (scene.height, scene.width)
    x0, y0, x1, y1 = scene.occluder
    hidden = np.zeros(shape, dtype=bool)
    hidden[y0:y1, x0:x1] = True
    for index in range(scene.frames):
        t = index / (scene.frames - 1)
        canvas = np.clip(scene.background, 0, 255).astype(np.uint8)
        polygons = [o.polygon(t) for o in scene.objects]
        for o, poly in zip(scene.objects, polygons, strict=True):
            cv2.fillPoly(canvas, [np.round(poly * 16).astype(np.int32)], o.color, cv2.LINE_AA, shift=4)
        canvas[y0:y1, x0:x1] = np.clip(scene.panel[y0:y1, x0:x1], 0, 255).astype(np.uint8)
        rng = np.random.default_rng(np.random.SeedSequence([scene.seed, 1, index]))
        noise = rng.random(canvas.shape, dtype=np.float32)  # as lucid_data.synth.render_image
        noise *= np.float32(2 * NOISE)
        noise += canvas
        noise -= np.float32(NOISE)
        image = np.clip(noise, 0, 255, out=noise).astype(np.uint8)
        masks = [_mask(poly, shape) for poly in polygons]
        covered = hidden.copy()
        rows: list[GroundTruthRow] = []
        for o, mask in reversed(list(zip(scene.objects, masks, strict=True))):  # front to back
            visible = mask & ~covered
            covered |= mask
            full = int(mask.sum())
            count = int(visible.sum())
            if count == 0 or full == 0:
                continue
            ys, xs = np.nonzero(visible)
            left, top = int(xs.min()), int(ys.min())
            box = (left, top, int(xs.max()) + 1 - left, int(ys.max()) + 1 - top)
            rows.append(GroundTruthRow(index + 1, o.track_id, box, count / full))
        rows.sort(key=lambda r: r.track_id)
        yield image, rows


def gt_lines(scene: TrackScene) -> list[str]:
    """The ``gt.txt`` lines of ``scene`` (renders every frame; the video is not written)."""
    return [row.line() for _, rows in render_frames(scene) for row in rows]


@dataclass(frozen=True)
class SyntheticTrack:
    """What :func:`synthesize_track` wrote: the video, ``gt.txt``, ``seqinfo.ini``, frames and objects."""

    video: Path
    gt: Path
    seqinfo: Path
    frames: int
    objects: int
    rows: int


def _seqinfo(scene: TrackScene, name: str, video: str) -> str:
    kinds = ",".join(f"{o.track_id}:{SHAPE_KINDS[o.label]}" for o in scene.objects)
    return (
        "[Sequence]\n"
        f"name={name}\n"
        f"video={video}\n"
        f"frameRate={scene.fps:g}\n"
        f"seqLength={scene.frames}\n"
        f"imWidth={scene.width}\n"
        f"imHeight={scene.height}\n"
        f"objects={kinds}\n"
    )


def synthesize_track(
    output: str | os.PathLike[str],
    *,
    name: str = "shapes-track",
    frames: int = 100,
    width: int = 256,
    height: int = 192,
    fps: float = 30.0,
    num_classes: int = 3,
    seed: int = 0,
    video_format: Literal["mp4", "avi"] = "mp4",
) -> SyntheticTrack:
    """Write the video and its ground truth under ``output`` (module docstring); returns what was written.

    The same arguments give the same ``gt.txt`` and ``seqinfo.ini`` bytes and the same decoded frames up to the
    video codec (mp4v, or MJPG for ``video_format="avi"``; both are lossy). Every file is written atomically
    (the video under a temporary name, renamed when complete).
    """
    if video_format not in _FOURCC:
        raise ValueError(f'video_format must be "mp4" or "avi", got {video_format!r}')
    if not name or Path(name).name != name:
        raise ValueError(f"name must be a plain file name, got {name!r}")
    scene = build_scene(
        frames=frames, width=width, height=height, fps=fps, num_classes=num_classes, seed=seed
    )
    root = Path(output)
    root.mkdir(parents=True, exist_ok=True)
    video = root / f"{name}.{video_format}"
    partial = root / f".{name}.partial.{video_format}"
    writer = cv2.VideoWriter(
        str(partial), cv2.VideoWriter.fourcc(*_FOURCC[video_format]), scene.fps, (scene.width, scene.height)
    )
    if not writer.isOpened():
        raise OSError(f"{video}: OpenCV cannot write a {_FOURCC[video_format]} video here")
    lines: list[str] = []
    try:
        for image, rows in render_frames(scene):
            writer.write(cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
            lines.extend(row.line() for row in rows)
    except BaseException:
        writer.release()
        partial.unlink(missing_ok=True)
        raise
    writer.release()
    os.replace(partial, video)
    gt = atomic_write_text(root / name / "gt" / "gt.txt", "".join(lines))
    seqinfo = atomic_write_text(root / name / "seqinfo.ini", _seqinfo(scene, name, video.name))
    return SyntheticTrack(
        video=video, gt=gt, seqinfo=seqinfo, frames=scene.frames, objects=len(scene.objects), rows=len(lines)
    )
