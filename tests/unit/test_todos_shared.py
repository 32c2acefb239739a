"""Two TodoManagers over one todos.json (two processes serving a workspace): no lost update."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from toold.planning.todos import TodoManager


def _pair(workspace: Path) -> tuple[TodoManager, TodoManager]:
    snapshot = workspace / ".toold" / "todos.json"
    return TodoManager(snapshot), TodoManager(snapshot)


def test_each_manager_writes_on_the_others_list(workspace: Path) -> None:
    first, second = _pair(workspace)  # both loaded the empty list
    assert first.write("add", task="a") == "Added TODO t1 [normal]: a"
    assert second.write("add", task="b") == "Added TODO t2 [normal]: b"
    assert first.write("update", task_id="t2", status="done") == "Updated TODO t2 -> done"
    expected = [
        {"id": "t1", "task": "a", "status": "pending", "priority": "normal"},
        {"id": "t2", "task": "b", "status": "done", "priority": "normal"},
    ]
    assert first.items() == second.items() == expected
    assert second.read() == "TODO items:\n- t1 [pending] (normal) a\n- t2 [done] (normal) b"


def test_the_announced_list_holds_the_other_managers_items(workspace: Path) -> None:
    snapshot = workspace / ".toold" / "todos.json"
    told: list[list[dict[str, Any]]] = []
    first, second = TodoManager(snapshot), TodoManager(snapshot, on_change=told.append)
    first.write("add", task="a")
    second.write("add", task="b")
    assert [[item["task"] for item in items] for items in told] == [["a", "b"]]


def test_a_removed_snapshot_starts_the_list_again(workspace: Path) -> None:
    first, second = _pair(workspace)
    first.write("add", task="a")
    (workspace / ".toold" / "todos.json").unlink()
    assert second.read() == first.read() == "No TODO items."
    assert second.write("add", task="b") == "Added TODO t1 [normal]: b"


def test_concurrent_writers_lose_nothing(workspace: Path) -> None:
    managers = [TodoManager(workspace / ".toold" / "todos.json") for _ in range(4)]
    start = threading.Barrier(len(managers))

    def add(manager: TodoManager, who: int) -> None:
        start.wait()
        for n in range(25):
            manager.write("add", task=f"{who}-{n}")

    threads = [threading.Thread(target=add, args=(m, i)) for i, m in enumerate(managers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    saved = json.loads((workspace / ".toold" / "todos.json").read_text(encoding="utf-8"))
    assert sorted(item["task"] for item in saved["items"]) == sorted(
        f"{who}-{n}" for who in range(4) for n in range(25)
    )
    assert [item["id"] for item in saved["items"]] == [f"t{i}" for i in range(1, 101)]
    assert saved["next"] == 101
