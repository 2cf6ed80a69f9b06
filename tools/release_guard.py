"""Release guard: enforce the dependency tiers of the lucid-YOLO workspace from declarations and imports.

Rules (DEVELOPERS.md, issue #2):

1. ``imports``   every third-party import under a package's ``src/`` is declared in that package's dependencies, or in
   an extra and *guarded* (inside a function, under ``try/except ImportError`` or ``if TYPE_CHECKING``);
2. ``tiers``     a package imports a sibling only if it declares it, along the graph core ← data, accel, viz ← train;
   ``lucid_core`` never imports lightning, matplotlib, pycocotools/faster_coco_eval or triton (not even guarded);
3. ``versions``  sibling version ranges admit the sibling's current version;
4. ``licences``  the resolved runtime closure of every package (from ``uv.lock``, with the installed metadata)
   holds no GPL/AGPL/LGPL distribution; the audit table is printed.

Every violation is printed as ``file: import/requirement: message [rule]``; the exit status is 1 when any is found.
Usage: ``python tools/release_guard.py [--root DIR] [--no-licences] [--quiet]``.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata as md
import re
import sys
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

# Allowed sibling edges: package -> siblings it may import.
SIBLING_GRAPH: dict[str, frozenset[str]] = {
    "lucid-core": frozenset(),
    "lucid-data": frozenset({"lucid-core"}),
    "lucid-accel": frozenset({"lucid-core"}),
    "lucid-viz": frozenset({"lucid-core"}),
    "lucid-train": frozenset({"lucid-core", "lucid-data", "lucid-accel", "lucid-viz"}),
}
# Import roots lucid_core must never touch, even behind a guard.
FORBIDDEN_IN_CORE = frozenset(
    {"lightning", "pytorch_lightning", "matplotlib", "pycocotools", "faster_coco_eval", "triton"}
)
# Import name -> distribution, for modules whose names differ and that may not be installed where the guard runs.
KNOWN_IMPORT_NAMES: dict[str, str] = {
    "cv2": "opencv-python-headless",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "pytorch_lightning": "pytorch-lightning",
    "faster_coco_eval": "faster-coco-eval",
}
# Alternatives that satisfy the same import (any one declared is enough).
EQUIVALENT_DISTS: dict[str, frozenset[str]] = {
    "opencv-python-headless": frozenset({"opencv-python-headless", "opencv-python", "opencv-contrib-python"}),
    "lightning": frozenset({"lightning", "pytorch-lightning"}),
}
COPYLEFT = re.compile(r"(\bA?GPL|\bLGPL|GNU (Affero |Lesser |Library )?General Public)", re.IGNORECASE)


@dataclass(frozen=True)
class Violation:
    rule: str
    file: str
    subject: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.subject}: {self.message} [rule {self.rule}]"


@dataclass
class Package:
    name: str  # distribution name, canonical
    import_name: str
    version: str
    pyproject: Path
    src: Path
    requires: list[Requirement] = field(default_factory=list)
    extras: dict[str, list[Requirement]] = field(default_factory=dict)

    def declared(self) -> dict[str, str | None]:
        """canonical dist -> None (base dependency) or the extra that declares it."""
        out: dict[str, str | None] = {}
        for extra, reqs in self.extras.items():
            for r in reqs:
                out.setdefault(canonicalize_name(r.name), extra)
        for r in self.requires:
            out[canonicalize_name(r.name)] = None
        return out


def load_packages(root: Path) -> dict[str, Package]:
    """Read every ``packages/*/pyproject.toml`` of the workspace."""
    pkgs: dict[str, Package] = {}
    for pyproject in sorted((root / "packages").glob("*/pyproject.toml")):
        data = tomllib.loads(pyproject.read_text())
        project = data["project"]
        name = canonicalize_name(project["name"])
        import_name = name.replace("-", "_")
        pkg = Package(
            name=name,
            import_name=import_name,
            version=str(project["version"]),
            pyproject=pyproject,
            src=pyproject.parent / "src" / import_name,
            requires=[Requirement(s) for s in project.get("dependencies", [])],
            extras={
                k: [Requirement(s) for s in v] for k, v in project.get("optional-dependencies", {}).items()
            },
        )
        pkgs[name] = pkg
    return pkgs


# --------------------------------------------------------------------------------------------------- imports
@dataclass(frozen=True)
class ImportSite:
    file: Path
    line: int
    module: str  # full dotted name as written
    guarded: bool

    @property
    def root(self) -> str:
        return self.module.split(".")[0]


def _handler_catches_import_error(handler: ast.ExceptHandler) -> bool:
    names: list[str] = []
    t = handler.type
    if t is None:
        return True
    for node in t.elts if isinstance(t, ast.Tuple) else [t]:
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
    return any(n in {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"} for n in names)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def iter_imports(path: Path) -> Iterable[ImportSite]:
    """Absolute imports of a file, each flagged guarded when lazy, try/except-ImportError'd or TYPE_CHECKING."""
    tree = ast.parse(path.read_text(), filename=str(path))

    def visit(node: ast.AST, guarded: bool) -> Iterable[ImportSite]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield ImportSite(path, node.lineno, alias.name, guarded)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield ImportSite(path, node.lineno, node.module, guarded)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for child in ast.iter_child_nodes(node):
                yield from visit(child, True)
            return
        if isinstance(node, ast.Try):
            catches = any(_handler_catches_import_error(h) for h in node.handlers)
            for child in node.body:
                yield from visit(child, guarded or catches)
            for part in (*node.handlers, *node.orelse, *node.finalbody):
                yield from visit(part, guarded)
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from visit(child, True)
            for child in node.orelse:
                yield from visit(child, guarded)
            return
        for child in ast.iter_child_nodes(node):
            yield from visit(child, guarded)

    yield from visit(tree, False)


def import_to_dists(module_root: str, mapping: dict[str, list[str]]) -> set[str]:
    dists = {canonicalize_name(d) for d in mapping.get(module_root, [])}
    if module_root in KNOWN_IMPORT_NAMES:
        dists.add(canonicalize_name(KNOWN_IMPORT_NAMES[module_root]))
    if not dists:
        dists.add(canonicalize_name(module_root))
    return dists


def check_imports(
    root: Path, pkgs: dict[str, Package], mapping: dict[str, list[str]] | None = None
) -> list[Violation]:
    """Rules 1 and 2."""
    mapping = md.packages_distributions() if mapping is None else mapping
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    by_import = {p.import_name: p for p in pkgs.values()}
    out: list[Violation] = []
    for pkg in pkgs.values():
        declared = pkg.declared()
        for file in sorted(pkg.src.rglob("*.py")):
            rel = str(file.relative_to(root))
            for site in iter_imports(file):
                r = site.root
                if r in stdlib or r == pkg.import_name:
                    continue
                subject = f"import {site.module} (line {site.line})"
                if pkg.name == "lucid-core" and r in FORBIDDEN_IN_CORE:
                    out.append(Violation("2-tiers", rel, subject, f"lucid_core must never import {r}"))
                    continue
                if r in by_import:  # a sibling
                    sib = by_import[r].name
                    if sib not in SIBLING_GRAPH.get(pkg.name, frozenset()):
                        out.append(
                            Violation(
                                "2-tiers", rel, subject, f"{pkg.name} may not depend on {sib} (tier graph)"
                            )
                        )
                    elif sib not in declared:
                        out.append(Violation("2-tiers", rel, subject, f"{sib} is not declared by {pkg.name}"))
                    elif declared[sib] is not None and not site.guarded:
                        out.append(
                            Violation(
                                "2-tiers",
                                rel,
                                subject,
                                f"{sib} is only in extra [{declared[sib]}]: guard the import",
                            )
                        )
                    continue
                dists = import_to_dists(r, mapping)
                ok_dists: set[str] = set()
                for d in dists:
                    ok_dists |= {canonicalize_name(x) for x in EQUIVALENT_DISTS.get(d, frozenset({d}))}
                hits = [d for d in ok_dists if d in declared]
                if not hits:
                    out.append(
                        Violation(
                            "1-imports",
                            rel,
                            subject,
                            f"distribution {'/'.join(sorted(dists))} is not declared by {pkg.name}",
                        )
                    )
                elif all(declared[d] is not None for d in hits) and not site.guarded:
                    extra = declared[hits[0]]
                    out.append(
                        Violation(
                            "1-imports",
                            rel,
                            subject,
                            f"{hits[0]} is only in extra [{extra}] of {pkg.name}: import it lazily or under "
                            "try/except ImportError with a message naming the extra",
                        )
                    )
    return out


# -------------------------------------------------------------------------------------------------- versions
def check_versions(root: Path, pkgs: dict[str, Package]) -> list[Violation]:
    """Rule 3."""
    out: list[Violation] = []
    for pkg in pkgs.values():
        rel = str(pkg.pyproject.relative_to(root))
        reqs = list(pkg.requires) + [r for rs in pkg.extras.values() for r in rs]
        for req in reqs:
            sib = pkgs.get(canonicalize_name(req.name))
            if sib is None:
                continue
            if not str(req.specifier):
                out.append(
                    Violation("3-versions", rel, str(req), f"sibling {sib.name} needs a version range")
                )
            elif not req.specifier.contains(Version(sib.version), prereleases=True):
                out.append(
                    Violation(
                        "3-versions",
                        rel,
                        str(req),
                        f"range does not admit {sib.name}'s current version {sib.version}",
                    )
                )
    return out


# -------------------------------------------------------------------------------------------------- licences
def _marker_env() -> dict[str, str]:
    from packaging.markers import default_environment

    return dict(default_environment())


def _marker_ok(marker: str | None, env: dict[str, str]) -> bool:
    if not marker:
        return True
    try:
        return Marker(marker).evaluate({**env, "extra": ""})
    except Exception:
        return True


def read_lock(lock_path: Path) -> dict[str, dict[str, object]]:
    """Lock entries by canonical name (several versions of one name are merged; markers decide later)."""
    data = tomllib.loads(lock_path.read_text())
    out: dict[str, dict[str, object]] = {}
    for entry in data.get("package", []):
        name = canonicalize_name(entry["name"])
        cur = out.setdefault(
            name, {"version": entry.get("version", ""), "deps": [], "extras": {}, "groups": {}}
        )
        cur["deps"] += entry.get("dependencies", [])  # type: ignore[operator]
        for extra, deps in entry.get("optional-dependencies", {}).items():
            cur["extras"].setdefault(extra, []).extend(deps)  # type: ignore[union-attr]
        for group, deps in entry.get("dev-dependencies", {}).items():
            cur["groups"].setdefault(group, []).extend(deps)  # type: ignore[union-attr]
    return out


def group_closures(lock: dict[str, dict[str, object]], env: dict[str, str]) -> dict[str, set[str]]:
    """``{group: distributions}`` of every dependency group (dev, docs, …) a locked project declares, each
    followed through the lock like a runtime closure (issue 20: notebook and docs tools are audited too)."""
    out: dict[str, set[str]] = {}
    for entry in lock.values():
        for group, deps in entry.get("groups", {}).items():  # type: ignore[union-attr]
            closure: set[str] = set()
            for dep in deps:
                if _marker_ok(dep.get("marker"), env):
                    closure |= runtime_closure(lock, str(dep["name"]), tuple(dep.get("extra", [])), env)
            out.setdefault(group, set()).update(closure)
    return out


def runtime_closure(
    lock: dict[str, dict[str, object]], start: str, extras: Iterable[str], env: dict[str, str]
) -> set[str]:
    """Distributions reachable from ``start[extras]`` following the lock's dependency edges valid on ``env``."""
    seen: set[str] = set()
    stack: list[tuple[str, tuple[str, ...]]] = [(canonicalize_name(start), tuple(extras))]
    visited_extras: set[tuple[str, str]] = set()
    while stack:
        name, exs = stack.pop()
        entry = lock.get(name)
        if entry is None:
            continue
        edges: list[dict[str, object]] = []
        if name not in seen:
            seen.add(name)
            edges += entry["deps"]  # type: ignore[arg-type]
        for e in exs:
            if (name, e) not in visited_extras:
                visited_extras.add((name, e))
                edges += entry["extras"].get(e, [])  # type: ignore[union-attr]
        for dep in edges:
            if not _marker_ok(dep.get("marker"), env):  # type: ignore[arg-type]
                continue
            stack.append((canonicalize_name(str(dep["name"])), tuple(dep.get("extra", []))))  # type: ignore[arg-type]
    return seen


def installed_licence(dist: str) -> str | None:
    """Licence of an installed distribution: License-Expression, else License (short), else classifiers."""
    try:
        meta = md.metadata(dist)
    except md.PackageNotFoundError:
        return None
    expr = meta.get("License-Expression")
    if expr:
        return str(expr)
    classifiers = [
        c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")
    ]
    lic = (meta.get("License") or "").strip()
    if lic and len(lic) < 80 and "\n" not in lic:
        return lic if not classifiers else f"{lic} ({'; '.join(classifiers)})"
    if classifiers:
        return "; ".join(classifiers)
    return lic.splitlines()[0][:80] if lic else "UNKNOWN"


def check_licences(
    root: Path,
    pkgs: dict[str, Package],
    *,
    lock_path: Path | None = None,
    licence_of: Callable[[str], str | None] = installed_licence,
    env: dict[str, str] | None = None,
    report: Callable[[str], None] = print,
) -> list[Violation]:
    """Rule 4: print the audit table and flag copyleft distributions in any package's runtime closure."""
    lock_path = lock_path or root / "uv.lock"
    lock = read_lock(lock_path)
    env = env or _marker_env()
    workspace = set(pkgs)
    out: list[Violation] = []
    rows: list[tuple[str, str, str, str]] = []
    for pkg in pkgs.values():
        closure = runtime_closure(lock, pkg.name, pkg.extras.keys(), env) - workspace
        for dist in sorted(closure):
            lic = licence_of(dist)
            version = str(lock.get(dist, {}).get("version", ""))
            rows.append((pkg.name, dist, version, lic or "(not installed here)"))
            if lic and COPYLEFT.search(lic):
                out.append(
                    Violation(
                        "4-licences",
                        str(lock_path.relative_to(root)),
                        f"{dist} {version}",
                        f"copyleft licence '{lic}' in the runtime closure of {pkg.name}",
                    )
                )
    covered = {dist for _, dist, _, _ in rows}
    for group, closure in sorted(group_closures(lock, env).items()):
        for dist in sorted(closure - workspace - covered):
            lic = licence_of(dist)
            version = str(lock.get(dist, {}).get("version", ""))
            rows.append((f"[{group}]", dist, version, lic or "(not installed here)"))
            if lic and COPYLEFT.search(lic):
                out.append(
                    Violation(
                        "4-licences",
                        str(lock_path.relative_to(root)),
                        f"{dist} {version}",
                        f"copyleft licence '{lic}' in the dependency group {group!r} (dev/docs tools are audited too)",
                    )
                )
    width = max((len(r[1]) for r in rows), default=10)
    report(f"{'package':<12} {'distribution':<{width}} {'version':<14} licence")
    for pkg_name, dist, version, lic in rows:
        report(f"{pkg_name:<12} {dist:<{width}} {version:<14} {lic}")
    return out


def run(root: Path, *, licences: bool = True, quiet: bool = False) -> list[Violation]:
    pkgs = load_packages(root)
    violations = check_imports(root, pkgs) + check_versions(root, pkgs)
    if licences:
        violations += check_licences(root, pkgs, report=(lambda s: None) if quiet else print)
    return violations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--no-licences", action="store_true", help="skip rule 4 (licence audit)")
    parser.add_argument("--quiet", action="store_true", help="do not print the licence table")
    args = parser.parse_args(argv)
    violations = run(args.root, licences=not args.no_licences, quiet=args.quiet)
    for v in violations:
        print(v, file=sys.stderr)
    n = len(load_packages(args.root))
    print(f"release guard: {n} packages, {len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
