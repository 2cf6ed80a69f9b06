"""Intermediate reference checkpoints (``epochN.pt``, an unfinished run's ``last.pt``): their training arguments are
the reference's ``IterableSimpleNamespace``; ``lucid-convert`` reads them without running code and takes the EMA
weights, falling back to ``model`` when ``ema`` is absent (issue 14).

The planted pickle uses a stand-in class registered as ``ultralytics.utils.IterableSimpleNamespace`` in
``sys.modules`` for the duration of the test only (so the pickle names exactly that global).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from test_core_interop_yolo26 import reference_checkpoint, save_reference_checkpoint

from lucid_core.checkpoint import load_checkpoint
from lucid_core.convert_cli import main as convert_main
from lucid_core.interop import StandInNamespace, import_checkpoint
from lucid_core.interop.reference import read_reference_checkpoint
from lucid_core.models import YOLOModel, build_model

NAMESPACE_MODULE = "ultralytics.utils"
NAMESPACE_NAME = "IterableSimpleNamespace"


@pytest.fixture
def namespace_class(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> type[types.SimpleNamespace]:
    """A SimpleNamespace subclass pickled as ``ultralytics.utils.IterableSimpleNamespace``.

    Its ``__setstate__``/``__init__`` would touch a sentinel file if unpickling ever ran them.
    """
    sentinel = tmp_path / "code-ran"

    class IterableSimpleNamespace(types.SimpleNamespace):
        def __setstate__(self, state: Any) -> None:  # pragma: no cover - must never run on load
            sentinel.touch()
            self.__dict__.update(state)

    IterableSimpleNamespace.__module__ = NAMESPACE_MODULE
    IterableSimpleNamespace.__qualname__ = NAMESPACE_NAME
    package = types.ModuleType("ultralytics")
    module = types.ModuleType(NAMESPACE_MODULE)
    setattr(module, NAMESPACE_NAME, IterableSimpleNamespace)
    package.utils = module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ultralytics", package)
    monkeypatch.setitem(sys.modules, NAMESPACE_MODULE, module)
    IterableSimpleNamespace.sentinel = sentinel  # type: ignore[attr-defined]
    return IterableSimpleNamespace


def _float16_model(seed: int) -> YOLOModel:
    torch.manual_seed(seed)
    model = build_model("yolov8", "detect", "n", num_classes=2)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.half().float())
    return model.eval()


def _intermediate(
    namespace_class: type[types.SimpleNamespace], *, ema: YOLOModel | None, model: YOLOModel | None
) -> dict[str, Any]:
    """The top level of an intermediate checkpoint: args namespace, optimizer state, epoch >= 0."""
    args = namespace_class(imgsz=256, epochs=100, batch=16, optimizer="auto", task="detect")
    checkpoint: dict[str, Any] = {
        "epoch": 3,
        "best_fitness": 0.25,
        "updates": 40,
        "optimizer": {"state": {}, "param_groups": [{"lr": 0.01, "params": [0, 1]}]},
        "train_args": args,
        "train_metrics": {"metrics/mAP50(B)": 0.5},
        "version": "synthetic",
    }
    for key, source in (("model", model), ("ema", ema)):
        if source is None:
            checkpoint[key] = None
            continue
        tree = reference_checkpoint(source)["model"]
        tree.__dict__["args"] = args  # the reference's models carry their args namespace too
        checkpoint[key] = tree
    return checkpoint


def test_namespace_is_an_inert_plain_namespace(tmp_path: Path, namespace_class: type[Any]) -> None:
    path = save_reference_checkpoint(
        _intermediate(namespace_class, ema=_float16_model(0), model=None), tmp_path / "epoch3.pt"
    )
    loaded = read_reference_checkpoint(path)
    args = loaded["train_args"]
    assert isinstance(args, StandInNamespace) and not isinstance(args, namespace_class)
    assert args.reference_class == f"{NAMESPACE_MODULE}.{NAMESPACE_NAME}"
    assert args.imgsz == 256 and args.to_dict()["optimizer"] == "auto"
    assert not namespace_class.sentinel.exists()


@pytest.mark.parametrize("weights", ["ema_only", "ema_and_model", "model_only"])
def test_convert_reads_ema_and_falls_back_to_model(
    tmp_path: Path, namespace_class: type[Any], weights: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ema, trained = _float16_model(0), _float16_model(1)
    checkpoint = _intermediate(
        namespace_class,
        ema=None if weights == "model_only" else ema,
        model=None if weights == "ema_only" else trained,
    )
    if weights == "model_only":
        del checkpoint["ema"]  # absent, not only None
    path = save_reference_checkpoint(checkpoint, tmp_path / "last.pt")
    expected, source_name = (trained, "model") if weights == "model_only" else (ema, "ema")

    model, config = import_checkpoint(path)
    assert config.weights_from == source_name and config.imgsz == 256
    for key, value in expected.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key

    assert convert_main([str(path), str(tmp_path / "out")]) == 0
    assert f"({source_name} weights)" in capsys.readouterr().out
    converted = load_checkpoint(tmp_path / "out")
    assert converted.imgsz == 256
    state = converted.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in expected.state_dict().items())
    assert not namespace_class.sentinel.exists()
