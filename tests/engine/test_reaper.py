"""The engine is a subreaper: it inherits the orphans of its tool calls and must wait for
them, without taking the exit statuses its own waiters (asyncio's watcher) need."""

from __future__ import annotations

import os
from pathlib import Path

from tests.engine.support import Engines
from tests.waiting import wait_until

ORPHANS = 5


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rpartition(b")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_orphans_are_reaped_and_exit_statuses_are_kept(engines: Engines, workspace: Path) -> None:
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "local"\n')
    editor = engines.editor(workspace)
    engine = engines.status(workspace)["pid"]
    spawn = "; ".join(
        f"setsid -f sh -c 'echo $$ > orphan{n}.pid; read _ < go'" for n in range(ORPHANS)
    )
    # The call waits until each has left its process group (the call's end kills it).
    spawn += (
        f"; until [ $(cat orphan*.pid 2>/dev/null | wc -l) -ge {ORPHANS} ]; do sleep 0.02; done"
    )
    os.mkfifo(workspace / "go")
    assert editor.tool("bash", command=spawn)["exitCode"] == 0
    files = [workspace / f"orphan{n}.pid" for n in range(ORPHANS)]
    wait_until(lambda: all(f.exists() and f.read_text().strip() for f in files), "the orphans")
    orphans = [int(f.read_text()) for f in files]
    wait_until(lambda: all(_parent(pid) == engine for pid in orphans), "their reparenting")
    with open(workspace / "go", "w") as go:  # release them all at once: they exit
        go.write("x\n" * ORPHANS)
    for code in range(1, 8):  # the engine's own children keep their statuses meanwhile
        assert editor.tool("bash", command=f"exit {code}")["exitCode"] == code
    wait_until(
        lambda: not any(os.path.exists(f"/proc/{pid}") for pid in orphans),
        "the engine to reap its orphans",
        timeout=30,
    )
