"""TaskManager: persistent tasks in ``.tasks.json`` at the workspace root.

Every change takes an flock shared with other toold processes, re-reads the
file inside it, applies the change and replaces the file atomically (temp file,
fsync, rename), so concurrent daemons never lose an update and a crash leaves
either the old file or the new one. A corrupt file is reported and never
overwritten; the previous good version is kept as .toold/tasks.json.bak.
"""

from __future__ import annotations

import builtins
import copy
import json
import secrets
import shutil
import string
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toold.storage import atomic_write_text, file_lock

TASK_STATUSES = ("done", "failed", "in_progress", "pending")
TASKS_FILE = ".tasks.json"
_ALPHABET = string.ascii_letters + string.digits
_FIELDS = ("id", "title", "description", "status", "depends_on", "created_at", "updated_at")

Listener = Callable[[list[dict[str, Any]]], None]


class TaskStoreError(ValueError):
    """``.tasks.json`` cannot be used as it is; the message says how to fix it."""


def now() -> str:
    """UTC ISO-8601 timestamp."""
    return datetime.now(UTC).isoformat()


def _parse(text: str, path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(text) if text.strip() else {"tasks": {}}
    except ValueError as exc:
        raise TaskStoreError(
            f"{path.name} is not valid JSON ({exc}); fix or remove it — toold will not overwrite it"
        ) from None
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, dict) or not all(
        isinstance(t, dict) and all(f in t for f in _FIELDS) for t in tasks.values()
    ):
        raise TaskStoreError(
            f'{path.name} must hold {{"tasks": {{id: {{{", ".join(_FIELDS)}}}}}}}; '
            "fix or remove it — toold will not overwrite it"
        )
    return tasks


class TaskManager:
    """task_create / task_list / task_get / task_update over one ``.tasks.json``."""

    def __init__(
        self,
        path: Path,
        *,
        lock_path: Path,
        backup_path: Path | None = None,
        on_change: Listener | None = None,
    ) -> None:
        self.path = path
        self.lock_path = lock_path
        self.backup_path = backup_path
        self.on_change = on_change
        self._tasks: dict[str, dict[str, Any]] = {}
        self._seen: str | None = None
        self._guard = threading.Lock()

    # -- reading -------------------------------------------------------------
    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        except UnicodeDecodeError:
            raise TaskStoreError(f"{self.path.name} is not UTF-8 text; fix or remove it") from None
        tasks = _parse(text, self.path)
        self._tasks, self._seen = tasks, text
        return tasks

    def load(self) -> None:
        """Read the file without notifying; a corrupt file is reported by later calls."""
        with self._guard:
            try:
                self._read()
            except TaskStoreError as exc:
                self._tasks, self._seen = {}, None
                import logging

                logging.getLogger(__name__).warning("%s", exc)

    def reload(self) -> bool:
        """Re-read the file (after an outside edit); True when the tasks changed."""
        with self._guard:
            before = self._tasks
            try:
                after = self._read()
            except TaskStoreError:
                return False
        if after != before and self.on_change is not None:
            self.on_change(self.snapshot())
        return after != before

    # -- writing -------------------------------------------------------------
    def _mutate(self, change: Callable[[dict[str, dict[str, Any]]], dict[str, Any]]) -> dict:
        with self._guard, file_lock(self.lock_path):
            # Work on a copy: a failed change or write leaves the known state untouched.
            tasks = copy.deepcopy(self._read())
            result = change(tasks)
            text = json.dumps({"tasks": tasks}, indent=2, ensure_ascii=False) + "\n"
            if self.backup_path is not None and self._seen:
                self.backup_path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.path, self.backup_path)
            atomic_write_text(self.path, text)
            self._tasks, self._seen = tasks, text
        if self.on_change is not None:
            self.on_change(self.snapshot())
        return dict(result)

    def create(
        self, title: str, description: str = "", depends_on: list[str] | None = None
    ) -> dict[str, Any]:
        """A new pending task; dependencies must exist."""
        clean_title = title.strip()
        if not clean_title:
            raise ValueError("title must not be empty")
        deps: list[str] = []
        for raw in depends_on or []:
            dep = raw.strip()
            if not dep:
                raise ValueError("depends_on entries must not be empty")
            if dep not in deps:
                deps.append(dep)

        def change(tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
            for dep in deps:
                if dep not in tasks:
                    raise ValueError(f"Unknown dependency task id: {dep}")
            task_id = "".join(secrets.choice(_ALPHABET) for _ in range(8))
            while task_id in tasks:
                task_id = "".join(secrets.choice(_ALPHABET) for _ in range(8))
            stamp = now()
            task = {
                "id": task_id,
                "title": clean_title,
                "description": description,
                "status": "pending",
                "depends_on": deps,
                "created_at": stamp,
                "updated_at": stamp,
            }
            tasks[task_id] = task
            _check_acyclic(tasks, task_id)
            return task

        return self._mutate(change)

    def update(
        self, task_id: str, status: str | None = None, title: str | None = None
    ) -> dict[str, Any]:
        """Change a task's status and/or title."""
        if status is None and title is None:
            raise ValueError("status or title is required")
        if status is not None and status not in TASK_STATUSES:
            raise ValueError(
                f"Invalid task status: {status}. Expected one of: {', '.join(TASK_STATUSES)}"
            )
        if title is not None and not title.strip():
            raise ValueError("title must not be empty")

        def change(tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
            task = tasks.get(task_id)
            if task is None:
                raise ValueError(f"Unknown task id: {task_id}")
            if status is not None:
                task["status"] = status
            if title is not None:
                task["title"] = title.strip()
            task["updated_at"] = now()
            return task

        return self._mutate(change)

    def claim(self, task_id: str) -> bool:
        """pending → in_progress only if still pending (for teammates); True when claimed."""
        claimed = False

        def change(tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
            nonlocal claimed
            task = tasks.get(task_id)
            if task is None:
                raise ValueError(f"Unknown task id: {task_id}")
            if task["status"] == "pending":
                task["status"], task["updated_at"], claimed = "in_progress", now(), True
            return task

        self._mutate(change)
        return claimed

    # -- queries ---------------------------------------------------------------
    def get(self, task_id: str) -> dict[str, Any]:
        """One task."""
        with self._guard:
            task = self._read().get(task_id)
        if task is None:
            raise ValueError(f"Unknown task id: {task_id}")
        return dict(task)

    def list(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every task, or those with ``status``."""
        if status is not None and status not in TASK_STATUSES:
            raise ValueError(
                f"Invalid task status: {status}. Expected one of: {', '.join(TASK_STATUSES)}"
            )
        with self._guard:
            tasks = self._read()
        return [dict(t) for t in tasks.values() if status is None or t["status"] == status]

    def snapshot(self) -> builtins.list[dict[str, Any]]:
        """The last known tasks, each with ``ready`` (pending, every dependency done)."""
        tasks = self._tasks
        return [{**t, "ready": is_ready(t, tasks)} for t in tasks.values()]

    def ready_tasks(self) -> builtins.list[dict[str, Any]]:
        """Tasks that can start now."""
        return [t for t in self.list() if is_ready(t, self._tasks)]


def is_ready(task: dict[str, Any], tasks: dict[str, dict[str, Any]]) -> bool:
    """Pending with every dependency done."""
    return task["status"] == "pending" and all(
        tasks.get(dep, {}).get("status") == "done" for dep in task["depends_on"]
    )


def _check_acyclic(tasks: dict[str, dict[str, Any]], start: str) -> None:
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(task_id: str) -> None:
        if task_id in done:
            return
        if task_id in visiting:
            raise ValueError(f"Cyclic task dependency detected at: {task_id}")
        visiting.add(task_id)
        for dep in tasks.get(task_id, {}).get("depends_on", []):
            visit(dep)
        visiting.discard(task_id)
        done.add(task_id)

    visit(start)
