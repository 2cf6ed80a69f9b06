"""The task registry: name -> :class:`~lucid_core.tasks.base.Task` (the built-in tasks are registered by
:mod:`lucid_core.tasks` on import)."""

from __future__ import annotations

from lucid_core.tasks.base import Task

__all__ = [
    "TASKS",
    "get_task",
    "register_task",
    "registered_tasks",
    "task_of_reference_head",
    "unregister_task",
]

#: The registered tasks by name, in registration order (read it; add with :func:`register_task`).
TASKS: dict[str, Task] = {}


def register_task(task: Task, *, replace: bool = False) -> Task:
    """Make ``task`` known by its name to every entry point; re-registering a name needs ``replace=True``."""
    if not isinstance(task, Task):
        raise TypeError(f"register_task: expected a Task, got {type(task).__name__}")
    if task.name in TASKS and not replace:
        raise ValueError(f"task {task.name!r} is already registered")
    TASKS[task.name] = task
    return task


def unregister_task(name: str) -> None:
    """Forget a registered task (tests that register a temporary one)."""
    TASKS.pop(name, None)


def get_task(name: str) -> Task:
    """The registered task ``name``; a clear error naming the known tasks otherwise."""
    task = TASKS.get(name)
    if task is None:
        raise ValueError(f"unknown task {name!r}; expected one of {sorted(TASKS)}")
    return task


def registered_tasks() -> tuple[Task, ...]:
    """Every registered task, in registration order."""
    return tuple(TASKS.values())


def task_of_reference_head(class_name: str) -> Task | None:
    """The task whose reference head marker occurs in ``class_name`` (later registrations first), else ``None``."""
    for task in reversed(registered_tasks()):
        if task.reference_head and task.reference_head in class_name:
            return task
    return None
