"""One error boundary for every lucid console script (docs/TRAINING.md, "Failure behaviour").

A mistake the user can fix (a bad label, a missing split, a refused checkpoint, a wrong flag value, a full or
read-only disk) is printed as ONE paragraph ``<prog>: error: <message>`` naming the file, flag or value, and the
command exits with status 2. Anything else is a bug and keeps its traceback, so it can be reported.

Every package registers its own user-facing error types with :func:`register_known_errors` when its CLI module is
imported (lucid-core must not import lucid-data or lucid-train, docs/INTERFACES.md dependency tiers); lucid-core's
own types (:class:`~lucid_core.errors.CheckpointError`, the import errors of :mod:`lucid_core.interop`,
:class:`UsageError`) are known from the start.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from lucid_core.errors import CheckpointError, CheckpointImportError, RefusedGlobalError

__all__ = [
    "EXIT_USAGE",
    "OutputOverwriteError",
    "UsageError",
    "describe_os_error",
    "known_error_types",
    "one_paragraph",
    "refuse_overwrite",
    "register_known_errors",
    "run_cli",
]

#: exit status of a user-fixable mistake (argparse uses the same for bad arguments).
EXIT_USAGE = 2

#: OS error numbers that describe the user's files or disk, not a bug (with the file they name).
USER_OS_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.EACCES,
        errno.EPERM,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.ENOSPC,
        errno.EROFS,
        errno.EDQUOT,
        errno.EEXIST,
        errno.ENAMETOOLONG,
    }
)


#: OS errors about a path the user gave (raised by the OS with a file name, or by lucid code with a message).
_PATH_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)


#: a full or read-only disk: a user's problem even when the failing write names no file.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


class UsageError(ValueError):
    """A command-line value (a flag, a path) cannot be used; the message names the flag and the value."""


class OutputOverwriteError(UsageError):
    """An output path would replace one of the command's inputs or a checkpoint file."""


_KNOWN: list[type[BaseException]] = [UsageError]


def register_known_errors(*types: type[BaseException]) -> None:
    """Add user-facing error types that :func:`run_cli` turns into a one-paragraph message (idempotent)."""
    for kind in types:
        if kind not in _KNOWN:
            _KNOWN.append(kind)


def known_error_types() -> tuple[type[BaseException], ...]:
    """The registered user-facing error types, lucid-core's own included."""

    register_known_errors(CheckpointError, CheckpointImportError, RefusedGlobalError)
    return tuple(_KNOWN)


def one_paragraph(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return re.sub(r"\s+", " ", text).strip()


def describe_os_error(exc: OSError) -> str | None:
    """A one-paragraph description of an OS error about the user's files or disk, else ``None`` (a bug)."""
    if exc.errno not in USER_OS_ERRNOS:
        return None
    if not (exc.filename or exc.filename2) and exc.errno not in DISK_ERRNOS:
        return None
    names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n) or "writing a file"
    reason = exc.strerror or os.strerror(exc.errno or 0)
    hint = {
        errno.ENOSPC: "free disk space or write to another folder",
        errno.EDQUOT: "free disk space or write to another folder",
        errno.EROFS: "write to a folder on a writable file system",
        errno.EACCES: "check the permissions or write to another folder",
        errno.EPERM: "check the permissions or write to another folder",
    }.get(exc.errno or 0)
    return f"{names}: {reason}" + (f"; {hint}" if hint else "")


def run_cli(prog: str, body: Callable[[], int], *, extra_known: Iterable[type[BaseException]] = ()) -> int:
    """Run a console script's ``body``; known errors become ``<prog>: error: <one paragraph>`` and exit 2.

    ``KeyboardInterrupt`` and ``SystemExit`` pass through; an exception of any other type propagates with its
    traceback (it is a bug, not a mistake of the user's).
    """
    known = known_error_types() + tuple(extra_known)
    try:
        return body()
    except known as exc:
        message = str(exc)
    except OSError as exc:
        described = describe_os_error(exc)
        if described is None and isinstance(exc, _PATH_ERRORS):
            described = str(exc)  # raised by our own code with a message naming the path
        if described is None:
            raise
        message = described
    print(f"{prog}: error: {one_paragraph(message)}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def _is_checkpoint_file(path: Path) -> bool:
    """A lucid checkpoint's weights or config, a Lightning ``.ckpt`` or a reference ``.pt``."""
    if path.suffix in (".safetensors", ".ckpt", ".pt", ".pth"):
        return True
    if path.suffix == ".json" and path.is_file():
        try:
            with path.open("rb") as handle:
                head = handle.read(4096)
        except OSError:
            return False
        return b'"lucid-checkpoint/' in head
    return False


def refuse_overwrite(
    flag: str, output: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]]
) -> None:
    """Raise :class:`OutputOverwriteError` when ``output`` is one of ``inputs`` or an existing checkpoint file.

    ``inputs`` are the files the command reads (a checkpoint stem counts as its ``.json`` and ``.safetensors``).
    Paths are compared after resolving symlinks, so ``runs/x/../x/best.json`` is caught too.
    """
    out = Path(output)
    resolved = out.resolve()
    for given in inputs:
        path = Path(given)
        candidates = {path, path.with_name(path.name + ".json"), path.with_name(path.name + ".safetensors")}
        if path.suffix in (".json", ".safetensors"):
            candidates |= {path.with_suffix(".json"), path.with_suffix(".safetensors")}
        if any(candidate.resolve() == resolved for candidate in candidates):
            raise OutputOverwriteError(
                f"{flag} {output}: this is an input of the command ({given}); writing it would replace what is "
                "being read. Choose another output path."
            )
    if out.exists() and _is_checkpoint_file(out):
        raise OutputOverwriteError(
            f"{flag} {output}: an existing checkpoint file; a command output never replaces a checkpoint. "
            "Choose another output path (or delete the old checkpoint first)."
        )
