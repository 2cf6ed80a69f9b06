"""OpenCV's thread pool across ``fork()``: one thread in a forked child, the parent's count kept.

OpenCV's pthreads pool does not survive ``fork()``: a child forked while the parent's pool threads exist can block
forever in its first parallel cv2 call, even after ``cv2.setNumThreads(1)`` in the child. :func:`install_fork_hooks`
(run when ``lucid_data`` is imported) registers ``os.register_at_fork`` hooks: before a fork the pool is stopped
(``setNumThreads(1)`` joins its threads), the child keeps one OpenCV thread and the parent gets its previous count
back. Pixel results are the same for any thread count; ``subprocess`` does not run these hooks (it execs).
"""

from __future__ import annotations

import os

import cv2

__all__ = ["install_fork_hooks", "single_threaded_worker"]

_saved_threads: list[int] = []
_installed = False


def _before_fork() -> None:
    threads = cv2.getNumThreads()
    _saved_threads.append(threads)
    if threads != 1:
        cv2.setNumThreads(1)


def _after_fork_in_parent() -> None:
    if _saved_threads:
        threads = _saved_threads.pop()
        if threads != 1:
            cv2.setNumThreads(threads)


def _after_fork_in_child() -> None:
    _saved_threads.clear()


def install_fork_hooks() -> None:
    """Register the at-fork hooks once per process (idempotent)."""
    global _installed
    if _installed or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(
        before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
    )
    _installed = True


def single_threaded_worker(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: one OpenCV thread per worker process.

    torch already gives each worker one intra-op thread (documented ``DataLoader`` behaviour); OpenCV would otherwise
    start a thread pool per worker, and on a small machine those threads take cores from the training step's own
    threads (oversubscription). A forked worker already starts with one thread (:func:`install_fork_hooks`); this
    also covers workers started by ``spawn`` / ``forkserver``. Pixel work is identical whatever the thread count.
    """
    cv2.setNumThreads(1)


install_fork_hooks()
