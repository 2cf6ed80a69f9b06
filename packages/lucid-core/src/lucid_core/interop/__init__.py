"""Interop with the reference implementation: safe checkpoint import, ``lucid-convert`` and ONNX export."""

from lucid_core.errors import CheckpointImportError
from lucid_core.interop.onnx_export import export_onnx
from lucid_core.interop.reference import (
    ImportedConfig,
    import_checkpoint,
    import_reference_tree,
    lucid_to_reference_key,
    reference_to_lucid_key,
)
from lucid_core.interop.unpickler import RefusedGlobalError, StandInMethod, StandInModule, StandInNamespace

__all__ = [
    "CheckpointImportError",
    "ImportedConfig",
    "RefusedGlobalError",
    "StandInMethod",
    "StandInModule",
    "StandInNamespace",
    "export_onnx",
    "import_checkpoint",
    "import_reference_tree",
    "lucid_to_reference_key",
    "reference_to_lucid_key",
]
