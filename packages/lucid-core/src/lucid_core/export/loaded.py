"""An exported model loaded back as a module the predictor and evaluator run like a :class:`YOLOModel`.

:func:`exported_kind` says which format a path is (``.onnx``, ``.torchscript``, ``.engine``, an OpenVINO IR folder
or its ``.xml``; a Core ML package is recognised and refused: its runtime is macOS-only). :func:`load_exported`
reads the file and its metadata record (:mod:`.metadata`) and returns an :class:`ExportedModel`.

``ExportedModel.forward(x, branch=None)`` returns what ``YOLOModel`` returns in eval mode — the dense tensor
``(B, 4 + nc + extra, A)`` (and ``proto`` for segment) — so the decode stays lucid-core's:

- a ``"dense"`` export returns its output as is;
- a ``"topk"`` / ``"nms"`` export (rows ``x1, y1, x2, y2, score, class, extras``) returns one column per row
  with the class's score at its class and zeros elsewhere, which top-k (resp. NMS) decoding turns back into the
  same rows.

An end-to-end (YOLO26) export holds one head branch: the one-to-one branch (decoded with top-k:
:attr:`ExportedModel.decode` is ``"topk"``), or the one-to-many branch with ``--nms``; asking it for the other
branch is a ``ValueError`` naming the decode mode to use.

Input size: a file that takes any height and width (``runner.any_hw``: lucid-export's ONNX and OpenVINO files of
the dense or top-k output) runs every input that is a multiple of the stride at its own size, as PyTorch does —
unless the input has fewer anchors than a top-k graph's row count. Otherwise the exported size is fixed: a smaller
input (predict's minimal letterbox of a non-square image, a rectangular evaluation batch) is padded at the bottom
and right with the letterbox grey to the exported size and the anchors of the padding are dropped (the proto
cropped): the rows then match the input's own anchor grid, with values that differ from an export of that exact
size only near the padded border. A larger input is then a ``ValueError``. A fixed batch is run in chunks.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lucid_core.errors import CheckpointError
from lucid_core.export.metadata import IR_METADATA_FILE, sidecar_path
from lucid_core.export.runtime import (
    OnnxRunner,
    OpenVINORunner,
    Runner,
    TensorRTRunner,
    TorchScriptRunner,
    read_ir_metadata,
)
from lucid_core.models import ModelConfig, YOLOModel
from lucid_core.tasks import get_task

__all__ = ["EXPORTED_SUFFIXES", "ExportedModel", "exported_files", "exported_kind", "load_exported"]

#: file suffix -> exported format (an OpenVINO IR is also recognised as its folder)
EXPORTED_SUFFIXES = {
    ".onnx": "onnx",
    ".torchscript": "torchscript",
    ".engine": "engine",
    ".xml": "openvino",
    ".mlpackage": "coreml",
    ".mlmodel": "coreml",
}
#: the value of the letterbox padding in [0, 1]
PAD_VALUE = 114 / 255


def _ir_xml(folder: Path) -> Path | None:
    xmls = sorted(folder.glob("*.xml"))
    return xmls[0] if len(xmls) == 1 and (folder / IR_METADATA_FILE).is_file() else None


def exported_kind(path: str | Path) -> str | None:
    """The exported format ``path`` stands for (``"onnx"``, ``"torchscript"``, ``"openvino"``, ``"engine"``,
    ``"coreml"``), or None."""
    p = Path(path)
    if p.is_dir() and p.suffix != ".mlpackage":
        return "openvino" if _ir_xml(p) is not None else None
    return EXPORTED_SUFFIXES.get(p.suffix.lower())


def exported_files(path: str | Path) -> list[Path]:
    """The files loading ``path`` reads (present or not)."""
    p = Path(path)
    kind = exported_kind(p)
    if kind == "openvino":
        xml = _ir_xml(p) if p.is_dir() else p
        if xml is None:
            return [p / IR_METADATA_FILE]
        return [xml, xml.with_suffix(".bin"), xml.parent / IR_METADATA_FILE]
    return [p, sidecar_path(p)]


def _level_keep(hw: tuple[int, int], inner: tuple[int, int], strides: list[int]) -> Tensor:
    """Indices of the anchors (levels in stride order, row-major) that lie inside the top-left ``inner`` region."""
    keep = []
    offset = 0
    for s in strides:
        gh, gw = hw[0] // s, hw[1] // s
        rows = torch.arange(inner[0] // s)
        cols = torch.arange(inner[1] // s)
        keep.append(offset + (rows[:, None] * gw + cols[None, :]).flatten())
        offset += gh * gw
    return torch.cat(keep)


class ExportedModel(YOLOModel):
    """A runtime-backed stand-in for :class:`YOLOModel` (module docstring); it has no parameters and no head.

    Attributes the predictor reads: ``task``, ``family``, ``scale``, ``num_classes``, ``kpt_shape``, ``strides``,
    ``end2end``, ``config``; plus ``metadata`` (the record), ``output``, ``branch`` and ``decode`` (the decode
    mode its output needs), ``export_format``, ``names`` and ``imgsz`` ``(h, w)``.
    """

    def __init__(self, runner: Runner, metadata: dict[str, Any], source: Path) -> None:
        torch.nn.Module.__init__(self)
        config: dict[str, Any] = {
            k: (tuple(v) if isinstance(v, list) else v) for k, v in metadata["config"].items()
        }
        self.config = ModelConfig(**config)
        self.family, self.task, self.scale = self.config.family, self.config.task, self.config.scale
        self.num_classes = int(metadata["num_classes"])
        self.kpt_shape = self.config.kpt_shape
        self.end2end = bool(metadata.get("end2end", False))
        self.metadata = metadata
        self.output = str(metadata["output"])
        self.branch = metadata.get("branch")
        self.decode = str(metadata.get("decode", "nms"))
        self.export_format = str(metadata.get("export_format", ""))
        self.names = [str(n) for n in metadata["names"]]
        self.imgsz = (int(metadata["imgsz"][0]), int(metadata["imgsz"][1]))
        self.source = source
        self._strides = tuple(int(s) for s in metadata["strides"])
        self.runner = runner

    @property
    def strides(self) -> tuple[int, ...]:
        return self._strides

    @property
    def head(self) -> Any:
        raise AttributeError("an exported model has no head module (only its runtime graph)")

    def to_deployed(self) -> YOLOModel:
        raise ValueError("an exported model is already in its deployed form")

    def __deepcopy__(self, memo: dict[int, Any]) -> ExportedModel:
        """A shallow copy sharing the runtime session (there are no weights to copy)."""
        clone = copy.copy(self)
        clone.__dict__ = {
            k: (dict(v) if k in ("_parameters", "_buffers", "_modules") else v)
            for k, v in self.__dict__.items()
        }
        return clone

    def forward(self, x: Tensor, branch: str | None = None) -> Any:
        """The dense eval output of ``x`` ``(B, 3, H, W)`` in [0, 1] (module docstring)."""
        if branch is not None and self.branch is not None and branch != self.branch:
            raise ValueError(
                f"{self.source}: this {self.export_format} export holds the {self.branch} branch only; decode it "
                f"with {self.decode!r} (--decode {self.decode})"
            )
        h, w = int(x.shape[2]), int(x.shape[3])
        stride = max(self._strides)
        if h % stride or w % stride:
            raise ValueError(f"{self.source}: input {h}x{w} is not a multiple of the stride {stride}")
        eh, ew = (h, w) if self._runs_at((h, w)) else self.imgsz  # the size the runtime is fed
        if h > eh or w > ew:
            raise ValueError(
                f"{self.source}: input {h}x{w} is larger than the exported size {eh}x{ew}; predict with "
                f"--imgsz {max(eh, ew)} or export at the larger size"
            )
        device = x.device
        if (h, w) != (eh, ew):  # one copy, straight into the layout the runner feeds its runtime
            layout = getattr(self.runner, "memory_format", torch.contiguous_format)
            padded = torch.empty(
                (*x.shape[:2], eh, ew), dtype=torch.float32, device=device, memory_format=layout
            )
            padded.fill_(PAD_VALUE)
            padded[:, :, :h, :w] = x
            x = padded
        else:
            x = x.float()
        outputs = self._run_batches(x)
        pred, proto = (
            outputs[0].float().to(device),
            (outputs[1].float().to(device) if len(outputs) > 1 else None),
        )
        if self.output == "dense":
            if (h, w) != (eh, ew):
                pred = pred.index_select(-1, _level_keep((eh, ew), (h, w), list(self._strides)).to(device))
        else:
            pred = self._rows_to_dense(pred)
        if proto is not None:
            ratio = eh // int(proto.shape[2])
            proto = proto[..., : h // ratio, : w // ratio]
            return pred, proto
        return pred

    def _runs_at(self, hw: tuple[int, int]) -> bool:
        """Whether an input of size ``hw`` runs at its own size (module docstring, "Input size")."""
        if not getattr(self.runner, "any_hw", False):
            return False
        if self.output == "dense":
            return True
        rows = min(int(self.metadata.get("max_det", 0)), self._anchors(self.imgsz))  # the graph's top-k count
        return self._anchors(hw) >= rows

    def _anchors(self, hw: tuple[int, int]) -> int:
        return sum((hw[0] // s) * (hw[1] // s) for s in self._strides)

    def _run_batches(self, x: Tensor) -> list[Tensor]:
        batch = self.runner.batch
        if batch is None or int(x.shape[0]) == batch:
            return self.runner(x)
        chunks: list[list[Tensor]] = []
        for start in range(0, int(x.shape[0]), batch):
            part = x[start : start + batch]
            n = int(part.shape[0])
            if n < batch:  # the last chunk repeats its last image up to the fixed batch
                part = torch.cat((part, part[-1:].expand(batch - n, -1, -1, -1)))
            chunks.append([out[:n] for out in self.runner(part)])
        return [torch.cat(parts) for parts in zip(*chunks, strict=True)]

    def _rows_to_dense(self, rows: Tensor) -> Tensor:
        """``(B, k, 6 + extra)`` rows -> ``(B, 4 + nc + extra, k)`` columns with one-hot class scores."""
        box = rows[..., :4]
        if not get_task(self.task).rotated:  # corners -> centre/size
            box = torch.cat(((box[..., :2] + box[..., 2:4]) / 2, box[..., 2:4] - box[..., :2]), -1)
        scores = torch.zeros(*rows.shape[:2], self.num_classes, dtype=rows.dtype, device=rows.device)
        labels = rows[..., 5].round().long().clamp(0, self.num_classes - 1)
        scores.scatter_(-1, labels.unsqueeze(-1), rows[..., 4:5])
        return torch.cat((box, scores, rows[..., 6:]), -1).transpose(1, 2).contiguous()


def load_exported(
    path: str | Path, *, threads: int | None = None, openvino_precision: str | None = None
) -> ExportedModel:
    """The exported model at ``path`` (module docstring) with its metadata; every failure — a missing runtime
    (the message names the extra), a corrupt file, a file without lucid metadata — raises
    :class:`CheckpointError` naming the path. ``threads``: the runtime's CPU threads (OpenVINO: None = its
    default; ONNX Runtime: None = ``torch.get_num_threads()``). ``openvino_precision``: an OpenVINO IR's inference
    precision (:class:`~lucid_core.export.runtime.OpenVINORunner`; None = f32 for a float32 IR)."""
    p = Path(path)
    kind = exported_kind(p)
    if kind is None:
        raise CheckpointError(f"{p}: not an exported model lucid_core.load reads")
    if kind == "coreml":
        raise CheckpointError(
            f"{p}: a Core ML model; its runtime is macOS-only, so lucid-core exports it but does not run it"
        )
    if not p.exists():
        raise CheckpointError(f"{p}: exported model not found")
    runner: Runner
    if kind == "onnx":
        onnx_runner = OnnxRunner(p, threads=threads)
        runner, metadata = onnx_runner, onnx_runner.metadata
    elif kind == "torchscript":
        ts_runner = TorchScriptRunner(p)
        runner, metadata = ts_runner, ts_runner.metadata
    elif kind == "engine":
        trt_runner = TensorRTRunner(p)
        runner, metadata = trt_runner, trt_runner.metadata
    else:
        xml = _ir_xml(p) if p.is_dir() else p
        folder = p if p.is_dir() else p.parent
        metadata = read_ir_metadata(folder)
        if xml is None or not xml.with_suffix(".bin").is_file():
            raise CheckpointError(f"{p}: an OpenVINO IR needs its .xml and .bin files")
        runner = OpenVINORunner(xml, metadata, threads=threads, precision=openvino_precision)
    return ExportedModel(runner, metadata, p)
