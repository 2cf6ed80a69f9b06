"""``predict``: images in, :class:`~lucid_core.results.Detections` in original-image pixels out.

Pipeline per image: decode to RGB uint8 (files through ``torchvision.io.decode_image(mode=RGB,
apply_exif_orientation=True)``, so EXIF orientation is honoured and grayscale/RGBA/palette files become RGB),
letterbox to ``imgsz`` with ``auto=True`` (minimum stride-multiple rectangle, as the reference predictor does —
shared/fixtures/README.md "Input pipeline"), ``/255`` in float32, forward through the model (BN folded for
inference), decode (:func:`lucid_core.postprocess`), then undo the letterbox with per-axis gains
(boxes and keypoints clipped to the image; rotated boxes not clipped; masks cropped and resized).

Decoding: class-aware NMS for every family by default; for end-to-end models (yolo26) that is the one-to-many
branch + NMS, the reference's default, and ``decode="topk"`` selects the NMS-free one-to-one branch.

A checkpoint path is read once while its files are unchanged (:func:`weights_for_predict`), and a model is
BN-folded once until its weights change (:func:`cached_inference_model`), so ``predict`` in a loop pays neither
again. Nothing here changes process-wide state (malloc policy, threads, warning filters).
"""

from __future__ import annotations

import copy
import os
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn
from torchvision.io import ImageReadMode, decode_image

from lucid_core.checkpoint import load, source_files
from lucid_core.decode import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF
from lucid_core.decode.selection import class_filter
from lucid_core.geometry.letterbox import (
    LetterboxInfo,
    letterbox,
    scale_boxes_back,
    scale_keypoints_back,
    scale_masks_back,
    scale_rboxes_back,
)
from lucid_core.geometry.rotated import rboxes_to_xyxy
from lucid_core.models import TrainOutput, YOLOModel
from lucid_core.nn.fuse import fuse_model
from lucid_core.postprocess import postprocess
from lucid_core.results import Detections

ImageInput = str | os.PathLike[str] | np.ndarray[Any, Any] | Tensor | Any
DecodeChoice = Literal["nms", "topk"] | None


class ImageLoadError(ValueError):
    """An image could not be read or has an unsupported layout; the message names the source."""


def load_image_rgb(path: str | os.PathLike[str]) -> Tensor:
    """Decode an image file to an RGB uint8 CHW tensor with EXIF orientation applied."""
    try:
        with warnings.catch_warnings():  # torchvision >= 0.29 announces a future move to torchcodec
            warnings.simplefilter("ignore", DeprecationWarning)
            image: Tensor = decode_image(str(path), mode=ImageReadMode.RGB, apply_exif_orientation=True)
    except (RuntimeError, ValueError, OSError) as exc:
        raise ImageLoadError(f"{path}: cannot decode image ({exc})") from exc
    return image


def _to_rgb_chw(image: Tensor, source: str) -> Tensor:
    if image.dtype != torch.uint8:
        raise ImageLoadError(f"{source}: expected uint8 pixels, got {image.dtype}")
    if image.ndim == 2:
        image = image[None]
    if image.ndim != 3:
        raise ImageLoadError(f"{source}: expected a CHW image, got shape {tuple(image.shape)}")
    channels = int(image.shape[0])
    if channels == 1:
        return image.expand(3, -1, -1).contiguous()
    if channels == 4:
        return image[:3].contiguous()
    if channels != 3:
        raise ImageLoadError(f"{source}: expected 1, 3 or 4 channels, got {channels}")
    return image


def as_rgb_tensor(image: ImageInput) -> Tensor:
    """One image as an RGB uint8 CHW tensor.

    Accepts a path, a CHW uint8 tensor (RGB, gray or RGBA), an HWC uint8 numpy array (RGB, gray or RGBA), or any
    object ``numpy.asarray`` turns into one — e.g. a PIL image (palette/CMYK images are ``convert("RGB")``-ed
    first by duck typing; EXIF orientation of an in-memory image is not applied).
    """
    if isinstance(image, str | os.PathLike):
        return load_image_rgb(image)
    if isinstance(image, Tensor):
        return _to_rgb_chw(image, "tensor image")
    if not isinstance(image, np.ndarray):
        mode = getattr(image, "mode", None)
        convert = getattr(image, "convert", None)
        if isinstance(mode, str) and mode not in ("RGB", "L", "RGBA") and callable(convert):
            image = convert("RGB")
        try:
            image = np.asarray(image)
        except Exception as exc:
            raise ImageLoadError(f"cannot convert {type(image).__name__} to an array ({exc})") from exc
    array = np.asarray(image)
    if array.dtype == np.bool_:
        array = array.astype(np.uint8) * 255
    if array.dtype != np.uint8:
        raise ImageLoadError(f"array image: expected uint8 pixels, got {array.dtype}")
    if not array.flags.writeable:  # e.g. numpy.asarray of a PIL image; torch wants writable memory
        array = array.copy()
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3:
        raise ImageLoadError(f"array image: expected HWC, got shape {array.shape}")
    return _to_rgb_chw(torch.from_numpy(np.ascontiguousarray(array)).permute(2, 0, 1), "array image")


def _image_list(images: ImageInput | Sequence[ImageInput]) -> list[ImageInput]:
    """One image, or a list/tuple of images; a BCHW tensor counts as B images (also inside a list)."""
    items = list(images) if isinstance(images, list | tuple) else [images]
    out: list[ImageInput] = []
    for item in items:
        if isinstance(item, Tensor) and item.ndim == 4:
            out.extend(item.unbind(0))
        else:
            out.append(item)
    return out


def decode_branch(mode: str) -> Literal["one2one", "one2many"]:
    """The head branch a decode mode reads: the one-to-one branch for top-k, the one-to-many branch for NMS (end-to-end
    heads; other heads have one branch)."""
    return "one2one" if mode == "topk" else "one2many"


def forward_for_decode(net: nn.Module, x: Tensor, mode: str) -> Any:
    """Eval-mode output of ``net`` on ``x`` from the branch that decode ``mode`` reads (end-to-end models get
    ``branch=``; a model with one branch is called plainly)."""
    if getattr(net, "end2end", False):
        return net(x, branch=decode_branch(mode))
    return net(x)


def prepare_inference_model(
    model: YOLOModel,
    *,
    decode: DecodeChoice = None,
    device: str | torch.device | None = None,
    fuse: bool = True,
    channels_last: bool | None = None,
) -> tuple[YOLOModel, Literal["nms", "topk"]]:
    """Eval-mode, BN-folded copy of ``model`` on ``device`` with the head branch matching ``decode``.

    ``channels_last`` (``None`` = on when the copy is on the CPU): the copy's 4-D weights in channels-last memory
    format, which oneDNN's CPU convolutions run faster (``tools/bench/predict.py``, docs/benchmarks.md);
    :func:`predict_prepared` feeds it channels-last input. The results equal the contiguous copy's within float
    rounding (other convolution kernels, same arithmetic).
    """
    if decode not in (None, "nms", "topk"):
        raise ValueError(f"decode must be None, 'nms' or 'topk', got {decode!r}")
    # Default: NMS for every family. For YOLO26 that is the one-to-many branch + NMS, what the reference's plain
    # predict uses (fixture README "import_yolo26n-seg-shapes.pt", decode branch); "topk" = its NMS-free branch.
    mode: Literal["nms", "topk"] = decode if decode is not None else "nms"
    prepared = copy.deepcopy(model)
    if device is not None:
        prepared.to(device)
    prepared.eval()
    if fuse:
        fuse_model(prepared)  # in place: Conv+BN pairs folded
    first = next(prepared.parameters(), None)
    on_cpu = first is None or first.device.type == "cpu"
    if channels_last if channels_last is not None else on_cpu:
        prepared.to(memory_format=torch.channels_last)
    return prepared, mode


def _wants_channels_last(net: nn.Module) -> bool:
    """Whether ``net``'s first spatial convolution weight is stored channels-last (then its input should be too;
    a 1x1 kernel is both formats at once, so it cannot tell)."""
    for module in net.modules():
        if isinstance(module, nn.Conv2d) and module.weight.shape[-2:] != (1, 1):
            return bool(module.weight.is_contiguous(memory_format=torch.channels_last))
    return False


# model -> (its parameter signature, decode, device) -> prepared copy; entries die with their model.
_Prepared = tuple[tuple[tuple[int, int, int], ...], YOLOModel, Literal["nms", "topk"]]
_PREPARED: weakref.WeakKeyDictionary[YOLOModel, dict[tuple[Any, ...], _Prepared]] = (
    weakref.WeakKeyDictionary()
)


def parameter_signature(model: nn.Module) -> tuple[tuple[int, int, int], ...]:
    """Identity and version of every parameter and buffer: ``(id, data_ptr, _version)`` per tensor.

    Any change to the weights changes it — an optimizer step or ``load_state_dict`` bumps the in-place version
    counter, replacing a tensor changes its identity — so a prepared copy keyed by it is never stale.
    """
    # A direct walk of the module tree's own dicts: ``parameters()``/``buffers()`` build prefixed names and
    # de-duplication sets per call: 1.5 ms against 0.6 ms for yolo26n, on every ``predict`` call. A tensor
    # shared by two modules simply appears twice; the order is deterministic.
    signature: list[tuple[int, int, int]] = []
    stack: list[nn.Module] = [model]
    seen: set[int] = (
        set()
    )  # a module reachable twice (shared, or a cycle) is walked once, as named_modules does
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        for tensors in (module._parameters, module._buffers):
            for t in tensors.values():
                if t is not None:
                    signature.append((id(t), t.data_ptr(), t._version))
        stack.extend(child for child in reversed(module._modules.values()) if child is not None)
    return tuple(signature)


def cached_inference_model(
    model: YOLOModel, *, decode: DecodeChoice = None, device: str | torch.device | None = None
) -> tuple[YOLOModel, Literal["nms", "topk"]]:
    """:func:`prepare_inference_model` of ``model``, reused by later calls until its parameters change.

    Repeated ``predict(model, image)`` calls therefore fuse the model once; training the model, loading
    other weights into it or replacing a tensor makes the next call prepare a fresh copy (the check is
    :func:`parameter_signature`, not a flag to remember). Only the latest copy per (decode, device) is kept.
    """
    key = (decode, str(torch.device(device)) if device is not None else None)
    signature = parameter_signature(model)
    per_model = _PREPARED.setdefault(model, {})
    entry = per_model.get(key)
    if entry is not None and entry[0] == signature:
        return entry[1], entry[2]
    net, mode = prepare_inference_model(model, decode=decode, device=device)
    per_model[key] = (signature, net, mode)
    return net, mode


#: How many checkpoint paths :func:`weights_for_predict` keeps loaded (the most recently used ones).
LOADED_PATHS_KEPT = 2
_FileIdentity = tuple[tuple[str, int, int, int, int] | None, ...]
_LOADED: OrderedDict[str, tuple[_FileIdentity, YOLOModel]] = OrderedDict()
_LOADED_LOCK = threading.Lock()


def _file_identity(path: str | os.PathLike[str]) -> _FileIdentity:
    """``(name, device, inode, size, mtime_ns)`` of every file loading ``path`` reads (None where absent).

    Rewriting a file changes its size or mtime, and an atomic replace (how lucid-core saves) gives it a new inode,
    so an equal identity means the same bytes would be read again.
    """
    identity: list[tuple[str, int, int, int, int] | None] = []
    for file in source_files(path):
        try:
            st = file.stat()
        except OSError:
            identity.append(None)
        else:
            identity.append((str(file), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(identity)


def weights_for_predict(path: str | os.PathLike[str]) -> YOLOModel:
    """The model :func:`lucid_core.load` reads from ``path``, read once while its files are unchanged.

    The loaded model is kept, keyed by the resolved path and the files' identity (:func:`_file_identity`), for the
    :data:`LOADED_PATHS_KEPT` most recently used paths; a file that changed is read again, and errors are raised
    (and nothing kept) exactly as ``load`` raises them. The kept model is private to ``predict``: it is never
    returned to the caller, so nothing can modify it.
    """
    key = str(Path(path).resolve())
    identity = _file_identity(path)
    with _LOADED_LOCK:
        entry = _LOADED.get(key)
        if entry is not None and entry[0] == identity:
            _LOADED.move_to_end(key)
            return entry[1]
    model = load(path).model
    if _file_identity(path) == identity:  # unchanged while it was read: safe to keep
        with _LOADED_LOCK:
            _LOADED[key] = (identity, model)
            _LOADED.move_to_end(key)
            while len(_LOADED) > LOADED_PATHS_KEPT:
                _LOADED.popitem(last=False)
    return model


def _to_original(det: Detections, info: LetterboxInfo, *, masks_in_original: bool = False) -> Detections:
    out = Detections(
        boxes=scale_boxes_back(det.boxes, info),
        scores=det.scores,
        labels=det.labels,
    )
    if det.rboxes is not None:
        out.rboxes = scale_rboxes_back(det.rboxes, info)
        out.boxes = rboxes_to_xyxy(
            out.rboxes
        )  # the hull of the mapped rotated box, not clipped (README step 3)
    if det.keypoints is not None:
        out.keypoints = scale_keypoints_back(det.keypoints, info)
    if det.masks is not None:
        out.masks = det.masks if masks_in_original else scale_masks_back(det.masks, info)
    return out


def predict(
    model_or_path: YOLOModel | str | os.PathLike[str],
    images: ImageInput | Sequence[ImageInput],
    imgsz: int | tuple[int, int] = 640,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device | None = None,
    decode: DecodeChoice = None,
    retina_masks: bool = False,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
) -> list[Detections]:
    """Detect objects in ``images``; one :class:`Detections` per image, in original-image pixels, on the CPU.

    ``model_or_path``: a :class:`YOLOModel` (left untouched: a fused copy is used) or anything
    :func:`lucid_core.load` reads (lucid-core weights or a reference ``.pt``), read again only when its files
    change (:func:`weights_for_predict`). ``images``: one image or a list
    (paths, PIL images, HWC uint8 RGB arrays, CHW uint8 tensors, or a BCHW uint8 tensor). ``decode``: ``None`` = ``"nms"`` (for YOLO26 its one-to-many branch + NMS, the reference's default), or ``"topk"``
    (YOLO26's NMS-free one-to-one branch).
    ``retina_masks``: segment masks computed at the original resolution (the reference's ``retina_masks=True``)
    instead of at the input size and then resized (fixture README "import_yolo26n-seg-shapes.pt").
    ``classes``: keep only these class ids (filtered before NMS and ``max_det``, as the reference's ``classes=``);
    ``agnostic_nms``: class-agnostic NMS (top-k: one class per anchor), the reference's ``agnostic_nms=``. Both
    decoders follow the reference's results for these two arguments (measured black-box, docs/INFERENCE.md).

    Process-wide state is left alone. A program calling ``predict`` in a loop can opt in to the malloc policy
    ``lucid-predict`` uses by calling :func:`lucid_core.allocator.tune_glibc_malloc` once (fewer page faults per
    call; the process then keeps its peak heap).
    """
    if isinstance(model_or_path, str | os.PathLike):
        model = weights_for_predict(model_or_path)
    elif isinstance(model_or_path, YOLOModel):
        model = model_or_path
    else:
        raise TypeError(
            f"predict: expected a YOLOModel or a checkpoint path, got {type(model_or_path).__name__}"
        )
    if device is None:
        first = next(model.parameters(), None)
        device = first.device if first is not None else torch.device("cpu")
    net, mode = cached_inference_model(model, decode=decode, device=device)
    return predict_prepared(
        net,
        images,
        mode=mode,
        imgsz=imgsz,
        conf=conf,
        iou=iou,
        max_det=max_det,
        device=device,
        retina_masks=retina_masks,
        classes=classes,
        agnostic_nms=agnostic_nms,
    )


def predict_prepared(
    net: YOLOModel,
    images: ImageInput | Sequence[ImageInput],
    *,
    mode: Literal["nms", "topk"],
    imgsz: int | tuple[int, int] = 640,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device = "cpu",
    retina_masks: bool = False,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
) -> list[Detections]:
    """:func:`predict` with a model already made ready by :func:`prepare_inference_model` (reused across calls).

    Like :func:`predict`, it changes no process-wide state (the malloc opt-in is described there).
    """
    class_filter(classes, net.num_classes, torch.device("cpu"))  # a bad list fails before any image is read
    stride = max(net.strides)
    memory_format = torch.channels_last if _wants_channels_last(net) else torch.contiguous_format
    results: list[Detections] = []
    for item in _image_list(images):
        rgb = as_rgb_tensor(item)
        padded, info = letterbox(rgb, imgsz, auto=True, stride=stride)
        x = padded[None].to(device=device, dtype=torch.float32, memory_format=memory_format) / 255
        with torch.inference_mode():
            output = forward_for_decode(net, x, mode)
        if isinstance(output, TrainOutput):
            raise RuntimeError("predict: the model returned training outputs in eval mode")
        (det,) = postprocess(
            output,
            task=net.task,
            nc=net.num_classes,
            mode=mode,
            conf=conf,
            iou=iou,
            max_det=max_det,
            kpt_shape=net.kpt_shape,
            input_hw=info.input_hw,
            retina_letterbox=info if retina_masks else None,
            classes=classes,
            agnostic=agnostic_nms,
        )
        results.append(_to_original(det.to("cpu"), info, masks_in_original=retina_masks))
    return results


def list_image_files(source: str | os.PathLike[str]) -> list[Path]:
    """A file, or the image files (by extension, sorted) directly inside a folder."""
    path = Path(source)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    return [path]


IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".avif", ".heic"})
