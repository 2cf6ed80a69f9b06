"""Constant-velocity Kalman filters of box tracks, batched over tracks (NumPy, float64).

The state is a box measurement ``z`` (4 values) and its velocity (8 values); one step is one frame. Process and
measurement noise are diagonal with standard deviations proportional to the box size, as in SORT/DeepSORT and the
trackers built on them (position weight ``1/20``, velocity weight ``1/160``):

* :class:`KalmanXYAH` — ByteTrack (Zhang et al. 2022): ``z = (cx, cy, w/h, h)``, noise scaled by the height, the
  aspect ratio with small fixed noise.
* :class:`KalmanXYWH` — BoT-SORT (Aharon et al. 2022, eqs. 4-5): ``z = (cx, cy, w, h)``, noise of x- and
  w-components scaled by the width, of y- and h-components by the height.

Every method takes stacked arrays: means ``(N, 8)``, covariances ``(N, 8, 8)``, measurements ``(N, 4)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["KalmanFilter", "KalmanXYAH", "KalmanXYWH"]

Array = NDArray[np.float64]

STD_POSITION = 1.0 / 20
STD_VELOCITY = 1.0 / 160


class KalmanFilter:
    """Shared linear algebra; subclasses define the size-dependent noise (``_scales``)."""

    #: transition ``x' = F x`` (one frame, constant velocity) and observation ``z = H x``.
    F: Array = np.eye(8) + np.eye(8, k=4)
    H: Array = np.eye(4, 8)
    #: state slots of the size velocities (zeroed for a track that is not currently seen).
    SIZE_VELOCITY: tuple[int, ...] = ()

    def _scales(self, z: Array) -> tuple[Array, Array, Array, Array]:
        """Per-track std devs ``(init_position, init_velocity, process, measurement)``; shapes (N,4),(N,4),(N,8),(N,4)."""
        raise NotImplementedError

    def to_measurement(self, xywh: Any) -> Array:
        """Boxes ``(cx, cy, w, h)`` ``(N, 4)`` → this filter's measurements."""
        raise NotImplementedError

    def to_xywh(self, z: Array) -> Array:
        """This filter's measurements (or state means) → boxes ``(cx, cy, w, h)`` ``(N, 4)``."""
        raise NotImplementedError

    def initiate(self, z: Array) -> tuple[Array, Array]:
        """New tracks from measurements ``(N, 4)``: mean ``(N, 8)`` (zero velocity), covariance ``(N, 8, 8)``."""
        z = np.asarray(z, dtype=np.float64).reshape(-1, 4)
        mean = np.concatenate([z, np.zeros_like(z)], axis=1)
        pos, vel, _, _ = self._scales(z)
        std = np.concatenate([pos, vel], axis=1)
        return mean, _diag(std * std)

    def predict(self, mean: Array, cov: Array) -> tuple[Array, Array]:
        """One frame ahead: ``x' = F x``, ``P' = F P Fᵀ + Q(x)``; Q from the size before the step."""
        if len(mean) == 0:
            return mean, cov
        _, _, process, _ = self._scales(mean[:, :4])
        new_mean = mean @ self.F.T
        new_cov = self.F @ cov @ self.F.T + _diag(process * process)
        return new_mean, new_cov

    def project(self, mean: Array, cov: Array) -> tuple[Array, Array]:
        """Measurement-space mean ``(N, 4)`` and innovation covariance ``H P Hᵀ + R`` ``(N, 4, 4)``."""
        _, _, _, measure = self._scales(mean[:, :4])
        return mean[:, :4], cov[:, :4, :4] + _diag(measure * measure)

    def update(self, mean: Array, cov: Array, z: Array) -> tuple[Array, Array]:
        """Posterior after measurements ``z`` ``(N, 4)``: gain ``K = P Hᵀ S⁻¹``, ``x + K (z - Hx)``, ``P - K S Kᵀ``."""
        if len(mean) == 0:
            return mean, cov
        projected, s = self.project(mean, cov)
        pht = cov[:, :, :4]  # P Hᵀ, (N, 8, 4)
        gain = np.linalg.solve(s, pht.transpose(0, 2, 1)).transpose(0, 2, 1)  # S symmetric
        innovation = np.asarray(z, dtype=np.float64).reshape(-1, 4) - projected
        new_mean = mean + np.einsum("nij,nj->ni", gain, innovation)
        new_cov = cov - gain @ s @ gain.transpose(0, 2, 1)
        return new_mean, new_cov

    def multi_affine(self, mean: Array, cov: Array, affine: Array) -> tuple[Array, Array]:
        """Apply a 2x3 image affine (camera motion) to every state: positions moved, all 2-vectors turned.

        BoT-SORT's camera-motion step: with ``M`` the 2x2 part and ``t`` the translation, ``x' = M̃ x + (t, 0…)``
        and ``P' = M̃ P M̃ᵀ`` where ``M̃`` repeats ``M`` on the four (x, y)-pairs of the state.
        """
        if len(mean) == 0:
            return mean, cov
        m = np.asarray(affine, dtype=np.float64)[:, :2]
        big = np.kron(np.eye(4), m)
        new_mean = mean @ big.T
        new_mean[:, :2] += np.asarray(affine, dtype=np.float64)[:, 2]
        return new_mean, big @ cov @ big.T


def _diag(values: Array) -> Array:
    """``(N, D)`` → ``(N, D, D)`` diagonal matrices."""
    return values[:, :, None] * np.eye(values.shape[1])


class KalmanXYAH(KalmanFilter):
    """ByteTrack's filter: measurement ``(cx, cy, aspect w/h, h)``, noise scaled by the height."""

    SIZE_VELOCITY = (7,)

    # std = size · weight + floor, per slot: (cx, cy, aspect, h) and their velocities; the aspect has fixed noise
    _POS = (np.array([2, 2, 0, 2]) * STD_POSITION, np.array([0, 0, 1e-2, 0]))
    _VEL = (np.array([10, 10, 0, 10]) * STD_VELOCITY, np.array([0, 0, 1e-5, 0]))
    _PROCESS = (
        np.array([STD_POSITION] * 2 + [0, STD_POSITION] + [STD_VELOCITY] * 2 + [0, STD_VELOCITY]),
        np.array([0, 0, 1e-2, 0, 0, 0, 1e-5, 0]),
    )
    _MEASURE = (np.array([STD_POSITION] * 2 + [0, STD_POSITION]), np.array([0, 0, 1e-1, 0]))

    def _scales(self, z: Array) -> tuple[Array, Array, Array, Array]:
        h = z[:, 3:4]
        pos, vel, process, measure = (
            h * w + floor for w, floor in (self._POS, self._VEL, self._PROCESS, self._MEASURE)
        )
        return pos, vel, process, measure

    def to_measurement(self, xywh: Any) -> Array:
        """``(cx, cy, w, h)`` → ``(cx, cy, w/h, h)``."""
        z = np.array(xywh, dtype=np.float64).reshape(-1, 4)
        z[:, 2] /= z[:, 3]
        return z

    def to_xywh(self, z: Array) -> Array:
        """``(cx, cy, w/h, h)`` → ``(cx, cy, w, h)``."""
        xywh = z[:, :4].copy()
        xywh[:, 2] *= xywh[:, 3]
        return xywh


class KalmanXYWH(KalmanFilter):
    """BoT-SORT's filter: measurement ``(cx, cy, w, h)``, x/w noise scaled by the width, y/h by the height."""

    SIZE_VELOCITY = (6, 7)

    def _scales(self, z: Array) -> tuple[Array, Array, Array, Array]:
        wh = z[:, [2, 3, 2, 3]]
        return (
            2 * STD_POSITION * wh,
            10 * STD_VELOCITY * wh,
            np.concatenate([STD_POSITION * wh, STD_VELOCITY * wh], 1),
            STD_POSITION * wh,
        )

    def to_measurement(self, xywh: Any) -> Array:
        """``(cx, cy, w, h)`` unchanged (as float64 ``(N, 4)``)."""
        return np.asarray(xywh, dtype=np.float64).reshape(-1, 4).copy()

    def to_xywh(self, z: Array) -> Array:
        """``(cx, cy, w, h)`` unchanged."""
        return z[:, :4].copy()
