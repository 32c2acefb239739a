"""TodoManager: the session's TODO list, in memory and snapshotted to .toold/todos.json."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toold.storage import atomic_write_text, read_state

log = logging.getLogger(__name__)

TODO_STATUSES = ("done", "in_progress", "pending")

Listener = Callable[[list[dict[str, Any]]], None]


class TodoManager:
    """BareAgent's TODOs (ids t1, t2, ...), surviving a daemon restart via a snapshot."""

    def __init__(self, snapshot: Path | None = None, on_change: Listener | None = None) -> None:
        self.snapshot = snapshot
        self.on_change = on_change
        self._items: dict[str, dict[str, Any]] = {}
        self._next = 1
        self._lock = threading.Lock()
        self._load()

    def _load(self) -> None:
        if self.snapshot is None:
            return
        try:
            data = json.loads(read_state(self.snapshot).decode("utf-8"))
            items = {item["id"]: dict(item) for item in data["items"]}
            self._items, self._next = items, int(data["next"])
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a link: PermissionError
            log.error("ignoring unreadable TODO snapshot %s: %s", self.snapshot, exc)

    def _commit(self, items: dict[str, dict[str, Any]], next_id: int) -> None:
        # Snapshot first: a failed write leaves the list as it was.
        if self.snapshot is not None:
            payload = {"next": next_id, "items": list(items.values())}
            text = json.dumps(payload, indent=2, ensure_ascii=False)
            atomic_write_text(self.snapshot, text, create_dirs=True)  # never through a link
        self._items, self._next = items, next_id
        if self.on_change is not None:
            self.on_change(self.items())

    def items(self) -> list[dict[str, Any]]:
        """Every item, oldest first, as ``{id, task, status, priority}``."""
        return [dict(item) for item in self._items.values()]

    def write(
        self,
        action: str,
        task: str | None = None,
        priority: str | None = None,
        task_id: str | None = None,
        status: str | None = None,
    ) -> str:
        """``todo_write``: add an item or update one's status."""
        with self._lock:
            if action == "add":
                return self._add(task, priority)
            if action == "update":
                return self._update(task_id, status)
            raise ValueError(f"Unknown todo_write action: {action}")

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
            items = list(self._items.values())
        if not items:
            return "No TODO items."
        lines = ["TODO items:"]
        lines += [f"- {i['id']} [{i['status']}] ({i['priority']}) {i['task']}" for i in items]
        return "\n".join(lines)
