"""``predict``: any source in, one :class:`~lucid_core.results.Results` per image or frame out, in original pixels.

Pipeline per frame: the source's frames (:mod:`lucid_core.sources`: files decoded by
``torchvision.io.decode_image(mode=RGB, apply_exif_orientation=True)``, videos and streams by OpenCV, in a
background thread), letterbox to ``imgsz`` with ``auto=True`` (minimum stride-multiple rectangle, as the reference
predictor does — shared/fixtures/README.md "Input pipeline"; a task whose input is not letterboxed,
:attr:`lucid_core.tasks.Task.letterbox`, is resized on its shorter side and centre-cropped instead: classification),
``/255`` in float32, forward through the model (BN
folded for inference; ``batch`` frames at once), decode (:func:`lucid_core.postprocess`), then undo the letterbox
with per-axis gains (boxes and keypoints clipped to the image; rotated boxes not clipped; masks cropped and
resized).

Decoding: class-aware NMS for every family by default; for end-to-end models (yolo26) that is the one-to-many
branch + NMS, the reference's default, and ``decode="topk"`` selects the NMS-free one-to-one branch.

A checkpoint path is read once while its files are unchanged (:func:`weights_for_predict`), and a model is
BN-folded once until its weights change (:func:`cached_inference_model`), so ``predict`` in a loop pays neither
again. :func:`predict_prepared` is the list-of-images core that evaluation and tiling use (``Detections`` out).
Nothing here changes process-wide state (malloc policy, threads, warning filters).
"""

from __future__ import annotations

import copy
import functools
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import torch
from torch import Tensor, nn

from lucid_core.checkpoint import load, source_files
from lucid_core.decode import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF
from lucid_core.decode.selection import class_filter
from lucid_core.geometry.center_crop import center_crop, center_crop_geometry
from lucid_core.geometry.letterbox import (
    LetterboxInfo,
    letterbox,
    letterbox_geometry,
    scale_boxes_back,
    scale_keypoints_back,
    scale_masks_back,
    scale_rboxes_back,
)
from lucid_core.geometry.resize import resize_bilinear_uint8
from lucid_core.geometry.rotated import rboxes_to_xyxy
from lucid_core.models import TrainOutput, YOLOModel
from lucid_core.nn.fuse import fuse_model
from lucid_core.postprocess import postprocess
from lucid_core.results import Detections, Results
from lucid_core.sources import (
    IMAGE_SUFFIXES,
    Frame,
    FrameReader,
    ImageLoadError,
    SourceError,
    load_image_rgb,
    optional_cv2,
)
from lucid_core.tasks import get_task
from lucid_core.tiles import MERGE_NMS_IOU, TileDetections, merge_tiles, slice_windows

__all__ = [
    "IMAGE_SUFFIXES",
    "LOADED_PATHS_KEPT",
    "DecodeChoice",
    "ImageInput",
    "ImageLoadError",
    "as_rgb_tensor",
    "cached_inference_model",
    "center_crop_frame",
    "checkpoint_for_predict",
    "decode_branch",
    "forward_for_decode",
    "frame_input",
    "letterbox_frame",
    "list_image_files",
    "load_image_rgb",
    "network_input",
    "parameter_signature",
    "predict",
    "predict_frame_pairs",
    "predict_frames",
    "predict_prepared",
    "prepare_inference_model",
    "weights_for_predict",
]

ImageInput = str | os.PathLike[str] | np.ndarray[Any, Any] | Tensor | Any
DecodeChoice = Literal["nms", "topk"] | None


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
    # an exported model holds one branch and says which decode reads it
    own = getattr(model, "decode", None)
    mode: Literal["nms", "topk"] = decode if decode is not None else ("topk" if own == "topk" else "nms")
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


def wants_channels_last(net: nn.Module) -> bool:
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
_LOADED: OrderedDict[str, tuple[_FileIdentity, YOLOModel, list[str]]] = OrderedDict()
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


def checkpoint_for_predict(path: str | os.PathLike[str]) -> tuple[YOLOModel, list[str]]:
    """The model and class names :func:`lucid_core.load` reads from ``path``, read once while its files are
    unchanged.

    Kept, keyed by the resolved path and the files' identity (:func:`_file_identity`), for the
    :data:`LOADED_PATHS_KEPT` most recently used paths; a file that changed is read again, and errors are raised
    (and nothing kept) exactly as ``load`` raises them. The kept model is private to ``predict``: it is never
    returned to a caller of ``predict``, so nothing can modify it.
    """
    key = str(Path(path).resolve())
    identity = _file_identity(path)
    with _LOADED_LOCK:
        entry = _LOADED.get(key)
        if entry is not None and entry[0] == identity:
            _LOADED.move_to_end(key)
            return entry[1], entry[2]
    checkpoint = load(path)
    model, names = checkpoint.model, list(checkpoint.names)
    if _file_identity(path) == identity:  # unchanged while it was read: safe to keep
        with _LOADED_LOCK:
            _LOADED[key] = (identity, model, names)
            _LOADED.move_to_end(key)
            while len(_LOADED) > LOADED_PATHS_KEPT:
                _LOADED.popitem(last=False)
    return model, names


def weights_for_predict(path: str | os.PathLike[str]) -> YOLOModel:
    """The model of :func:`checkpoint_for_predict` (read once while the files at ``path`` are unchanged)."""
    return checkpoint_for_predict(path)[0]


def detections_to_original(
    det: Detections, info: LetterboxInfo, *, masks_in_original: bool = False
) -> Detections:
    """``det`` from network-input pixels back through the letterbox ``info`` (original, or tile, pixels): boxes,
    rotated boxes (their box becomes the mapped rotated box's hull), keypoints and masks (unless
    ``masks_in_original``: already at the original size)."""
    out = Detections(
        boxes=scale_boxes_back(det.boxes, info),
        scores=det.scores,
        labels=det.labels,
        probs=det.probs,  # image-level: no pixel frame
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


@overload
def predict(
    model_or_path: YOLOModel | str | os.PathLike[str],
    source: Any,
    imgsz: int | tuple[int, int] = ...,
    conf: float = ...,
    iou: float = ...,
    max_det: int = ...,
    device: str | torch.device | None = ...,
    decode: DecodeChoice = ...,
    retina_masks: bool = ...,
    classes: Sequence[int] | None = ...,
    agnostic_nms: bool = ...,
    *,
    stream: Literal[False] = ...,
    batch: int = ...,
    vid_stride: int = ...,
    names: Sequence[str] | None = ...,
    on_error: Callable[[SourceError], None] | None = ...,
    slice: int | None = ...,
    overlap: float = ...,
) -> list[Results]: ...


@overload
def predict(
    model_or_path: YOLOModel | str | os.PathLike[str],
    source: Any,
    imgsz: int | tuple[int, int] = ...,
    conf: float = ...,
    iou: float = ...,
    max_det: int = ...,
    device: str | torch.device | None = ...,
    decode: DecodeChoice = ...,
    retina_masks: bool = ...,
    classes: Sequence[int] | None = ...,
    agnostic_nms: bool = ...,
    *,
    stream: Literal[True],
    batch: int = ...,
    vid_stride: int = ...,
    names: Sequence[str] | None = ...,
    on_error: Callable[[SourceError], None] | None = ...,
    slice: int | None = ...,
    overlap: float = ...,
) -> Iterator[Results]: ...


def predict(
    model_or_path: YOLOModel | str | os.PathLike[str],
    source: Any,
    imgsz: int | tuple[int, int] = 640,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device | None = None,
    decode: DecodeChoice = None,
    retina_masks: bool = False,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    *,
    stream: bool = False,
    batch: int = 1,
    vid_stride: int = 1,
    names: Sequence[str] | None = None,
    on_error: Callable[[SourceError], None] | None = None,
    slice: int | None = None,
    overlap: float = 0.2,
) -> list[Results] | Iterator[Results]:
    """Detect objects in every image or frame of ``source``: one :class:`~lucid_core.results.Results` each, in
    original-image pixels, on the CPU.

    ``model_or_path``: a :class:`YOLOModel` (left untouched: a fused copy is used) or anything
    :func:`lucid_core.load` reads (lucid-core weights or a reference ``.pt``), read again only when its files
    change (:func:`weights_for_predict`). ``source``: anything :func:`lucid_core.sources.expand_source` takes —
    image files, folders, globs, ``.txt`` lists, image URLs, video files, stream URLs, camera indices, numpy
    arrays (**BGR**, as OpenCV gives them), PIL images, CHW/BCHW tensors (RGB, uint8 or 0–1), or a list of these;
    videos and streams need the ``video`` extra (OpenCV).

    ``stream=False`` returns a list; ``stream=True`` a generator that decodes ahead in a background thread and
    keeps nothing once a result is handed out, so memory stays flat over any length of video or stream.
    ``batch``: frames per forward pass (consecutive frames whose letterboxed size is equal); ``vid_stride``: every
    n-th frame of videos and streams. ``names``: class names of the results (default: the checkpoint's, or the
    class indices). A source that cannot be read raises its :class:`~lucid_core.sources.SourceError`, or with
    ``on_error`` is handed to it and skipped.

    ``decode``: ``None`` = ``"nms"`` (for YOLO26 its one-to-many branch + NMS, the reference's default), or
    ``"topk"`` (YOLO26's NMS-free one-to-one branch). ``retina_masks``: segment masks computed at the original
    resolution (the reference's ``retina_masks=True``) instead of at the input size and then resized.
    ``classes``: keep only these class ids (filtered before NMS and ``max_det``, as the reference's ``classes=``);
    ``agnostic_nms``: class-agnostic NMS (top-k: one class per anchor), the reference's ``agnostic_nms=``.
    ``slice``: sliced inference for small objects on large images — each frame is cut into ``slice``-pixel tiles
    overlapping by the fraction ``overlap``, ``batch`` tiles per forward pass, each letterboxed to ``imgsz``, and
    the tiles' detections merged in original pixels (:func:`sliced_frame_detections`, :mod:`lucid_core.tiles`);
    tasks with boxes only (not classification).

    Process-wide state is left alone. A program calling ``predict`` in a loop can opt in to the malloc policy
    ``lucid-predict`` uses by calling :func:`lucid_core.allocator.tune_glibc_malloc` once.
    """
    if isinstance(model_or_path, str | os.PathLike):
        model, stored_names = checkpoint_for_predict(model_or_path)
    elif isinstance(model_or_path, YOLOModel):
        model, stored_names = model_or_path, None
    else:
        raise TypeError(
            f"predict: expected a YOLOModel or a checkpoint path, got {type(model_or_path).__name__}"
        )
    if int(batch) < 1:
        raise ValueError(f"predict: batch must be a positive integer, got {batch}")
    if device is None:
        first = next(model.parameters(), None)
        device = first.device if first is not None else torch.device("cpu")
    net, mode = cached_inference_model(model, decode=decode, device=device)
    class_filter(classes, net.num_classes, torch.device("cpu"))  # a bad list fails before any image is read
    label_names = list(names or stored_names or [str(i) for i in range(net.num_classes)])
    check_slicing(net, slice, overlap)
    reader = FrameReader(
        source,
        vid_stride=vid_stride,
        depth=max(2, 2 * int(batch)),
        live_capacity=max(2, int(batch)),
        on_error=on_error,
    )
    results = predict_frames(
        net,
        reader,
        mode=mode,
        names=label_names,
        imgsz=imgsz,
        conf=conf,
        iou=iou,
        max_det=max_det,
        device=device,
        retina_masks=retina_masks,
        classes=classes,
        agnostic_nms=agnostic_nms,
        batch=int(batch),
        slice=slice,
        overlap=overlap,
    )
    return _closing(results, reader) if stream else list(_closing(results, reader))


def _closing(results: Iterator[Results], reader: FrameReader) -> Iterator[Results]:
    """``results``, closing ``reader`` when the generator ends, fails or is closed."""
    try:
        yield from results
    finally:
        reader.close()


_Pending = tuple[Frame, Tensor, LetterboxInfo, float]


def _resize_hwc(image: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
    """``cv2.resize(image, size_wh, INTER_LINEAR)`` of an H×W×C uint8 array: OpenCV's when installed, else
    :func:`~lucid_core.geometry.resize.resize_bilinear_uint8`, which equals it bit for bit (test_core_resize)."""
    cv2 = optional_cv2()
    if cv2 is None:  # without the `video` extra the torch re-implementation gives the same pixels
        chw = torch.from_numpy(image).permute(2, 0, 1)
        return resize_bilinear_uint8(chw, size_wh).permute(1, 2, 0).numpy()
    resized: np.ndarray = cv2.resize(image, size_wh, interpolation=cv2.INTER_LINEAR)
    return resized if resized.ndim == 3 else resized[:, :, None]


def _swap_red_blue(image: np.ndarray) -> np.ndarray:
    """A contiguous copy of an H×W×3 uint8 array with its first and last channels swapped (BGR <-> RGB):
    OpenCV's ``cvtColor`` when installed (a vectorised kernel), else a numpy copy of the reversed view."""
    cv2 = optional_cv2()
    if cv2 is None:
        return np.ascontiguousarray(image[..., ::-1])
    swapped: np.ndarray = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    return swapped


def letterbox_frame(
    image: np.ndarray, imgsz: int | tuple[int, int], *, stride: int = 32, fill: int = 114
) -> tuple[Tensor, LetterboxInfo]:
    """The letterboxed network input of a BGR H×W×3 frame as an RGB H×W×3 uint8 tensor (``auto=True``).

    Its pixels are exactly those :func:`~lucid_core.geometry.letterbox.letterbox` gives for the RGB image (the
    resize works per channel, so resizing before swapping the channels changes nothing); laid out H×W×C, a batch
    of them is already in the channels-last memory format the CPU model reads.
    """
    h, w = int(image.shape[0]), int(image.shape[1])
    info = letterbox_geometry((h, w), imgsz, auto=True, stride=stride)
    new_w, new_h = info.new_unpad_wh
    rgb = _swap_red_blue(image if (new_w, new_h) == (w, h) else _resize_hwc(image, (new_w, new_h)))
    if (new_h, new_w) == tuple(info.input_hw):
        return torch.from_numpy(rgb), info
    out = np.full((*info.input_hw, 3), fill, dtype=np.uint8)
    out[info.top : info.top + new_h, info.left : info.left + new_w] = rgb
    return torch.from_numpy(out), info


def center_crop_frame(
    image: np.ndarray, imgsz: int | tuple[int, int], *, stride: int = 32, fill: int = 114
) -> tuple[Tensor, LetterboxInfo]:
    """The classification network input of a BGR H×W×3 frame as an RGB H×W×3 uint8 tensor: resized on its
    shorter side and centre-cropped to ``imgsz`` (:mod:`lucid_core.geometry.center_crop`; ``stride`` and ``fill``
    unused: nothing is padded). The pixels equal :func:`~lucid_core.geometry.center_crop.center_crop`'s."""
    info = center_crop_geometry((int(image.shape[0]), int(image.shape[1])), imgsz)
    new_w, new_h = info.new_unpad_wh
    same = (new_w, new_h) == (image.shape[1], image.shape[0])
    resized = image if same else _resize_hwc(image, (new_w, new_h))
    (h, w), top, left = info.input_hw, -info.top, -info.left
    return torch.from_numpy(np.ascontiguousarray(resized[top : top + h, left : left + w, ::-1])), info


def frame_input(net: YOLOModel) -> Callable[..., tuple[Tensor, LetterboxInfo]]:
    """How a frame becomes ``net``'s input: :func:`letterbox_frame`, or :func:`center_crop_frame` for a task
    whose input is not letterboxed (:attr:`lucid_core.tasks.Task.letterbox`: classification)."""
    return letterbox_frame if get_task(str(net.task)).letterbox else center_crop_frame


def predict_frames(
    net: YOLOModel,
    frames: Iterable[Frame],
    *,
    mode: Literal["nms", "topk"],
    names: Sequence[str],
    imgsz: int | tuple[int, int] = 640,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device = "cpu",
    retina_masks: bool = False,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    batch: int = 1,
    slice: int | None = None,
    overlap: float = 0.2,
) -> Iterator[Results]:
    """The streaming core of :func:`predict`: one :class:`Results` per frame of ``frames`` (BGR
    :class:`~lucid_core.sources.Frame` objects), with a model made ready by :func:`prepare_inference_model`.

    Up to ``batch`` consecutive frames of equal letterboxed size share one forward pass; a frame is handed out
    as soon as its batch is done, and nothing is kept after. With ``slice``, every frame is predicted on its tiles
    (:func:`sliced_frame_detections`, ``batch`` tiles per forward pass).
    """
    pairs = predict_frame_pairs(
        net,
        frames,
        mode=mode,
        names=names,
        imgsz=imgsz,
        conf=conf,
        iou=iou,
        max_det=max_det,
        device=device,
        retina_masks=retina_masks,
        classes=classes,
        agnostic_nms=agnostic_nms,
        batch=batch,
        slice=slice,
        overlap=overlap,
    )
    try:
        for _, result in pairs:
            yield result
    finally:
        pairs.close()


def predict_frame_pairs(
    net: YOLOModel,
    frames: Iterable[Frame],
    *,
    mode: Literal["nms", "topk"],
    names: Sequence[str],
    imgsz: int | tuple[int, int] = 640,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device = "cpu",
    retina_masks: bool = False,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    batch: int = 1,
    slice: int | None = None,
    overlap: float = 0.2,
) -> Generator[tuple[Frame, Results], None, None]:
    """:func:`predict_frames` yielding each frame with its result (for writers that need the frame's source)."""
    stride = max(net.strides)
    prepare_frame = frame_input(net)
    memory_format = torch.channels_last if wants_channels_last(net) else torch.contiguous_format
    if slice is not None:
        check_slicing(net, slice, overlap)
        for frame in frames:
            start = time.perf_counter()
            det = sliced_frame_detections(
                net,
                frame.image,
                mode=mode,
                imgsz=imgsz,
                slice=slice,
                overlap=overlap,
                batch=batch,
                conf=conf,
                iou=iou,
                max_det=max_det,
                device=device,
                retina_masks=retina_masks,
                classes=classes,
                agnostic_nms=agnostic_nms,
                memory_format=memory_format,
            )
            yield (
                frame,
                _frame_results(frame, det, names, net, {"inference": (time.perf_counter() - start) * 1e3}),
            )
        return
    run = functools.partial(
        _predict_batch,
        net,
        mode=mode,
        names=names,
        conf=conf,
        iou=iou,
        max_det=max_det,
        device=device,
        retina_masks=retina_masks,
        classes=classes,
        agnostic_nms=agnostic_nms,
        memory_format=memory_format,
    )
    pending: list[_Pending] = []
    for frame in frames:
        start = time.perf_counter()
        padded, info = prepare_frame(frame.image, imgsz, stride=stride)
        prep_s = time.perf_counter() - start
        if pending and pending[0][2].input_hw != info.input_hw:
            yield from run(pending)
            pending = []
        pending.append((frame, padded, info, prep_s))
        if len(pending) >= batch:
            yield from run(pending)
            pending = []
    if pending:
        yield from run(pending)


def network_input(
    images: Sequence[Tensor], *, device: str | torch.device = "cpu", memory_format: torch.memory_format
) -> Tensor:
    """The network's float input in [0, 1], ``(B, 3, H, W)`` in ``memory_format``, of letterboxed H×W×3 uint8
    images of one size (:func:`letterbox_frame`'s output)."""
    stacked = torch.stack(list(images)).permute(0, 3, 1, 2)  # NCHW view of NHWC memory: channels-last
    return stacked.to(device=device, dtype=torch.float32, memory_format=memory_format).div_(255)


def _select(output: Any, index: int) -> Any:
    """Image ``index`` of a batched model output (a tensor, or a tuple/list of them), keeping the batch axis."""
    if isinstance(output, Tensor):
        return output[index : index + 1]
    if isinstance(output, tuple | list):
        return type(output)(_select(part, index) for part in output)
    return output


def _predict_batch(
    net: YOLOModel,
    pending: Sequence[_Pending],
    *,
    mode: Literal["nms", "topk"],
    names: Sequence[str],
    conf: float,
    iou: float,
    max_det: int,
    device: str | torch.device,
    retina_masks: bool,
    classes: Sequence[int] | None,
    agnostic_nms: bool,
    memory_format: torch.memory_format,
) -> Iterator[tuple[Frame, Results]]:
    start = time.perf_counter()
    x = network_input([padded for _, padded, _, _ in pending], device=device, memory_format=memory_format)
    with torch.inference_mode():
        output = forward_for_decode(net, x, mode)
    if isinstance(output, TrainOutput):
        raise RuntimeError("predict: the model returned training outputs in eval mode")
    infer_ms = (time.perf_counter() - start) * 1e3 / len(pending)
    for index, (frame, _, info, prep_s) in enumerate(pending):
        start = time.perf_counter()
        det = decode_to_original(
            net,
            _select(output, index) if len(pending) > 1 else output,
            info,
            mode=mode,
            conf=conf,
            iou=iou,
            max_det=max_det,
            retina_masks=retina_masks,
            classes=classes,
            agnostic_nms=agnostic_nms,
        )
        post_ms = (time.perf_counter() - start) * 1e3
        speed = {"preprocess": prep_s * 1e3, "inference": infer_ms, "postprocess": post_ms}
        yield frame, _frame_results(frame, det, names, net, speed)


def decode_to_original(
    net: YOLOModel,
    output: Any,
    info: LetterboxInfo,
    *,
    mode: Literal["nms", "topk"],
    conf: float,
    iou: float,
    max_det: int,
    retina_masks: bool,
    classes: Sequence[int] | None,
    agnostic_nms: bool,
) -> Detections:
    """One image's network ``output`` (batch axis of 1) decoded by :func:`~lucid_core.postprocess.postprocess`
    and mapped from the input ``info`` describes back to original-image pixels, on the CPU."""
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
    return detections_to_original(det.to("cpu"), info, masks_in_original=retina_masks)


def _frame_results(
    frame: Frame, det: Detections, names: Sequence[str], net: YOLOModel, speed: dict[str, float]
) -> Results:
    """The :class:`Results` of ``frame`` holding ``det`` (original pixels)."""
    return Results(
        det,
        names=names,
        orig_img=frame.image,
        orig_shape=frame.shape,
        path=frame.source,
        frame=None if frame.kind == "image" else frame.index,
        speed=speed,
        task=net.task,
    )


def check_slicing(net: YOLOModel, slice: int | None, overlap: float) -> None:
    """A ValueError naming the value unless ``slice``/``overlap`` can tile ``net``'s inputs (None: no slicing)."""
    if slice is None:
        return
    if not get_task(str(net.task)).letterbox:
        raise ValueError(
            f"predict: slice={slice}: sliced inference needs a task with boxes, not {net.task!r}"
        )
    if int(slice) < 1:
        raise ValueError(f"predict: slice must be a positive number of pixels, got {slice}")
    if not 0.0 <= float(overlap) < 1.0:
        raise ValueError(f"predict: overlap must be a fraction in [0, 1), got {overlap}")


def sliced_frame_detections(
    net: YOLOModel,
    image: np.ndarray,
    *,
    mode: Literal["nms", "topk"],
    imgsz: int | tuple[int, int] = 640,
    slice: int = 640,
    overlap: float = 0.2,
    batch: int = 8,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device = "cpu",
    retina_masks: bool = False,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    merge_iou: float = MERGE_NMS_IOU,
    memory_format: torch.memory_format | None = None,
) -> Detections:
    """Detections of a BGR H×W×3 frame predicted on ``slice``-pixel tiles overlapping by ``overlap``
    (:func:`~lucid_core.tiles.slice_windows`), ``batch`` tiles per forward pass, each letterboxed to ``imgsz`` and
    decoded like a whole image (``conf``, ``iou``, ``max_det`` per tile), then merged in original pixels
    (:func:`~lucid_core.tiles.merge_tiles`, IoU ``merge_iou``; ``max_det`` caps the merge). A frame no larger than
    ``slice`` is one tile: the whole-image result."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if memory_format is None:
        memory_format = torch.channels_last if wants_channels_last(net) else torch.contiguous_format
    stride = max(net.strides)
    h, w = int(image.shape[0]), int(image.shape[1])
    windows = slice_windows(h, w, slice, overlap)
    tiles: list[TileDetections] = []
    for begin in range(0, len(windows), batch):
        chunk = windows[begin : begin + batch]
        prepared = [
            letterbox_frame(np.ascontiguousarray(image[y0:y1, x0:x1]), imgsz, stride=stride)
            for x0, y0, x1, y1 in chunk
        ]
        info = prepared[0][1]  # every window of an image has the same size: one letterbox for all
        x = network_input([padded for padded, _ in prepared], device=device, memory_format=memory_format)
        with torch.inference_mode():
            output = forward_for_decode(net, x, mode)
        if isinstance(output, TrainOutput):
            raise RuntimeError("predict: the model returned training outputs in eval mode")
        for index, window in enumerate(chunk):
            one = _select(output, index) if len(chunk) > 1 else output
            det = decode_to_original(
                net,
                one,
                info,
                mode=mode,
                conf=conf,
                iou=iou,
                max_det=max_det,
                retina_masks=retina_masks,
                classes=classes,
                agnostic_nms=agnostic_nms,
            )
            tiles.append(TileDetections(window, det))
    if len(tiles) == 1:
        return tiles[0].detections
    return merge_tiles(tiles, (h, w), merge_iou=merge_iou, max_det=max_det, agnostic=agnostic_nms)


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
    boxed = get_task(str(net.task)).letterbox  # else shorter-side resize + centre crop (classification)
    memory_format = torch.channels_last if wants_channels_last(net) else torch.contiguous_format
    results: list[Detections] = []
    for item in _image_list(images):
        rgb = as_rgb_tensor(item)
        padded, info = letterbox(rgb, imgsz, auto=True, stride=stride) if boxed else center_crop(rgb, imgsz)
        x = padded[None].to(device=device, dtype=torch.float32, memory_format=memory_format) / 255
        with torch.inference_mode():
            output = forward_for_decode(net, x, mode)
        if isinstance(output, TrainOutput):
            raise RuntimeError("predict: the model returned training outputs in eval mode")
        det = decode_to_original(
            net,
            output,
            info,
            mode=mode,
            conf=conf,
            iou=iou,
            max_det=max_det,
            retina_masks=retina_masks,
            classes=classes,
            agnostic_nms=agnostic_nms,
        )
        results.append(det)
    return results


def list_image_files(source: str | os.PathLike[str]) -> list[Path]:
    """A file, or the image files (by extension, sorted) directly inside a folder."""
    path = Path(source)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    return [path]
