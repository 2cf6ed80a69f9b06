"""Kalman filters of lucid_core.track against closed-form one-dimensional cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lucid_core.track.kalman import STD_POSITION, STD_VELOCITY, KalmanXYAH, KalmanXYWH


def test_xywh_initiate_predict_update_closed_form() -> None:
    kf = KalmanXYWH()
    z = np.array([[10.0, 20.0, 4.0, 8.0]])
    mean, cov = kf.initiate(z)
    size = np.array([4.0, 8.0, 4.0, 8.0])  # (w, h, w, h) scales x, y, w, h
    np.testing.assert_allclose(mean[0], [10, 20, 4, 8, 0, 0, 0, 0])
    p_pos = (2 * STD_POSITION * size) ** 2
    p_vel = (10 * STD_VELOCITY * size) ** 2
    np.testing.assert_allclose(np.diag(cov[0]), np.concatenate([p_pos, p_vel]))

    # predict: x' = x + v; var(x') = P_x + P_v + Q_x, cov(x', v') = P_v, var(v') = P_v + Q_v
    mean2, cov2 = kf.predict(mean + np.array([[0, 0, 0, 0, 1.5, -2.0, 0.1, 0.2]]), cov)
    np.testing.assert_allclose(mean2[0, :4], [11.5, 18.0, 4.1, 8.2])
    q_pos = (STD_POSITION * size) ** 2
    q_vel = (STD_VELOCITY * size) ** 2
    for i in range(4):
        assert cov2[0, i, i] == pytest.approx(p_pos[i] + p_vel[i] + q_pos[i])
        assert cov2[0, i, i + 4] == pytest.approx(p_vel[i])
        assert cov2[0, i + 4, i + 4] == pytest.approx(p_vel[i] + q_vel[i])

    # update of the predicted state: per coordinate a 2-state filter with scalar measurement
    measured = np.array([[12.0, 17.0, 4.4, 8.0]])
    mean3, cov3 = kf.update(mean2, cov2, measured)
    r = (STD_POSITION * np.array([4.1, 8.2, 4.1, 8.2])) ** 2  # noise from the predicted size
    for i in range(4):
        pxx, pxv, pvv = cov2[0, i, i], cov2[0, i, i + 4], cov2[0, i + 4, i + 4]
        s = pxx + r[i]
        innovation = measured[0, i] - mean2[0, i]
        assert mean3[0, i] == pytest.approx(mean2[0, i] + pxx / s * innovation)
        assert mean3[0, i + 4] == pytest.approx(mean2[0, i + 4] + pxv / s * innovation)
        assert cov3[0, i, i] == pytest.approx(pxx - pxx * pxx / s)
        assert cov3[0, i + 4, i + 4] == pytest.approx(pvv - pxv * pxv / s)
    np.testing.assert_allclose(cov3[0], cov3[0].T, atol=1e-12)


def test_xyah_noise_and_conversions() -> None:
    kf = KalmanXYAH()
    xywh = np.array([[50.0, 60.0, 20.0, 40.0]])
    z = kf.to_measurement(xywh)
    np.testing.assert_allclose(z, [[50, 60, 0.5, 40]])
    np.testing.assert_allclose(kf.to_xywh(z), xywh)
    mean, cov = kf.initiate(z)
    h = 40.0
    expected = [2 * STD_POSITION * h] * 2 + [1e-2, 2 * STD_POSITION * h]
    expected += [10 * STD_VELOCITY * h] * 2 + [1e-5, 10 * STD_VELOCITY * h]
    np.testing.assert_allclose(np.sqrt(np.diag(cov[0])), expected)
    # measurement noise of the aspect ratio is fixed; the others scale with the height
    _, s = kf.project(mean, cov)
    assert s[0, 2, 2] == pytest.approx(1e-2**2 + 1e-1**2)
    assert s[0, 3, 3] == pytest.approx((2 * STD_POSITION * h) ** 2 + (STD_POSITION * h) ** 2)


def test_batched_equals_one_by_one() -> None:
    rng = np.random.default_rng(0)
    kf = KalmanXYWH()
    z = rng.uniform([0, 0, 10, 10], [100, 100, 50, 50], size=(5, 4))
    mean, cov = kf.predict(*kf.initiate(z))
    measured = z + rng.normal(0, 2, size=z.shape)
    batched = kf.update(mean, cov, measured)
    for i in range(5):
        single = kf.update(mean[i : i + 1], cov[i : i + 1], measured[i : i + 1])
        np.testing.assert_allclose(batched[0][i], single[0][0], rtol=1e-12)
        np.testing.assert_allclose(batched[1][i], single[1][0], rtol=1e-12)


def test_camera_motion_affine_moves_positions_and_turns_vectors() -> None:
    kf = KalmanXYWH()
    mean, cov = kf.initiate(np.array([[10.0, 20.0, 4.0, 8.0]]))
    mean[0, 4:6] = [1.0, 0.0]
    shift = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, -3.0]])
    moved, moved_cov = kf.multi_affine(mean, cov, shift)
    np.testing.assert_allclose(moved[0], [15, 17, 4, 8, 1, 0, 0, 0])
    np.testing.assert_allclose(moved_cov, cov)
    c, s = math.cos(math.pi / 2), math.sin(math.pi / 2)
    turn = np.array([[c, -s, 0.0], [s, c, 0.0]])
    turned, _ = kf.multi_affine(mean, cov, turn)
    np.testing.assert_allclose(turned[0, :2], [-20, 10], atol=1e-12)
    np.testing.assert_allclose(turned[0, 4:6], [0, 1], atol=1e-12)
