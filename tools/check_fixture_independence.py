"""Re-run the fixture tests on fixtures that keep every schema but change what a test must not assume.

``../shared/fixtures/README.md``: "A hidden set (different seeds and edge cases, same schemas) is kept elsewhere
for final checks", and a test must derive every case, name, shape and expected value from the file it loads. This
tool checks that mechanically. It builds a copy of ``../shared`` (everything but ``fixtures/`` linked, not copied)
whose fixture files are rewritten without touching a stored value, once per mutation, and runs pytest on every
test module that reads ``fixtures/`` with ``LUCID_SHARED_DIR`` pointing at the copy:

* ``renamed``: every case collection (``variants``, ``cases``, ``newton_schulz.cases``) gets other names, in the
  reverse order; ``same_as:<case>`` references follow their case; MuSGD's parameter names are replaced
  everywhere they occur (names, routing, groups, per-step records).
* ``extended``: every case collection gains a copy of one of its cases under a new name, and each pose file
  gains the ``variants`` record the README documents for some hidden files (a copy of its own case).

A test that looks a case up by its public name, counts the public cases, or builds a model from the public
parameter names fails here.

What it cannot cover: geometric variants (a non-square or up-scaled input, another original size). A fixture file
couples its labels with the head outputs, assignments, losses and gradients the reference computed from them, so a
re-letterboxed case is only consistent where the README's rules alone define every value; the tests that read
such a record check those variants themselves: the OBB dataset-pipeline test re-letterboxes its label rows to a
rectangular batch shape and a 2x input (README obb steps 1-4), the segment interop test derives original-size
masks from ``masks_input`` by rule 6 (checked on rectangular and up-scaled masks), and tolerances scale with the
magnitude compared (README tolerances). Exit status: 0 when every mutation passes, 1 otherwise, 2 when ``../shared`` is
absent. ``uv run --no-sync python tools/check_fixture_independence.py [--only renamed] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("LUCID_SHARED_DIR", REPO_ROOT.parent / "shared"))
#: keys whose value maps case names to cases (README: import ``cases``, segment ``cases``, assigner
#: ``variants``, pose ``variants`` in hidden files, MuSGD ``newton_schulz.cases``)
CASE_COLLECTIONS = ("cases", "variants")
SAME_AS = "same_as:"


def replace_strings(value: Any, mapping: dict[str, str]) -> Any:
    """``value`` with every string (dict keys included) found in ``mapping`` replaced; tensors untouched."""
    if isinstance(value, dict):
        return {
            (mapping.get(k, k) if isinstance(k, str) else k): replace_strings(v, mapping)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [replace_strings(v, mapping) for v in value]
    if isinstance(value, tuple):
        return tuple(replace_strings(v, mapping) for v in value)
    if isinstance(value, str):
        return mapping.get(value, value)
    return value


def renamed_cases(cases: dict[str, Any], tag: str) -> dict[str, Any]:
    """The same cases under other names, in the reverse order, with ``same_as:<name>`` references following."""
    names = list(cases)[::-1]
    new = {name: f"{tag}{i}_{name[::-1]}" for i, name in enumerate(names)}
    references = {f"{SAME_AS}{old}": f"{SAME_AS}{name}" for old, name in new.items()}
    return {new[name]: replace_strings(cases[name], references) for name in names}


def _collections(fx: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(parent, key) of every case collection in a fixture file (top level and ``newton_schulz``)."""
    found = []
    for parent in (fx, fx.get("newton_schulz")):
        if isinstance(parent, dict):
            found += [(parent, key) for key in CASE_COLLECTIONS if isinstance(parent.get(key), dict)]
    return found


def mutate_renamed(name: str, fx: dict[str, Any]) -> dict[str, Any]:
    fx = copy.deepcopy(fx)
    for i, (parent, key) in enumerate(_collections(fx)):
        parent[key] = renamed_cases(parent[key], f"m{i}c")
    optimizer = fx.get("optimizer")
    if isinstance(optimizer, dict) and isinstance(optimizer.get("param_names"), list):
        mapping = {p: f"renamed{i}.{p}" for i, p in enumerate(optimizer["param_names"])}
        fx["optimizer"] = replace_strings(optimizer, mapping)
    return fx


#: the top-level keys that make up one complete pose case (README, pose section: ``variants``)
POSE_CASE_KEYS = ("meta", "targets", "targets_empty", "targets_xy_only", "head_outputs", "results")


def mutate_extended(name: str, fx: dict[str, Any]) -> dict[str, Any]:
    fx = copy.deepcopy(fx)
    for parent, key in _collections(fx):
        cases = parent[key]
        if cases:
            first = next(iter(cases))
            parent[key] = {f"extra_copy_of_{first}": copy.deepcopy(cases[first]), **cases}
    if str(fx.get("schema", "")).startswith("lucid-fixture/pose_loss/") and "variants" not in fx:
        fx["variants"] = {"hidden_like": {k: copy.deepcopy(fx[k]) for k in POSE_CASE_KEYS if k in fx}}
    return fx


MUTATIONS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    "renamed": mutate_renamed,
    "extended": mutate_extended,
}


def build_shared_copy(
    shared: Path, target: Path, mutation: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    """``target``: ``shared``'s folders linked, ``fixtures/*.pt`` rewritten by ``mutation``, the rest linked."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in shared.iterdir():
        if entry.name != "fixtures":
            (target / entry.name).symlink_to(entry.resolve())
    (target / "fixtures").mkdir()
    for entry in sorted((shared / "fixtures").iterdir()):
        out = target / "fixtures" / entry.name
        if entry.suffix != ".pt":
            out.symlink_to(entry.resolve())
            continue
        fx = torch.load(entry, weights_only=True, map_location="cpu")
        torch.save(mutation(entry.name, fx), out)


def fixture_test_files(tests: Path = REPO_ROOT / "tests") -> list[Path]:
    """The test modules that read ``../shared/fixtures`` (``shared_dir / "fixtures"`` in their text)."""
    reads = re.compile(r'shared_dir\s*/\s*"fixtures"')
    return sorted(p for p in tests.rglob("test_*.py") if reads.search(p.read_text(encoding="utf-8")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(MUTATIONS), action="append", help="run only these mutations")
    parser.add_argument("--keep", type=Path, help="build the mutated copies under this folder and keep them")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if not (SHARED_DIR / "fixtures").is_dir():
        print(f"check_fixture_independence: {SHARED_DIR / 'fixtures'} not found", file=sys.stderr)
        return 2
    files = [str(p.relative_to(REPO_ROOT)) for p in fixture_test_files()]
    failed = []
    with tempfile.TemporaryDirectory(prefix="lucid-fixture-mutations-") as tmp:
        root = args.keep if args.keep is not None else Path(tmp)
        for label in args.only or list(MUTATIONS):
            target = root / label
            if target.exists():
                print(f"check_fixture_independence: {target} exists; remove it or pick another --keep")
                return 2
            build_shared_copy(SHARED_DIR, target, MUTATIONS[label])
            print(f"== {label}: {len(files)} test modules on {target}", flush=True)
            env = {**os.environ, "LUCID_SHARED_DIR": str(target)}
            command = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-m",
                "shared and not gpu",
            ]
            rc = subprocess.call([*command, *args.pytest_args, *files], cwd=REPO_ROOT, env=env)
            print(f"{'ok  ' if rc == 0 else 'FAIL'} {label} (pytest exit {rc})", flush=True)
            if rc != 0:
                failed.append(label)
    if failed:
        print(
            f"check_fixture_independence: a test assumes the public file's layout under: {', '.join(failed)}"
        )
        return 1
    print("check_fixture_independence: every fixture test passes on renamed and extended fixtures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
