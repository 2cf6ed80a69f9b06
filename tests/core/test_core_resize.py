"""resize_bilinear_uint8 against OpenCV's cv2.resize(INTER_LINEAR) on uint8 images, bit for bit.

The fixture's OBB case (1024² → 640², the only resized fixture input) is checked through ``letterbox`` in
``test_core_letterbox.py`` (bit-exact against ``input_uint8``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lucid_core.geometry.resize import resize_bilinear_uint8


def _resize_hwc(image: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
    out = resize_bilinear_uint8(torch.from_numpy(image).permute(2, 0, 1), size_wh)
    return out.permute(1, 2, 0).numpy()


def _random_cases(seed: int, count: int) -> list[tuple[int, int, int, int, int]]:
    """(H0, W0, new_h, new_w, channels): arbitrary sizes, exact 2× and integer-factor cases, odd extremes."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(count):
        h0, w0 = (int(v) for v in rng.integers(1, 160, 2))
        new_h, new_w = (int(v) for v in rng.integers(1, 160, 2))
        if i % 5 == 0:  # exact 2× down-scaling: OpenCV switches to its fast INTER_AREA path
            h0, w0 = 2 * max(h0 // 2, 1), 2 * max(w0 // 2, 1)
            new_h, new_w = h0 // 2, w0 // 2
        elif i % 5 == 1:  # one axis unchanged, the other scaled by an integer factor
            new_h, new_w = h0, w0 * int(rng.integers(2, 4))
        cases.append((h0, w0, new_h, new_w, int(rng.choice([1, 2, 3, 4, 5]))))
    cases += [(1, 1, 5, 7, 3), (5, 7, 1, 1, 3), (1, 100, 1, 37, 1), (100, 1, 37, 1, 1), (9, 9, 3, 3, 3)]
    return cases


def test_matches_cv2_inter_linear_on_random_images() -> None:
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(0)
    for h0, w0, new_h, new_w, channels in _random_cases(seed=1, count=300):
        image = rng.integers(0, 256, (h0, w0, channels), dtype=np.uint8)
        expected = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR).reshape(new_h, new_w, -1)
        got = _resize_hwc(image, (new_w, new_h))
        mismatch = got != expected
        assert not mismatch.any(), (
            f"{(h0, w0)} -> {(new_h, new_w)} x{channels}: {int(mismatch.sum())} values differ, "
            f"first at {tuple(int(v[0]) for v in np.nonzero(mismatch))}"
        )


@pytest.mark.parametrize(
    ("orig_hw", "new_hw"),
    [
        ((810, 1080), (480, 640)),
        ((1024, 1024), (640, 640)),
        ((481, 640), (640, 851)),
        ((427, 640), (427, 640)),
    ],
)
def test_matches_cv2_inter_linear_on_letterbox_sizes(
    orig_hw: tuple[int, int], new_hw: tuple[int, int]
) -> None:
    """Network-input sizes: wide rows exercise OpenCV's SIMD vertical pass and its scalar tail together."""
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(sum(orig_hw))
    # a smooth gradient plus noise: both flat regions and every grey level appear
    ys, xs = np.mgrid[0 : orig_hw[0], 0 : orig_hw[1]]
    base = (ys * 255 // max(orig_hw[0] - 1, 1) + xs * 7) % 256
    noise = rng.integers(-20, 21, (*orig_hw, 3))
    image = np.clip(base[..., None] + noise, 0, 255).astype(np.uint8)
    expected = cv2.resize(image, (new_hw[1], new_hw[0]), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(_resize_hwc(image, (new_hw[1], new_hw[0])), expected)


def test_known_answers_without_opencv() -> None:
    # 1x2 -> 1x1: weights 1024/1024, the vertical pass rounds half up: (0 + 255) / 2 = 127.5 -> 128
    assert resize_bilinear_uint8(torch.tensor([[0, 255]], dtype=torch.uint8), (1, 1)).tolist() == [[128]]
    # exact 2x down-scaling is a 2x2 mean: rounded half up for 1/3/4 channels, half to even otherwise
    block = torch.tensor([[0, 1], [1, 0]], dtype=torch.uint8)  # mean 0.5
    three = resize_bilinear_uint8(block.expand(3, 2, 2), (1, 1))
    two = resize_bilinear_uint8(block.expand(2, 2, 2), (1, 1))
    assert three.flatten().tolist() == [1, 1, 1] and two.flatten().tolist() == [0, 0]
    # equal sizes: an identical copy, not the same storage
    image = torch.randint(0, 256, (3, 5, 4), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    same = resize_bilinear_uint8(image, (4, 5))
    assert torch.equal(same, image) and same.data_ptr() != image.data_ptr()


def test_leading_dimensions_are_independent_planes() -> None:
    gen = torch.Generator().manual_seed(3)
    batch = torch.randint(0, 256, (2, 3, 17, 23), dtype=torch.uint8, generator=gen)
    out = resize_bilinear_uint8(batch, (11, 29))
    assert out.shape == (2, 3, 29, 11) and out.dtype == torch.uint8
    for i in range(2):
        assert torch.equal(out[i], resize_bilinear_uint8(batch[i], (11, 29)))
    gray = resize_bilinear_uint8(batch[0, 0], (11, 29))
    assert torch.equal(gray, out[0, 0])


def test_rejects_bad_input() -> None:
    with pytest.raises(TypeError, match="uint8"):
        resize_bilinear_uint8(torch.zeros(3, 4, 4), (2, 2))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        resize_bilinear_uint8(np.zeros((4, 4), dtype=np.uint8), (2, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size_wh"):
        resize_bilinear_uint8(torch.zeros(4, 4, dtype=torch.uint8), (0, 2))
    with pytest.raises(ValueError, match="2 dimensions"):
        resize_bilinear_uint8(torch.zeros(4, dtype=torch.uint8), (2, 2))
    with pytest.raises(ValueError, match="non-empty"):
        resize_bilinear_uint8(torch.zeros(3, 0, 4, dtype=torch.uint8), (2, 2))
