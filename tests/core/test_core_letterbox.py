"""Letterbox geometry, pixels and inverse mappings (shared/fixtures/README.md, "Input pipeline")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.io import ImageReadMode, decode_image

from lucid_core.geometry.letterbox import (
    LetterboxInfo,
    letterbox,
    letterbox_geometry,
    scale_boxes_back,
    scale_keypoints_back,
    scale_masks_back,
    scale_rboxes_back,
)


def test_geometry_odd_padding_goes_bottom_right_and_auto_uses_minimum_rectangle() -> None:
    info = letterbox_geometry((481, 640), 640, auto=True)
    assert info.new_unpad_wh == (640, 481)
    assert info.input_hw == (512, 640)
    assert (info.top, info.bottom, info.left, info.right) == (15, 16, 0, 0)
    full = letterbox_geometry((481, 640), 640, auto=False)
    assert full.input_hw == (640, 640) and (full.top, full.bottom) == (79, 80)


def test_geometry_scaleup_and_rectangular_target() -> None:
    assert letterbox_geometry((100, 200), 640).new_unpad_wh == (640, 320)
    assert letterbox_geometry((100, 200), 640, scaleup=False).new_unpad_wh == (200, 100)
    info = letterbox_geometry((300, 300), (320, 640))
    assert (
        info.new_unpad_wh == (320, 320)
        and info.input_hw == (320, 640)
        and (info.left, info.right) == (160, 160)
    )


def test_letterbox_pixels_pad_fill_and_accepts_hwc_numpy() -> None:
    img = np.zeros((30, 50, 3), dtype=np.uint8)
    img[..., 0] = 200
    out, info = letterbox(img, 64, auto=False, fill=7)
    assert out.shape == (3, 64, 64) and out.dtype == torch.uint8
    assert info.new_unpad_wh == (64, round(30 * 64 / 50))
    assert bool((out[:, : info.top] == 7).all()) and bool((out[:, 64 - info.bottom :] == 7).all())
    inner = out[:, info.top : 64 - info.bottom]
    assert bool((inner[0] == 200).all()) and bool((inner[1:] == 0).all())
    same, _ = letterbox(torch.from_numpy(img).permute(2, 0, 1), 64, auto=False, fill=7)
    assert torch.equal(out, same)


def test_letterbox_rejects_float_images() -> None:
    with pytest.raises(TypeError, match="uint8"):
        letterbox(torch.zeros(3, 10, 10), 32)


def test_inverse_mappings_round_trip() -> None:
    info = letterbox_geometry((427, 640), 320, auto=False)
    gx, gy = info.gain_wh
    orig = torch.tensor([[10.0, 20.0, 300.0, 400.0]])
    fwd = orig.clone()
    fwd[:, 0::2] = fwd[:, 0::2] * gx + info.left
    fwd[:, 1::2] = fwd[:, 1::2] * gy + info.top
    torch.testing.assert_close(scale_boxes_back(fwd, info), orig)
    kpts = torch.tensor([[[fwd[0, 0], fwd[0, 1], 0.3]]])
    torch.testing.assert_close(scale_keypoints_back(kpts, info), torch.tensor([[[10.0, 20.0, 0.3]]]))
    rb = torch.tensor([[fwd[0, 0], fwd[0, 1], 10 * gx, 20 * gy, 0.4]])
    torch.testing.assert_close(scale_rboxes_back(rb, info), torch.tensor([[10.0, 20.0, 10.0, 20.0, 0.4]]))
    # clipping: outside coordinates land on the border
    clipped = scale_boxes_back(torch.tensor([[-50.0, -50.0, 1000.0, 1000.0]]), info)
    assert clipped.tolist() == [[0.0, 0.0, 640.0, 427.0]]


def test_mask_back_mapping_crops_padding() -> None:
    info = letterbox_geometry((100, 200), 64, auto=False)
    mask = torch.zeros(1, 64, 64, dtype=torch.bool)
    mask[:, info.top : info.top + info.new_unpad_wh[1], :32] = True  # left half of the image content
    back = scale_masks_back(mask, info)
    assert back.shape == (1, 100, 200)
    assert bool(back[0, :, :95].all()) and not bool(back[0, :, 105:].any())
    assert LetterboxInfo.from_dict(info.to_dict()) == info


@pytest.mark.shared
@pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")
def test_letterbox_matches_fixture_input_bit_exactly(shared_dir: Path) -> None:
    """Our letterbox of the decoded image equals the reference's ``input_uint8`` (cv2.INTER_LINEAR) exactly.

    Covers the resized 1024² → 640² OBB case (lucid_core.geometry.resize reproduces OpenCV's fixed-point
    INTER_LINEAR) and the unresized pose/detect cases. The decoded pixels themselves match the reference's
    cv2.imread exactly (``decoded_bgr_sha256``).
    """
    import hashlib

    cases = []
    for path in sorted((shared_dir / "fixtures").glob("import_*.pt")):
        cases.extend(torch.load(path, weights_only=True, map_location="cpu")["cases"].values())
    assert cases
    for case in cases:
        image = decode_image(
            str(shared_dir / case["image"]), mode=ImageReadMode.RGB, apply_exif_orientation=True
        )
        bgr = image.flip(0).permute(1, 2, 0).contiguous().numpy()
        assert hashlib.sha256(bgr.tobytes()).hexdigest() == case["decoded_bgr_sha256"]
        lb = case["letterbox"]
        out, info = letterbox(
            image, case["imgsz"], auto=lb["auto"], stride=lb["stride"], fill=lb["pad_value"]
        )
        expected = case["input_uint8"][0]
        assert out.shape == expected.shape
        assert (info.top, info.bottom, info.left, info.right) == (
            lb["top"],
            lb["bottom"],
            lb["left"],
            lb["right"],
        )
        assert list(info.new_unpad_wh) == list(lb["new_unpad_wh"])
        mismatch = out != expected
        assert not bool(mismatch.any()), f"{case['image']}: {int(mismatch.sum())} values differ"
    assert any(list(c["letterbox"]["new_unpad_wh"]) != c["orig_shape_hw"][::-1] for c in cases)  # one resizes
