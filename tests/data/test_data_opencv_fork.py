"""OpenCV's thread pool across fork (lucid_data.opencv_threads): a forked child's first parallel cv2 call must not
hang, the child runs one OpenCV thread, the parent keeps its count."""

from __future__ import annotations

import os
import signal
import sys

import cv2
import numpy as np
import pytest

from lucid_data import single_threaded_worker  # importing lucid_data installs the hooks

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs os.fork")

CHILD_DEADLINE_S = 20  # a hung child is killed by SIGALRM instead of hanging the suite
FORKS = 8  # without the hooks about 2 in 5 such children hang (opencv-python 5.0, 2 threads)


def _parallel_warp(image: np.ndarray) -> np.ndarray:
    matrix = np.float32([[1.0, 0.1, 3.0], [0.05, 1.0, 2.0]])
    return cv2.warpAffine(image, matrix, (image.shape[1], image.shape[0]))


def test_forked_children_finish_their_cv2_work_with_one_thread() -> None:
    image = np.random.default_rng(0).integers(0, 255, (640, 640, 3), dtype=np.uint8)
    before = cv2.getNumThreads()
    cv2.setNumThreads(2)
    try:
        expected = _parallel_warp(image)
        for _ in range(FORKS):
            _parallel_warp(image)  # the parent's pool is busy right up to the fork
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # child: report the thread count, redo the warp, exit without pytest's teardown
                code = 1
                try:
                    signal.alarm(CHILD_DEADLINE_S)
                    os.write(write_fd, bytes([cv2.getNumThreads()]))
                    single_threaded_worker(0)  # what a DataLoader worker runs first
                    code = 0 if np.array_equal(_parallel_warp(image), expected) else 3
                finally:
                    os._exit(code)
            os.close(write_fd)
            child_threads = os.read(read_fd, 1)
            os.close(read_fd)
            _, status = os.waitpid(pid, 0)
            assert not os.WIFSIGNALED(status), (
                f"forked child hung in cv2 (killed by signal {os.WTERMSIG(status)})"
            )
            assert os.WEXITSTATUS(status) == 0, "forked child's warp differs from the parent's"
            assert child_threads == bytes([1])
            assert cv2.getNumThreads() == 2, (
                "the parent's OpenCV thread count was not restored after the fork"
            )
    finally:
        cv2.setNumThreads(before)
