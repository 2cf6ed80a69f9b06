"""Restricted unpickler: malicious pickles are refused before anything runs; the real checkpoints load as stand-ins."""

from __future__ import annotations

import io
import json
import os
import pickle
import pickletools
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import torch
import torch._utils

from lucid_core.interop import unpickler
from lucid_core.interop.reference import import_checkpoint, read_reference_checkpoint
from lucid_core.interop.unpickler import RefusedGlobalError, StandInMethod, StandInModule


def _touch_command(sentinel: Path) -> str:
    return f"touch {sentinel}"


class _SystemCall:
    """Pickles as ``os.system("touch <sentinel>")``: the classic malicious ``__reduce__``."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (self.command,))


class _Reduce:
    """Pickles as ``func(*args)``; callable so it can itself be the function of another reduce."""

    def __init__(self, func: Any, args: tuple[Any, ...]) -> None:
        self.func, self.args = func, args

    def __call__(self, *args: Any) -> Any:  # pragma: no cover - only needed to satisfy the pickler
        raise AssertionError("never called")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.func, self.args)


def _globals_escape(command: str) -> _Reduce:
    """``getattr(getattr(_rebuild_tensor_v2, '__globals__').get('os'), 'system')(command)``.

    Every global it names (getattr, an allowed torch function) is on the allowlist; only a *generic* getattr
    would let it reach ``os.system`` through a function's ``__globals__``.
    """
    module_globals = _Reduce(getattr, (torch._utils._rebuild_tensor_v2, "__globals__"))
    getter = _Reduce(getattr, (module_globals, "get"))
    os_module = _Reduce(getter, ("os",))
    system = _Reduce(getattr, (os_module, "system"))
    return _Reduce(system, (command,))


def _qualified(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


@pytest.mark.parametrize("container", ["torch_zip", "plain_pickle"])
def test_reduce_calling_os_system_is_refused_without_running(tmp_path: Path, container: str) -> None:
    sentinel = tmp_path / "sentinel"
    payload = {"model": _SystemCall(_touch_command(sentinel))}
    path = tmp_path / "evil.pt"
    if container == "torch_zip":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(RefusedGlobalError) as info:
        import_checkpoint(path)
    assert _qualified(os.system) in str(info.value)
    assert info.value.qualified_name == _qualified(os.system)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and message.count("nothing was executed") == 1
    assert not sentinel.exists()


def test_getattr_globals_escape_is_refused_without_running(tmp_path: Path) -> None:
    sentinel = tmp_path / "sentinel"
    path = tmp_path / "escape.pt"
    torch.save({"model": _globals_escape(_touch_command(sentinel))}, path)
    with pytest.raises(RefusedGlobalError, match="getattr") as info:
        import_checkpoint(path)
    assert "_rebuild_tensor_v2" in str(info.value)
    assert not sentinel.exists()


@pytest.mark.parametrize(
    ("target", "attribute"),
    [
        (OrderedDict, "__init__"),  # not a stand-in class
        (unpickler.standin_class("ultralytics.nn.modules.head.Detect"), "__init__"),  # stand-in, wrong name
        (unpickler.standin_class("ultralytics.nn.modules.head.Detect"), "__globals__"),
    ],
)
def test_getattr_outside_the_narrow_use_is_refused(target: Any, attribute: str) -> None:
    with pytest.raises(RefusedGlobalError, match="getattr"):
        unpickler.narrow_getattr(target, attribute)


def test_narrow_getattr_gives_an_inert_record() -> None:
    detect = unpickler.standin_class("ultralytics.nn.modules.head.Detect")
    method = unpickler.narrow_getattr(detect, "forward")
    assert isinstance(method, StandInMethod)
    assert (method.owner, method.name) == ("ultralytics.nn.modules.head.Detect", "forward")
    assert not callable(method)


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("os", "system"),
        ("builtins", "eval"),
        ("builtins", "exec"),
        ("subprocess", "Popen"),
        ("torch", "load"),
        ("ultralytics.nn.tasks", "__class__"),  # dunder names never become stand-ins
        ("ultralytics.utils", "callbacks"),  # outside ultralytics.nn
    ],
)
def test_globals_outside_the_allowlist_are_refused_by_name(module: str, name: str) -> None:
    data = pickle.dumps(None, protocol=2)[:2] + f"c{module}\n{name}\n.".encode()
    with pytest.raises(RefusedGlobalError) as info:
        unpickler.loads(data)
    assert info.value.qualified_name == f"{module}.{name}"
    assert f"'{module}.{name}'" in str(info.value)


def test_standins_keep_state_and_have_no_behaviour() -> None:
    conv_cls = unpickler.standin_class("ultralytics.nn.modules.conv.Conv")
    assert unpickler.standin_class("ultralytics.nn.modules.conv.Conv") is conv_cls
    module = conv_cls()
    weight = torch.arange(4.0)
    module.__setstate__({"_parameters": OrderedDict(weight=weight), "_modules": OrderedDict(), "c": 3})
    assert module.c == 3
    assert module.class_name == "Conv"
    assert torch.equal(module.state_tensors("x.")["x.weight"], weight)
    assert not callable(module)
    with pytest.raises(pickle.UnpicklingError, match="dict state"):
        module.__setstate__(["not", "a", "dict"])


def _pickle_globals(path: Path) -> set[str]:
    """Every GLOBAL / STACK_GLOBAL a checkpoint's data.pkl names, read with pickletools (nothing executed)."""
    with zipfile.ZipFile(path) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        data = archive.read(name)
    found: set[str] = set()
    strings: list[str] = []
    for opcode, arg, _ in pickletools.genops(io.BytesIO(data)):
        if opcode.name == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            found.add(f"{module}.{attr}")
        elif opcode.name == "STACK_GLOBAL":
            found.add(f"{strings[-2]}.{strings[-1]}")
        elif isinstance(arg, str):
            strings.append(arg)
    return found


@pytest.mark.shared
def test_checkpoint_globals_are_the_documented_ones_and_all_resolve(shared_dir: Path) -> None:
    listing = json.loads((shared_dir / "weights" / "checkpoints.json").read_text())
    for file_name, entry in listing.items():
        found = _pickle_globals(shared_dir / "weights" / file_name)
        assert found == set(entry["pickle_globals"]), file_name
        for qualified in found - {g for g in found if "Storage" in g}:
            module, _, name = qualified.rpartition(".")
            unpickler.resolve_global(module, name)  # raises for anything not allowed


@pytest.mark.shared
def test_pose_checkpoint_getattr_is_detect_forward(shared_dir: Path) -> None:
    checkpoint = read_reference_checkpoint(shared_dir / "weights" / "yolo11n-pose.pt")
    root = checkpoint["model"]
    assert isinstance(root, StandInModule)
    methods = [
        value
        for module in root.walk()
        for value in module.__dict__.values()
        if isinstance(value, StandInMethod)
    ]
    assert [(m.owner.rpartition(".")[2], m.name) for m in methods] == [("Detect", "forward")]
