"""COCO RLE codec in numpy: agrees with the COCO API (pycocotools) and round-trips."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lucid_data import rle


@st.composite
def masks(draw: st.DrawFn) -> np.ndarray:
    h = draw(st.integers(1, 24))
    w = draw(st.integers(1, 24))
    return draw(hnp.arrays(bool, (h, w)))


@settings(max_examples=150, deadline=None)
@given(masks())
def test_encode_decode_round_trip(mask: np.ndarray) -> None:
    encoded = rle.encode(mask)
    assert encoded["size"] == list(mask.shape)
    assert (rle.decode(encoded) == mask).all()
    assert rle.area(encoded) == int(mask.sum())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=40))
def test_counts_string_round_trip(counts: list[int]) -> None:
    assert rle.counts_from_string(rle.counts_to_string(counts)) == counts


@settings(max_examples=100, deadline=None)
@given(masks())
def test_matches_pycocotools(mask: np.ndarray) -> None:
    mask_util = pytest.importorskip("pycocotools.mask")
    theirs = mask_util.encode(np.asfortranarray(mask.astype(np.uint8)))
    ours = rle.encode(mask)
    assert ours["counts"] == theirs["counts"].decode("ascii")
    assert (rle.decode(theirs) == mask).all()
    assert np.allclose(rle.to_bbox(ours), mask_util.toBbox(theirs))


def test_uncompressed_counts_and_bad_sum() -> None:
    mask = rle.decode({"size": [2, 3], "counts": [1, 2, 3]})
    assert mask.T.reshape(-1).tolist() == [False, True, True, False, False, False]
    with pytest.raises(ValueError, match="sum to 5"):
        rle.decode({"size": [2, 3], "counts": [1, 2, 2]})


def test_polygons_to_mask_fills_square() -> None:
    mask = rle.polygons_to_mask([np.array([[2, 2], [5, 2], [5, 5], [2, 5]], float)], 8, 8)
    assert mask[2:6, 2:6].all() and mask.sum() == 16
