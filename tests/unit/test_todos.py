"""todo_write / todo_read: BareAgent's exact texts and errors, the snapshot, notifications."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toold.planning.todos import TodoManager
from toold_protocol import METHODS, names

from .conftest import Call, ToolsWith


@pytest.fixture
def changes() -> list[list[dict[str, Any]]]:
    return []


@pytest.fixture
def todos(workspace: Path, changes: list[list[dict[str, Any]]]) -> TodoManager:
    def on_change(items: list[dict[str, Any]]) -> None:
        # What the server would push: it must fit the wire model.
        METHODS[names.TODOS_CHANGED].params.model_validate({"todos": items})
        changes.append(items)

    return TodoManager(workspace / ".toold" / "todos.json", on_change=on_change)


@pytest.fixture
def todo(tools_with: ToolsWith, todos: TodoManager) -> Call:
    """Call the todo tools bound to ``todos``, as the daemon does."""
    return tools_with(todos=todos)


def test_add_update_read_exact_texts(todo: Call) -> None:
    assert todo("todo_read") == "No TODO items."
    assert todo("todo_write", action="add", task="Create planner") == (
        "Added TODO t1 [normal]: Create planner"
    )
    assert todo("todo_write", action="add", task="  Ship it  ", priority="high") == (
        "Added TODO t2 [high]: Ship it"
    )
    assert todo("todo_write", action="update", task_id="t1", status="in_progress") == (
        "Updated TODO t1 -> in_progress"
    )
    assert todo("todo_read") == (
        "TODO items:\n- t1 [in_progress] (normal) Create planner\n- t2 [pending] (high) Ship it"
    )
    for status in ("done", "pending", "in_progress"):
        assert todo("todo_write", action="update", task_id="t2", status=status) == (
            f"Updated TODO t2 -> {status}"
        )


def test_blank_priority_is_normal(todo: Call) -> None:
    assert todo("todo_write", action="add", task="x", priority="  ") == "Added TODO t1 [normal]: x"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"action": "add"}, "task is required when action=add"),
        ({"action": "add", "task": "   "}, "task must not be empty"),
        ({"action": "update", "status": "done"}, "task_id is required when action=update"),
        ({"action": "update", "task_id": "t1"}, "status is required when action=update"),
        ({"action": "update", "task_id": "t9", "status": "done"}, "Unknown TODO id: t9"),
        (
            {"action": "update", "task_id": "t1", "status": "blocked"},
            "Invalid TODO status: blocked. Expected one of: done, in_progress, pending",
        ),
    ],
)
def test_errors_change_nothing(
    todo: Call,
    todos: TodoManager,
    changes: list[Any],
    args: dict[str, Any],
    message: str,
) -> None:
    todo("todo_write", action="add", task="first")
    snapshot = todos.snapshot.read_bytes() if todos.snapshot else b""
    with todo.fails(ValueError) as caught:
        todo("todo_write", **args)
    assert str(caught.value) == message
    assert len(changes) == 1
    assert todos.snapshot is not None and todos.snapshot.read_bytes() == snapshot
    assert todo("todo_read") == "TODO items:\n- t1 [pending] (normal) first"


def test_unknown_action_text(todos: TodoManager) -> None:
    # The tool's schema already refuses other actions; the manager keeps BareAgent's text.
    with pytest.raises(ValueError, match=r"^Unknown todo_write action: remove$"):
        todos.write("remove")


def test_unknown_action_through_the_tool_is_an_argument_error(todo: Call) -> None:
    with todo.fails(ValueError, match="action"):
        todo("todo_write", action="remove", task="x")


def test_every_change_is_announced(todo: Call, changes: list[list[dict[str, Any]]]) -> None:
    todo("todo_write", action="add", task="a")
    todo("todo_write", action="update", task_id="t1", status="done")
    assert changes == [
        [{"id": "t1", "task": "a", "status": "pending", "priority": "normal"}],
        [{"id": "t1", "task": "a", "status": "done", "priority": "normal"}],
    ]


def test_snapshot_survives_a_new_manager(workspace: Path, todo: Call) -> None:
    todo("todo_write", action="add", task="a")
    todo("todo_write", action="add", task="b", priority="low")
    todo("todo_write", action="update", task_id="t2", status="done")
    again = TodoManager(workspace / ".toold" / "todos.json")
    assert again.read() == "TODO items:\n- t1 [pending] (normal) a\n- t2 [done] (low) b"
    assert again.write("add", task="c") == "Added TODO t3 [normal]: c"


def test_unreadable_snapshot_starts_empty(workspace: Path) -> None:
    path = workspace / ".toold" / "todos.json"
    path.parent.mkdir()
    path.write_text("{broken", encoding="utf-8")
    assert TodoManager(path).read() == "No TODO items."


def test_failed_snapshot_write_leaves_the_list_unchanged(
    workspace: Path, changes: list[Any]
) -> None:
    # .toold is a file, so the snapshot cannot be written: a real I/O failure.
    (workspace / ".toold").write_text("not a folder", encoding="utf-8")
    todos = TodoManager(workspace / ".toold" / "todos.json", on_change=changes.append)
    with pytest.raises(OSError):
        todos.write("add", task="lost")
    assert todos.read() == "No TODO items."
    assert changes == []
    (workspace / ".toold").unlink()
    assert todos.write("add", task="kept") == "Added TODO t1 [normal]: kept"
    saved = json.loads((workspace / ".toold" / "todos.json").read_text(encoding="utf-8"))
    assert saved["items"] == [
        {"id": "t1", "task": "kept", "status": "pending", "priority": "normal"}
    ]


def test_unbound_tools_say_unavailable(call: Call) -> None:
    assert call.failed("todo_read") == "TODO manager unavailable."
