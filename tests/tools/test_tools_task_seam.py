"""Nothing outside the task modules dispatches on a task's name: the packages read the task object
(``lucid_core.tasks``) or branch on which result/target fields are present."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGES = Path(__file__).resolve().parents[2] / "packages"
TASK_MODULES = PACKAGES / "lucid-core" / "src" / "lucid_core" / "tasks"
NAME_DISPATCH = re.compile(r"task ?(==|!=|in) ?[\"'(]")


def test_no_package_module_branches_on_a_task_name() -> None:
    sources = [p for p in sorted(PACKAGES.glob("*/src/**/*.py")) if TASK_MODULES not in p.parents]
    assert len(sources) > 50  # the packages were found
    hits = [
        f"{path.relative_to(PACKAGES)}:{number}: {line.strip()}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if NAME_DISPATCH.search(line)
    ]
    assert hits == []
