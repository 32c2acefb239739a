"""What the engine tests of the watchers share: the tasks file edited from outside, the
announcements and warnings a session receives, and inotify instances counted."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from tests.e2e.wire import WireClient
from toold.planning.tasks import TASKS_FILE, TaskManager

WARNING = 2  # window/showMessage's MessageType.Warning
ANNOUNCED_S = 5.0
"""How soon an outside edit must be announced, also while polling ("within a few seconds")."""


def watching_warnings(messages: list[dict[str, Any]]) -> list[str]:
    """The inotify warnings among ``messages``."""
    return [
        m["params"]["message"]
        for m in messages
        if m.get("method") == "window/showMessage"
        and m["params"]["type"] == WARNING
        and "inotify" in m["params"]["message"]
    ]


def received(editor: WireClient) -> list[dict[str, Any]]:
    """Every message the editor has received so far and not consumed."""
    editor.tool("task_list")  # a round trip: what was sent before it has arrived
    while not editor.messages.empty():
        message = editor.messages.get_nowait()
        if message is not None:
            editor._pending.append(message)
    return list(editor._pending)


def tasks_file(workspace: Path) -> TaskManager:
    state = workspace / ".toold"
    state.mkdir(exist_ok=True)
    return TaskManager(
        workspace / TASKS_FILE,
        lock_path=state / "tasks.lock",
        backup_path=state / "tasks.json.bak",
    )


def edit_outside(workspace: Path, old: str, new: str) -> None:
    path = workspace / TASKS_FILE
    path.write_text(path.read_text().replace(f'"{old}"', f'"{new}"'))


def announced(editor: WireClient, title: str) -> None:
    """Wait for the tasks/changed naming ``title``."""
    editor.next_message(
        lambda m: (
            m.get("method") == "tasks/changed"
            and [t["title"] for t in m["params"]["tasks"]] == [title]
        ),
        timeout=ANNOUNCED_S,
    )


def inotify_instances(pid: int) -> int:
    """inotify instances held by process ``pid``."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd) == "anon_inode:inotify"
    return count
