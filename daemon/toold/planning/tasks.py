"""TaskManager: persistent tasks in ``.tasks.json`` at the workspace root.

Every change takes an flock shared with other toold processes, re-reads the
file inside it, applies the change and replaces the file atomically (temp file,
fsync, rename), so concurrent daemons never lose an update and a crash leaves
either the old file or the new one. A corrupt file is reported and never
overwritten; the previous good version is kept as .toold/tasks.json.bak.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import json
import logging
import os
import secrets
import string
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toold.errors import TaskStoreError
from toold.sandbox.paths import DIR_FLAGS
from toold.storage import (
    atomic_write_bytes,
    file_lock,
    now,
    open_state,
    read_state,
    refuse_symlink_at,
    remove_state,
    state_names,
)

log = logging.getLogger(__name__)

TASK_STATUSES = ("done", "failed", "in_progress", "pending")
TASKS_FILE = ".tasks.json"
_ALPHABET = string.ascii_letters + string.digits
_TEXT_FIELDS = ("id", "title", "description", "status", "created_at", "updated_at")
_FIELDS = (*_TEXT_FIELDS, "depends_on")

Tasks = dict[str, dict[str, Any]]
Listener = Callable[[list[dict[str, Any]]], None]
Change = Callable[[Tasks], tuple[dict[str, Any], bool]]
"""Edits the tasks in place; returns the task to answer with and whether anything changed."""


def _status_error(status: str) -> ValueError:
    return ValueError(f"Invalid task status: {status}. Expected one of: {', '.join(TASK_STATUSES)}")


def _task_problem(key: str, task: Any) -> str | None:
    if not isinstance(task, dict):
        return "is not an object"
    for name in _TEXT_FIELDS:
        if not isinstance(task.get(name), str):
            return f"needs a string '{name}'"
    deps = task.get("depends_on")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        return "needs 'depends_on' as a list of task ids"
    if task["id"] != key:
        return f"is stored under a different key than its id {task['id']!r}"
    if task["status"] not in TASK_STATUSES:
        return f"has status {task['status']!r}, not one of {', '.join(TASK_STATUSES)}"
    return None


def _parse(text: str, path: Path) -> Tasks:
    fix = "fix or remove it — toold will not overwrite it"
    try:
        data = json.loads(text) if text.strip() else {"tasks": {}}
    except ValueError as exc:
        raise TaskStoreError(f"{path.name} is not valid JSON ({exc}); {fix}") from None
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, dict):
        raise TaskStoreError(f'{path.name} must hold {{"tasks": {{id: task, ...}}}}; {fix}')
    for key, task in tasks.items():
        problem = _task_problem(key, task)
        if problem:
            raise TaskStoreError(f"{path.name}: task {key!r} {problem}; {fix}")
    return tasks


def _copy(task: dict[str, Any]) -> dict[str, Any]:
    return {**task, "depends_on": list(task["depends_on"])}


class _Renderer:
    """The text of ``json.dumps({"tasks": tasks}, indent=2)``, re-encoding only the tasks
    that changed since the last call (indented dumps run in pure Python: O(file) a write)."""

    def __init__(self) -> None:
        self._done: dict[str, tuple[dict[str, Any], str]] = {}

    def render(self, tasks: Tasks) -> str:
        if not tasks:
            self._done = {}
            return '{\n  "tasks": {}\n}\n'
        done: dict[str, tuple[dict[str, Any], str]] = {}
        for key, task in tasks.items():
            cached = self._done.get(key)
            if cached is None or cached[0] != task or list(cached[0]) != list(task):
                # A nested value is indented by 4 more spaces; JSON strings hold no raw
                # newline, so every newline in the fragment is a line break.
                text = json.dumps(task, indent=2, ensure_ascii=False).replace("\n", "\n    ")
                cached = (copy.deepcopy(task), text)
            done[key] = cached
        self._done = done
        entries = ",\n".join(
            f"    {json.dumps(key, ensure_ascii=False)}: {text}" for key, (_, text) in done.items()
        )
        return '{\n  "tasks": {\n' + entries + "\n  }\n}\n"


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
        self._tasks: Tasks = {}
        # What listeners were last told (or the state at load): reads refresh _tasks
        # but only a notification refreshes this, so no outside edit goes unannounced.
        self._shown: Tasks = {}
        self._guard = threading.Lock()
        self._renderer = _Renderer()

    # -- reading -------------------------------------------------------------
    def _parse_file(self) -> Tasks:
        try:
            text = read_state(self.path).decode("utf-8")
        except FileNotFoundError:
            text = ""
        except UnicodeDecodeError:
            raise TaskStoreError(f"{self.path.name} is not UTF-8 text; fix or remove it") from None
        except PermissionError as exc:  # a symlink: never followed
            raise TaskStoreError(str(exc)) from None
        return _parse(text, self.path)

    def _read(self) -> Tasks:
        self._tasks = self._parse_file()
        return self._tasks

    def load(self) -> None:
        """Read the file without notifying; a corrupt file is reported by later calls.

        Temp files a killed writer left behind are removed: writers only create them
        while holding the lock, so under the lock any that exist are stale.
        """
        with self._guard:
            try:
                self._remove_stale()
            except OSError as exc:  # a symlinked .toold: the next change says so too
                log.warning("%s", exc)
            try:
                self._shown = self._read()
            except TaskStoreError as exc:
                log.warning("%s", exc)

    def _remove_stale(self) -> None:
        try:
            os.close(open_state(self.lock_path.parent, DIR_FLAGS))
        except FileNotFoundError:
            return  # no state folder yet: no writer ever held the lock
        with file_lock(self.lock_path):
            stale = f".{self.path.name}."
            for name in state_names(self.path.parent):
                if name.startswith(stale) and name.endswith(".tmp"):
                    remove_state(self.path.parent / name)

    def reload(self) -> bool:
        """Re-read the file (after an outside edit) and notify when the tasks changed.

        Raises TaskStoreError when the file is no longer valid.
        """
        with self._guard:
            tasks = self._read()
            changed = tasks != self._shown
            self._shown = tasks
        if changed:
            self._notify()
        return changed

    def _notify(self) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change(self.snapshot())
        except Exception:  # the change itself succeeded; only announcing it failed
            log.exception("could not announce the tasks' change")

    # -- writing -------------------------------------------------------------
    def _mutate(self, change: Change) -> dict[str, Any]:
        try:
            with self._guard, file_lock(self.lock_path):
                # A fresh parse, owned here: a failed change or write leaves the known
                # state as is.
                tasks = self._parse_file()
                result, changed = change(tasks)
                if changed:
                    data = self._renderer.render(tasks).encode("utf-8")
                    self._keep_backup()
                    atomic_write_bytes(self.path, data)
                    self._tasks = self._shown = tasks
        except PermissionError as exc:  # a symlinked .toold or .tasks.json: never followed
            raise TaskStoreError(str(exc)) from None
        if changed:
            self._notify()
        return _copy(result)

    def _keep_backup(self) -> None:
        """Keep the current (valid) file as the backup before it is replaced.

        Folders are opened through open_state and the link made relative to them, so a
        symlinked ``.toold`` is refused rather than written through.
        """
        backup = self.backup_path
        if backup is None:
            return
        staged = backup.name + ".tmp"
        src_fd = open_state(self.path.parent, DIR_FLAGS)
        try:
            dst_fd = open_state(backup.parent, DIR_FLAGS, create_dirs=True)
            try:
                refuse_symlink_at(dst_fd, backup)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(staged, dir_fd=dst_fd)
                try:
                    # The replaced file's inode becomes the backup: no copy, and atomic.
                    os.link(
                        self.path.name,
                        staged,
                        src_dir_fd=src_fd,
                        dst_dir_fd=dst_fd,
                        follow_symlinks=False,
                    )
                except FileNotFoundError:
                    return  # no file yet: nothing to keep
                except OSError:  # another filesystem, or no hard links there
                    atomic_write_bytes(backup, read_state(self.path))
                    return
                os.replace(staged, backup.name, src_dir_fd=dst_fd, dst_dir_fd=dst_fd)
            finally:
                os.close(dst_fd)
        finally:
            os.close(src_fd)

    def create(
        self, title: str, description: str = "", depends_on: builtins.list[str] | None = None
    ) -> dict[str, Any]:
        """A new pending task; dependencies must exist and form no cycle."""
        clean_title = title.strip()
        if not clean_title:
            raise ValueError("title must not be empty")
        deps: builtins.list[str] = []
        for raw in depends_on or []:
            dep = str(raw).strip()
            if not dep:
                raise ValueError("depends_on entries must not be empty")
            if dep not in deps:
                deps.append(dep)

        def change(tasks: Tasks) -> tuple[dict[str, Any], bool]:
            for dep in deps:
                if dep not in tasks:
                    raise ValueError(f"Unknown dependency task id: {dep}")
            task_id = "".join(secrets.choice(_ALPHABET) for _ in range(8))
            while task_id in tasks:
                task_id = "".join(secrets.choice(_ALPHABET) for _ in range(8))
            stamp = now()
            tasks[task_id] = {
                "id": task_id,
                "title": clean_title,
                "description": description.strip(),
                "status": "pending",
                "depends_on": deps,
                "created_at": stamp,
                "updated_at": stamp,
            }
            _check_acyclic(tasks, task_id)
            return tasks[task_id], True

        return self._mutate(change)

    def update(
        self, task_id: str, status: str | None = None, title: str | None = None
    ) -> dict[str, Any]:
        """Change a task's status and/or title; an update that changes nothing writes nothing."""
        if status is None and title is None:
            raise ValueError("status or title is required")

        def change(tasks: Tasks) -> tuple[dict[str, Any], bool]:
            task = tasks.get(task_id.strip())
            if task is None:
                raise ValueError(f"Unknown task id: {task_id}")
            new_status = task["status"] if status is None else status.strip()
            if new_status not in TASK_STATUSES:
                raise _status_error(status or "")
            new_title = task["title"] if title is None else title.strip()
            if not new_title:
                raise ValueError("title must not be empty")
            changed = (new_status, new_title) != (task["status"], task["title"])
            if changed:
                task["status"], task["title"], task["updated_at"] = new_status, new_title, now()
            return task, changed

        return self._mutate(change)

    def claim(self, task_id: str) -> bool:
        """pending → in_progress only if still pending (for teammates); True when claimed."""
        claimed = False

        def change(tasks: Tasks) -> tuple[dict[str, Any], bool]:
            nonlocal claimed
            task = tasks.get(task_id)
            if task is None:
                raise ValueError(f"Unknown task id: {task_id}")
            if task["status"] == "pending":
                task["status"], task["updated_at"], claimed = "in_progress", now(), True
            return task, claimed

        self._mutate(change)
        return claimed

    # -- queries ---------------------------------------------------------------
    def get(self, task_id: str) -> dict[str, Any]:
        """One task."""
        with self._guard:
            task = self._read().get(task_id.strip())
        if task is None:
            raise ValueError(f"Unknown task id: {task_id}")
        return _copy(task)

    def list(self, status: str | None = None) -> builtins.list[dict[str, Any]]:
        """Every task, or those with ``status``."""
        wanted = None if status is None else status.strip()
        if wanted is not None and wanted not in TASK_STATUSES:
            raise _status_error(status or "")
        with self._guard:
            tasks = self._read()
        return [_copy(t) for t in tasks.values() if wanted is None or t["status"] == wanted]

    def snapshot(self) -> builtins.list[dict[str, Any]]:
        """The last known tasks, each with ``ready`` (pending, every dependency done).

        Only the spec's fields: keys someone else added to the file stay in the file.
        """
        tasks = self._tasks
        return [
            {
                **{f: t[f] for f in _FIELDS},
                "depends_on": list(t["depends_on"]),
                "ready": is_ready(t, tasks),
            }
            for t in tasks.values()
        ]

    def ready_tasks(self) -> builtins.list[dict[str, Any]]:
        """Tasks that can start now."""
        with self._guard:
            tasks = self._read()
        return [_copy(t) for t in tasks.values() if is_ready(t, tasks)]


def is_ready(task: dict[str, Any], tasks: Tasks) -> bool:
    """Pending with every dependency done."""
    return task["status"] == "pending" and all(
        tasks.get(dep, {}).get("status") == "done" for dep in task["depends_on"]
    )


def _check_acyclic(tasks: Tasks, start: str) -> None:
    """Depth-first walk from ``start`` (iterative: dependency chains may be long)."""
    on_path, done = {start}, set()
    stack = [(start, iter(tasks[start]["depends_on"]))]
    while stack:
        node, deps = stack[-1]
        for dep in deps:
            if dep in on_path:
                raise ValueError(f"Cyclic task dependency detected at: {dep}")
            if dep in tasks and dep not in done:
                on_path.add(dep)
                stack.append((dep, iter(tasks[dep]["depends_on"])))
                break
        else:
            stack.pop()
            on_path.discard(node)
            done.add(node)
