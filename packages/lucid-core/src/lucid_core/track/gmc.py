"""Camera-motion compensation by sparse optical flow (BoT-SORT, Aharon et al. 2022, section 3.2).

Corners of the previous frame (Shi–Tomasi) are followed into the current frame with pyramidal Lucas–Kanade flow;
a similarity transform (rotation, uniform scale, translation) fitted to the moved points with RANSAC is the
camera's motion between the two frames, as a 2x3 affine in full-resolution pixels. OpenCV does the image work.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from lucid_core.track.config import TRACKING_EXTRA, MissingExtraError

__all__ = ["SparseFlowMotion"]


def _cv2() -> Any:
    try:
        import cv2  # the `tracking` extra of lucid-core (opencv-python-headless)
    except ImportError as exc:
        raise MissingExtraError(
            f"BoT-SORT camera-motion compensation needs OpenCV: {TRACKING_EXTRA}"
        ) from exc
    return cv2


class SparseFlowMotion:
    """Frame-to-frame camera motion; ``downscale`` shrinks frames before the flow (faster, coarser)."""

    def __init__(self, downscale: int = 2, max_corners: int = 1000) -> None:
        self.downscale = max(1, int(downscale))
        self.max_corners = max_corners
        self.reset()

    def reset(self) -> None:
        """Forget the previous frame (the next frame gets the identity)."""
        self.previous: NDArray[np.uint8] | None = None

    def _gray(self, frame: Any) -> NDArray[np.uint8]:
        cv2 = _cv2()
        image = np.asarray(frame)
        if image.ndim == 3 and image.shape[0] in (1, 3) and image.shape[2] not in (1, 3):
            image = np.moveaxis(image, 0, -1)  # CHW → HWC
        image = np.ascontiguousarray(image.astype(np.uint8, copy=False))
        if image.ndim == 3 and image.shape[2] == 3:
            image = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        elif image.ndim == 3:
            image = image[..., 0]
        if self.downscale > 1:
            h, w = image.shape[:2]
            size = (max(1, w // self.downscale), max(1, h // self.downscale))
            image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        return np.asarray(image, dtype=np.uint8)

    def apply(self, frame: Any) -> NDArray[np.float64]:
        """The 2x3 affine from the previous frame to ``frame`` (an RGB or gray uint8 image); identity at first."""
        cv2 = _cv2()
        gray = self._gray(frame)
        affine = np.eye(2, 3)
        previous, self.previous = self.previous, gray
        if previous is None or previous.shape != gray.shape:
            return affine
        corners = cv2.goodFeaturesToTrack(
            previous, maxCorners=self.max_corners, qualityLevel=0.01, minDistance=1, blockSize=3
        )
        if corners is None or len(corners) < 4:
            return affine
        moved, status, _ = cv2.calcOpticalFlowPyrLK(previous, gray, corners, None)
        ok = status.reshape(-1) == 1
        if ok.sum() < 4:
            return affine
        fitted, _ = cv2.estimateAffinePartial2D(corners[ok], moved[ok], method=cv2.RANSAC)
        if fitted is None:
            return affine
        affine = np.asarray(fitted, dtype=np.float64)
        affine[:, 2] *= self.downscale
        return affine
