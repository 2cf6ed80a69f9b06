"""Restricted unpickler for reference-format (pickled ``nn.Module``) checkpoints: loading never executes code.

``pickle`` calls whatever ``Unpickler.find_class`` returns, so that is the complete set of code a pickle can run.
Here it returns only: inert stand-ins (:class:`StandInModule` subclasses) for classes under ``ultralytics.nn`` and
``torch.nn.modules`` (``BUILD`` stores their pickled ``__dict__``); the tensor-rebuild functions ``torch.load``
needs, ``torch.Size`` and the dtypes; ``OrderedDict``, ``set``, ``frozenset``; an inert :class:`StandInNamespace`
for ``ultralytics.utils.IterableSimpleNamespace`` (the training arguments of intermediate checkpoints); and
``getattr`` only as ``getattr(<stand-in class>, 'forward')``, giving an inert :class:`StandInMethod` (the YOLO11
pose checkpoint stores ``Pose.detect = Detect.forward``; a generic ``getattr`` could reach ``os.system``). Every
other global raises :class:`RefusedGlobalError` naming ``module.name`` (docs/INFERENCE.md, "Importing reference
``.pt`` files safely"). Use as ``torch.load(f, pickle_module=lucid_core.interop.unpickler, weights_only=False,
map_location="cpu")``: this module provides the ``Unpickler`` / ``load`` / ``loads`` names ``torch.load`` looks up.
"""

from __future__ import annotations

import io
import pickle
import re
import types
from collections import OrderedDict
from typing import IO, Any, ClassVar

import torch

from lucid_core.errors import RefusedGlobalError

__all__ = [
    "RefusedGlobalError",
    "StandInMethod",
    "StandInModule",
    "StandInNamespace",
    "Unpickler",
    "load",
    "loads",
]

# torch.load passes these through to the pickle module; re-exported so the module quacks like ``pickle``.
UnpicklingError = pickle.UnpicklingError
HIGHEST_PROTOCOL = pickle.HIGHEST_PROTOCOL
DEFAULT_PROTOCOL = pickle.DEFAULT_PROTOCOL
dump = pickle.dump  # torch.load never calls it; torch.save with this module behaves like plain pickle
dumps = pickle.dumps
Pickler = pickle.Pickler

_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")  # no dunders, no dotted paths
# Module classes of the reference that become stand-ins (any class name below these packages; stand-ins are inert).
# torchvision.transforms: the preprocessing a classification checkpoint pickles (inert stand-ins, never run)
STANDIN_MODULE_PREFIXES = ("ultralytics.nn.", "torch.nn.modules.", "torchvision.transforms.")
# SimpleNamespace subclasses of the reference that become StandInNamespace (exact module.name; see module docstring).
NAMESPACE_GLOBALS = frozenset({"ultralytics.utils.IterableSimpleNamespace", "types.SimpleNamespace"})
# getattr(<stand-in class>, name) is answered only for these attribute names (see module docstring).
ALLOWED_GETATTR_NAMES = frozenset({"forward"})

_TORCH_FUNCTIONS: dict[str, Any] = {
    "torch._utils._rebuild_tensor": torch._utils._rebuild_tensor,
    "torch._utils._rebuild_tensor_v2": torch._utils._rebuild_tensor_v2,
    "torch._utils._rebuild_parameter": torch._utils._rebuild_parameter,
    "torch.Size": torch.Size,
}
_DTYPE_NAMES = (
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "half",
    "float",
    "double",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "long",
    "bool",
)
_CONTAINERS: dict[str, Any] = {
    "collections.OrderedDict": OrderedDict,
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "__builtin__.set": set,
    "__builtin__.frozenset": frozenset,
}
_GETATTR_GLOBALS = frozenset({"builtins.getattr", "__builtin__.getattr"})


class StandInModule:
    """Inert stand-in for a pickled module class: keeps the pickled ``__dict__`` and has no behaviour.

    ``reference_class`` is the ``module.qualname`` the pickle named; subclasses are made per global by
    :func:`standin_class`. Instances are only *data*: nothing is callable and no method of the reference runs.
    """

    reference_class: ClassVar[str] = ""

    def __new__(cls, *args: object, **kwargs: object) -> StandInModule:  # NEWOBJ passes pickled ctor args
        return object.__new__(cls)

    def __init__(self, *args: object, **kwargs: object) -> None:  # REDUCE-style construction: ignore args
        pass

    def __setstate__(self, state: object) -> None:
        if isinstance(state, tuple) and len(state) == 2 and (state[1] is None or isinstance(state[1], dict)):
            state, slots = state
            if slots:
                self.__setstate__(slots)
        if state is None:
            return
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise pickle.UnpicklingError(
                f"stand-in {self.reference_class}: expected a dict state with str keys, got {type(state).__name__}"
            )
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"<stand-in {self.reference_class}>"

    # -- tree access -----------------------------------------------------------------------------------------
    @property
    def class_name(self) -> str:
        """The reference class name without its module (``"C2f"``, ``"Pose"``)."""
        return self.reference_class.rpartition(".")[2]

    def children(self) -> dict[str, StandInModule]:
        """Pickled sub-modules (``_modules``), ``None`` entries dropped."""
        mods = self.__dict__.get("_modules") or {}
        return {str(k): v for k, v in mods.items() if isinstance(v, StandInModule)}

    def state_tensors(self, prefix: str = "") -> dict[str, torch.Tensor]:
        """The ``state_dict`` the pickled module would give: parameters, persistent buffers, recursively."""
        out: dict[str, torch.Tensor] = {}
        params = self.__dict__.get("_parameters") or {}
        buffers = self.__dict__.get("_buffers") or {}
        transient = set(self.__dict__.get("_non_persistent_buffers_set") or ())
        for name, value in params.items():
            if isinstance(value, torch.Tensor):
                out[prefix + str(name)] = value.detach()
        for name, value in buffers.items():
            if isinstance(value, torch.Tensor) and name not in transient:
                out[prefix + str(name)] = value.detach()
        for name, child in self.children().items():
            out.update(child.state_tensors(f"{prefix}{name}."))
        return out

    def walk(self) -> list[StandInModule]:
        """This module and every descendant, depth first."""
        found: list[StandInModule] = [self]
        for child in self.children().values():
            found.extend(child.walk())
        return found


class StandInMethod:
    """Inert record of ``getattr(<stand-in class>, name)`` (e.g. ``Detect.forward``); not callable."""

    __slots__ = ("name", "owner")

    def __init__(self, owner: str, name: str) -> None:
        self.owner = owner
        self.name = name

    def __repr__(self) -> str:
        return f"<stand-in method {self.owner}.{self.name}>"


class StandInNamespace(types.SimpleNamespace):
    """Inert stand-in for a pickled ``types.SimpleNamespace`` subclass (the reference's ``IterableSimpleNamespace``).

    A plain namespace: attribute access (``args.imgsz``) and ``vars(args)`` work, :meth:`to_dict` gives a copy;
    ``reference_class`` names the pickled global. Construction ignores its arguments and ``BUILD`` accepts only a
    dict with str keys, so no code of the reference runs. Subclasses are made per global by :func:`standin_class`.
    """

    reference_class: ClassVar[str] = ""

    def __init__(self, *args: object, **kwargs: object) -> None:  # REDUCE(cls, ()): nothing to run
        super().__init__()

    def __setstate__(self, state: object) -> None:
        if isinstance(state, tuple) and len(state) == 2 and state[1] is None:
            state = state[0]
        if state is None:
            return
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise pickle.UnpicklingError(
                f"stand-in {self.reference_class}: expected a dict state with str keys, got {type(state).__name__}"
            )
        self.__dict__.update(state)

    def to_dict(self) -> dict[str, Any]:
        """The namespace's attributes as a new dict."""
        return dict(self.__dict__)

    def __repr__(self) -> str:
        return f"<stand-in {self.reference_class} {sorted(self.__dict__)}>"


_STANDIN_CACHE: dict[str, type[StandInModule]] = {}
_NAMESPACE_CACHE: dict[str, type[StandInNamespace]] = {}


def standin_namespace_class(qualified_name: str) -> type[StandInNamespace]:
    """The (cached) :class:`StandInNamespace` subclass for the pickled namespace class ``qualified_name``."""
    cls = _NAMESPACE_CACHE.get(qualified_name)
    if cls is None:
        module, _, name = qualified_name.rpartition(".")
        cls = type(name, (StandInNamespace,), {"reference_class": qualified_name, "__module__": module})
        _NAMESPACE_CACHE[qualified_name] = cls
    return cls


def standin_class(qualified_name: str) -> type[StandInModule]:
    """The (cached) stand-in subclass for the reference class ``qualified_name``."""
    cls = _STANDIN_CACHE.get(qualified_name)
    if cls is None:
        module, _, name = qualified_name.rpartition(".")
        cls = type(name, (StandInModule,), {"reference_class": qualified_name, "__module__": module})
        _STANDIN_CACHE[qualified_name] = cls
    return cls


def narrow_getattr(obj: object, name: object) -> StandInMethod:
    """The only ``getattr`` a pickle gets: ``getattr(<stand-in class>, 'forward')`` → :class:`StandInMethod`."""
    if not (isinstance(obj, type) and issubclass(obj, StandInModule)):
        target = getattr(obj, "__qualname__", type(obj).__name__)
        raise RefusedGlobalError(
            "builtins.getattr", f"applied to {target!r}, not to a reference module class"
        )
    if not isinstance(name, str) or name not in ALLOWED_GETATTR_NAMES:
        raise RefusedGlobalError(
            "builtins.getattr",
            f"attribute {name!r} of {obj.reference_class} is not in {sorted(ALLOWED_GETATTR_NAMES)}",
        )
    return StandInMethod(obj.reference_class, name)


def resolve_global(module: str, name: str) -> Any:
    """What ``find_class(module, name)`` returns, or :class:`RefusedGlobalError`."""
    qualified = f"{module}.{name}"
    if qualified in _TORCH_FUNCTIONS:
        return _TORCH_FUNCTIONS[qualified]
    if module == "torch" and name in _DTYPE_NAMES:
        return getattr(torch, name)
    if qualified in _CONTAINERS:
        return _CONTAINERS[qualified]
    if qualified in _GETATTR_GLOBALS:
        return narrow_getattr
    if qualified in NAMESPACE_GLOBALS:
        return standin_namespace_class(qualified)
    if module.startswith(STANDIN_MODULE_PREFIXES) and _IDENTIFIER.match(name):
        return standin_class(qualified)
    raise RefusedGlobalError(qualified)


class Unpickler(pickle.Unpickler):
    """``pickle.Unpickler`` whose ``find_class`` is :func:`resolve_global` (allowlist; see module docstring)."""

    def find_class(self, module: str, name: str) -> Any:
        return resolve_global(module, name)


def load(file: IO[bytes], **kwargs: Any) -> Any:
    """``pickle.load`` through the restricted :class:`Unpickler`."""
    return Unpickler(file, **kwargs).load()


def loads(data: bytes, **kwargs: Any) -> Any:
    """``pickle.loads`` through the restricted :class:`Unpickler`."""
    return Unpickler(io.BytesIO(data), **kwargs).load()
