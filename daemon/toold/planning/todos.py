"""TodoManager: the workspace's TODO list, kept in .toold/todos.json.

Every process serving the workspace (an engine, ``toold acp``, ``toold mcp``) holds a
manager over the same file. A change takes an flock shared with the others, re-reads the
file inside it, applies the change and replaces the file atomically, so no process's
change is lost to another's; a read re-reads the file when it changed since.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from toold.storage import atomic_write_text, file_lock, read_state

log = logging.getLogger(__name__)

TODO_STATUSES = ("done", "in_progress", "pending")

Listener = Callable[[list[dict[str, Any]]], None]
Signature = tuple[int, int, int] | None
"""The snapshot file as last seen (inode, mtime, size); None when there was none."""


def _signature(path: Path) -> Signature:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:  # missing, or a folder on the way is not one
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class TodoManager:
    """BareAgent's TODOs (ids t1, t2, ...), shared through a snapshot file when given one."""

    def __init__(
        self,
        snapshot: Path | None = None,
        on_change: Listener | None = None,
        *,
        lock_path: Path | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.on_change = on_change
        self.lock_path = lock_path
        if snapshot is not None and lock_path is None:
            self.lock_path = snapshot.with_name(snapshot.name + ".lock")
        self._items: dict[str, dict[str, Any]] = {}
        self._next = 1
        self._seen: Signature = None
        self._lock = threading.Lock()
        with self._lock:
            self._refresh()

    def _refresh(self) -> None:
        """Take up the snapshot if it changed since it was last read or written (under
        ``_lock``); an unreadable one is reported once and the list kept."""
        if self.snapshot is None:
            return
        seen = _signature(self.snapshot)
        if seen == self._seen:
            return
        self._seen = seen
        if seen is None:  # removed since: the list starts again
            self._items, self._next = {}, 1
            return
        try:
            data = json.loads(read_state(self.snapshot).decode("utf-8"))
            items = {item["id"]: dict(item) for item in data["items"]}
            self._items, self._next = items, int(data["next"])
        except FileNotFoundError:
            self._items, self._next = {}, 1
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a link: PermissionError
            log.error("ignoring unreadable TODO snapshot %s: %s", self.snapshot, exc)

    @contextlib.contextmanager
    def _shared(self) -> Iterator[None]:
        """The other processes' writers held off (no snapshot: nothing to share)."""
        if self.lock_path is None:
            yield
            return
        with file_lock(self.lock_path):
            yield

    def _commit(self, items: dict[str, dict[str, Any]], next_id: int) -> None:
        # Snapshot first: a failed write leaves the list as it was.
        if self.snapshot is not None:
            payload = {"next": next_id, "items": list(items.values())}
            text = json.dumps(payload, indent=2, ensure_ascii=False)
            atomic_write_text(self.snapshot, text, create_dirs=True)  # never through a link
            self._seen = _signature(self.snapshot)
        self._items, self._next = items, next_id

    def items(self) -> list[dict[str, Any]]:
        """Every item, oldest first, as ``{id, task, status, priority}``."""
        with self._lock:
            self._refresh()
            return [dict(item) for item in self._items.values()]

    def write(
        self,
        action: str,
        task: str | None = None,
        priority: str | None = None,
        task_id: str | None = None,
        status: str | None = None,
    ) -> str:
        """``todo_write``: add an item or update one's status (on the list as the other
        processes left it: no one's change is lost)."""
        if action not in ("add", "update"):
            raise ValueError(f"Unknown todo_write action: {action}")
        with self._lock, self._shared():
            self._refresh()
            add = action == "add"
            answer = self._add(task, priority) if add else self._update(task_id, status)
        if self.on_change is not None:
            self.on_change(self.items())
        return answer

    def _add(self, task: str | None, priority: str | None) -> str:
        if task is None:
            raise ValueError("task is required when action=add")
        text = task.strip()
        if not text:
            raise ValueError("task must not be empty")
        item_id = f"t{self._next}"
        label = (priority or "").strip() or "normal"
        item = {"id": item_id, "task": text, "status": "pending", "priority": label}
        self._commit({**self._items, item_id: item}, self._next + 1)
        return f"Added TODO {item_id} [{label}]: {text}"

    def _update(self, task_id: str | None, status: str | None) -> str:
        if task_id is None:
            raise ValueError("task_id is required when action=update")
        if status is None:
            raise ValueError("status is required when action=update")
        key = task_id.strip()
        if key not in self._items:
            raise ValueError(f"Unknown TODO id: {task_id}")
        new_status = status.strip()
        if new_status not in TODO_STATUSES:
            raise ValueError(
                f"Invalid TODO status: {status}. Expected one of: {', '.join(TODO_STATUSES)}"
            )
        items = {**self._items, key: {**self._items[key], "status": new_status}}
        self._commit(items, self._next)
        return f"Updated TODO {key} -> {new_status}"

    def read(self) -> str:
        """``todo_read``: the list as text for a model."""
        with self._lock:
            self._refresh()
            items = list(self._items.values())
        if not items:
            return "No TODO items."
        lines = ["TODO items:"]
        lines += [f"- {i['id']} [{i['status']}] ({i['priority']}) {i['task']}" for i in items]
        return "\n".join(lines)
