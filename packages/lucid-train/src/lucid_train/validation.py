"""``lucid-train`` checks made before anything is built: settings, checkpoint paths, refused flags.

- :func:`validate_settings`: ``model.family``/``model.scale`` are registered, ``data.imgsz`` is positive (a size
  that is not a multiple of the model's largest stride is rounded up with a note, as the reference does),
  ``trainer.max_epochs`` >= 1, ``data.workers`` >= 0.
- :func:`check_training_checkpoint`: ``--ckpt_path`` is a local file that ``torch.load(weights_only=True)`` reads
  (tensors and plain data only, so loading it can never run code); a URL is refused before anything is fetched.
- :func:`refuse_unsafe_flags`: ``--weights_only`` is not offered (it would allow arbitrary code in a checkpoint).

:data:`KNOWN_ERRORS` are the user-facing error types the ``lucid-train`` error boundary turns into one paragraph.
"""

from __future__ import annotations

import math
import pickle
import sys
from pathlib import Path
from typing import Any

import torch

from lucid_core.cli_errors import UsageError
from lucid_core.models import get_family, list_models
from lucid_data.cache import CacheTooLargeError
from lucid_data.imageio import CorruptImageError
from lucid_data.readers.common import LabelError
from lucid_train.errors import ArtifactWriteError, NonFiniteLossError, TrainingSetupError

KNOWN_ERRORS: tuple[type[BaseException], ...] = (
    TrainingSetupError,
    LabelError,
    CorruptImageError,
    CacheTooLargeError,
    NonFiniteLossError,
    ArtifactWriteError,
    UsageError,
)


def is_url(value: str) -> bool:
    """True for ``scheme://...`` (http, https, s3, ...): anything that is not a local path."""
    head, sep, _ = value.partition("://")
    return bool(sep) and head.replace("+", "").replace("-", "").replace(".", "").isalnum()


def refuse_unsafe_flags(args: list[str]) -> None:
    """``--weights_only`` is not offered: explain why instead of the parser's "unrecognized argument"."""
    for arg in args:
        if arg == "--weights_only" or arg.startswith("--weights_only="):
            raise TrainingSetupError(
                f"{arg}: not offered; lucid-train always loads --ckpt_path with weights_only=True (tensors and "
                "plain data only), so a checkpoint can never run code. Checkpoints written by lucid-train load "
                "that way; a checkpoint that needs weights_only=False is refused."
            )


def check_training_checkpoint(value: str) -> dict[str, Any]:
    """Read ``--ckpt_path`` with ``torch.load(weights_only=True)``; one-paragraph error when it cannot be used."""
    if is_url(value):
        raise TrainingSetupError(
            f"--ckpt_path {value}: a URL; expected a local file. lucid-train fetches nothing: download the "
            "checkpoint yourself (from a source you trust) and pass its path."
        )
    path = Path(value)
    if not path.is_file():
        raise TrainingSetupError(
            f"--ckpt_path {value}: no such file; expected a last.ckpt or best.ckpt written by lucid-train fit."
        )
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise TrainingSetupError(
            f"--ckpt_path {value}: refused: it holds objects other than tensors and plain data ({first}); "
            "nothing in it was executed. lucid-train loads checkpoints with weights_only=True only; those it "
            "writes always load that way."
        ) from None
    except Exception as exc:  # truncated zip, not a torch file, ...
        raise TrainingSetupError(
            f"--ckpt_path {value}: not a readable checkpoint ({type(exc).__name__}: {exc}); expected a last.ckpt "
            "or best.ckpt written by lucid-train fit (a killed write never replaces one, so an older one exists)."
        ) from None
    if not isinstance(loaded, dict) or "state_dict" not in loaded:
        raise TrainingSetupError(
            f"--ckpt_path {value}: not a Lightning training checkpoint (no 'state_dict'); expected a last.ckpt or "
            "best.ckpt written by lucid-train fit. Exported weights (best.safetensors) go to --model.weights."
        )
    return loaded


def _get(node: Any, key: str) -> Any:
    return node.get(key) if hasattr(node, "get") else getattr(node, key, None)


def validate_settings(config: Any) -> None:
    """Check the parsed settings of one subcommand (``config`` is jsonargparse's namespace); rounds ``imgsz`` up."""
    families = sorted({key.family for key in list_models()})
    model, data, trainer = _get(config, "model"), _get(config, "data"), _get(config, "trainer")
    family = _get(model, "family")
    if family not in families:
        raise TrainingSetupError(
            f"--model.family {family}: unknown model family; expected one of {', '.join(families)}."
        )
    spec = get_family(family)
    scale = _get(model, "scale")
    if scale not in spec.scales:
        raise TrainingSetupError(
            f"--model.scale {scale}: unknown scale of {family}; expected one of {', '.join(sorted(spec.scales))}."
        )
    epochs = _get(trainer, "max_epochs")
    if epochs is not None and int(epochs) < 1:
        raise TrainingSetupError(f"--trainer.max_epochs {epochs}: expected a whole number >= 1.")
    workers = _get(data, "workers")
    if workers is not None and int(workers) < 0:
        raise TrainingSetupError(
            f"--data.workers {workers}: expected 0 (load in the main process) or more worker processes."
        )
    batch = _get(data, "batch_size")
    if batch is not None and int(batch) < 1:
        raise TrainingSetupError(f"--data.batch_size {batch}: expected a whole number >= 1.")
    imgsz = _get(data, "imgsz")
    stride = max(spec.strides)
    if imgsz is not None:
        if int(imgsz) < 1:
            raise TrainingSetupError(
                f"--data.imgsz {imgsz}: expected a positive image size, a multiple of {stride} (the model's "
                "largest stride), e.g. 640."
            )
        rounded = int(math.ceil(int(imgsz) / stride) * stride)
        if rounded != int(imgsz):
            print(
                f"lucid-train: --data.imgsz {imgsz} is not a multiple of the largest stride {stride}; using "
                f"{rounded}",
                file=sys.stderr,
            )
            if hasattr(data, "imgsz"):
                data.imgsz = rounded
            else:
                data["imgsz"] = rounded
