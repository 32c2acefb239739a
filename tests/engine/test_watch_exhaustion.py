"""An engine keeps its promises, and says so, when this user's inotify instances are gone.

A helper process holds every inotify instance the user has left (``inotify_init1``
until EMFILE; fs.inotify.max_user_instances is per user, 128 by default) while a new
engine starts, then lets them go (always, in a finally: other programs of this user
share the limit). That engine polls: it still announces an outside ``.tasks.json``
edit, hands a teammate's reply to ``team_send``, and warns each session once. The
teammate is a second process playing a teammate running in another daemon: it holds
the teammate's run lock and answers through the mailboxes, as toold's own would.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

from tests.engine.support import Engines
from tests.engine.watch_support import (
    announced,
    edit_outside,
    inotify_instances,
    received,
    tasks_file,
    watching_warnings,
)
from toold.team.registry import TeamRegistry

HOLDER = textwrap.dedent(
    """
    import ctypes, os, select, sys
    libc = ctypes.CDLL(None, use_errno=True)
    held = []
    try:
        # Until the test lets go (stdin closes), take every instance freed meanwhile too:
        # other programs of this user start and stop (other tests' engines, an editor).
        told = False
        while not select.select([sys.stdin], [], [], 0 if not told else 0.002)[0]:
            fd = libc.inotify_init1(os.O_CLOEXEC)
            if fd >= 0:
                held.append(fd)
            elif not told:
                print(len(held), ctypes.get_errno(), flush=True)
                told = True
    finally:
        for fd in held:
            os.close(fd)
    """
)

TEAMMATE = textwrap.dedent(
    """
    import fcntl, os, sys, time
    from pathlib import Path
    from toold.team.mailbox import Mailboxes, new_message

    state = Path(sys.argv[1])
    (state / "team").mkdir(parents=True, exist_ok=True)
    lock = os.open(state / "team" / "alice.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    boxes = Mailboxes(state / "mailboxes")
    offset = boxes.size("alice")
    print("running", flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # this stand-in polls its own mailbox
        messages, offset = boxes.read_from("alice", offset)
        for message in messages:
            if message.get("type") == "request":
                reply = "pong: " + message["content"]
                boxes.append(new_message("alice", "main", reply, "response", message["id"]))
                sys.exit(0)
        time.sleep(0.02)
    sys.exit(1)
    """
)


@contextlib.contextmanager
def instances_held() -> Iterator[int]:
    """Hold every inotify instance this user has left; yields how many were taken."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        taken, code = holder.stdout.readline().split()
        assert int(code) == 24, f"inotify_init1 stopped with errno {code}, not EMFILE"
        yield int(taken)
    finally:
        holder.stdin.close()
        try:
            holder.wait(timeout=10)
        finally:
            holder.kill()
            holder.stdout.close()


@contextlib.contextmanager
def teammate(workspace: Path) -> Iterator[subprocess.Popen[str]]:
    """Teammate alice, registered and running in a process of its own."""
    state = workspace / ".toold"
    TeamRegistry(workspace / ".team.json", state / "team" / "registry.lock").register(
        "alice", "echo", "", None
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", TEAMMATE, os.fspath(state)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "running"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()


def test_exhausted_instances_poll_and_warn_each_session_once(
    engines: Engines, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    tasks_file(workspace).create("mine")
    with instances_held() as taken:
        print(f"held {taken} inotify instances (the rest of this user's)")
        first = engines.editor(workspace)  # the engine starts without an instance left
        shown = first.next_message(lambda m: bool(watching_warnings([m])), timeout=20)
    warning = shown["params"]["message"]
    assert "fs.inotify.max_user_instances" in warning and "sudo sysctl" in warning, warning
    status = engines.status(workspace)
    assert inotify_instances(status["pid"]) == 0  # polling, even with instances free again

    started = time.monotonic()
    edit_outside(workspace, "mine", "theirs")
    announced(first, "theirs")
    print(f"tasks/changed while polling: {(time.monotonic() - started) * 1000:.0f} ms")

    with teammate(workspace) as alice:
        started = time.monotonic()
        sent = first.tool("team_send", to_agent="alice", content="ping")
        print(f"team_send's reply while polling: {(time.monotonic() - started) * 1000:.0f} ms")
        assert sent == {"content": "Reply from alice: pong: ping", "isError": False}
        assert alice.wait(timeout=10) == 0

    second = engines.editor(workspace)  # attaching later: told too
    assert watching_warnings(received(second)) == [warning]
    assert watching_warnings(received(first)) == []  # told once, not per watch or sweep


def test_an_engine_holds_one_inotify_instance(engines: Engines, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    tasks_file(workspace).create("mine")
    editor = engines.editor(workspace)
    with teammate(workspace):  # the team's mailbox watch joins the root's and the skills'
        sent = editor.tool("team_send", to_agent="alice", content="ping")
    assert sent["content"] == "Reply from alice: pong: ping"
    edit_outside(workspace, "mine", "theirs")
    announced(editor, "theirs")
    pid = engines.status(workspace)["pid"]
    assert inotify_instances(pid) == 1
    assert watching_warnings(received(editor)) == []
    print(json.dumps({"engine inotify instances": inotify_instances(pid)}))
