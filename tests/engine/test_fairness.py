"""One session misbehaves; another session of the same engine stays fast.

Each case starts the abuse in session A (an editor through ``toold serve``), waits until
the engine has it in hand, and then times session B's ``read_file``: it must answer
within a generous second (the issue's bound), where before it waited a minute or failed.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import time
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient
from tests.engine.support import Engines, local_runner
from tests.waiting import wait_until
from toold.engine.peers import HELLO_LIMIT, UNGREETED_LIMIT
from toold.fairness import CALL_SHARE

FAST_S = 2.0
"""The bound on the other session's read_file while one misbehaves: the issue's 1 s with
room for a loaded CI machine (typically 0.02-0.35 s here; 15-68 s before the fix)."""


def _quick_read(editor: WireClient) -> float:
    """Seconds session ``editor`` takes to read a small file (asserting what it read)."""
    started = time.monotonic()
    result = editor.tool("read_file", file_path="src/main.py")
    elapsed = time.monotonic() - started
    assert result["content"] == "1: print('needle')", result
    print(f"the other session's read_file took {elapsed * 1000:.0f} ms")
    return elapsed


def _events(workspace: Path) -> dict[str, object]:
    return {"initializationOptions": {"executionEvents": True}}


def _started(editor: WireClient, count: int, tool: str) -> None:
    """Wait for ``count`` execution.started events of ``tool`` (the calls are in hand)."""
    for _ in range(count):
        editor.next_message(
            lambda m: (
                m.get("method") == "execution/event"
                and m["params"].get("event") == "execution.started"
                and m["params"].get("tool") == tool
            ),
            timeout=30,
        )


@pytest.mark.parametrize(("runner", "calls"), [("local", 12), ("auto", 40)])
def test_slow_greps_of_one_session_leave_room_for_another(
    engines: Engines, workspace: Path, runner: str, calls: int
) -> None:
    """Twelve greps whose pattern backtracks for its whole 30 s budget used to hold every
    thread of the engine's pool (the local runner): another session's call waited behind
    them for a minute. Each session now holds at most its share of the threads, and of
    the runner's worker processes (forty such greps under the default runner)."""
    # read_file takes a thread too when files this large are allowed (small ones are
    # read on the loop).
    (workspace / "toold.toml").write_text(
        f'[execution]\ntool_runner = "{runner}"\n[limits]\nmax_file_size = 16777216\n'
    )
    (workspace / "slow.txt").write_text(("a" * 40 + "b\n") * 3)
    abuser = engines.editor(workspace, **_events(workspace))
    other = engines.editor(workspace)
    _quick_read(other)  # bound and warm: what follows measures waiting, not start-up
    for _ in range(calls):
        abuser.request(
            "tools/call",
            {"name": "grep", "arguments": {"pattern": "(a|aa)+$"}, "origin": "user"},
        )
    _started(abuser, min(calls, CALL_SHARE), "grep")  # the rest wait for the session's share
    assert _quick_read(other) < FAST_S
    started = time.monotonic()
    found = other.tool("grep", pattern="needle", path="src")
    assert "needle" in json.dumps(found) and time.monotonic() - started < FAST_S
    assert _quick_read(other) < FAST_S  # again: not a lucky free thread
    abuser.proc.kill()  # its calls are cancelled; no 30 s shutdown grace for them


def _background(editor: WireClient, n: int) -> list[str]:
    """``n`` background_run calls of ``sleep 90`` sent at once; their results' texts."""
    arguments = {"command": "sleep 90", "timeout": 120}
    ids = [
        editor.request(
            "tools/call", {"name": "background_run", "arguments": arguments, "origin": "user"}
        )
        for _ in range(n)
    ]
    return [json.dumps(editor.response(msg_id, timeout=60)["result"]) for msg_id in ids]


def test_running_jobs_are_capped_per_session_and_per_workspace(
    engines: Engines, workspace: Path
) -> None:
    """Four hundred unasked ``sleep 90`` jobs took the engine's descriptors (another
    session's bash failed with EMFILE). Jobs are capped: per session (16 by default) and
    per workspace (24 here), refused beyond with the key to raise."""
    (workspace / "toold.toml").write_text(
        '[execution]\ntool_runner = "local"\n[limits]\nmax_running_jobs = 24\n'
    )
    abuser = engines.editor(workspace)
    second = engines.editor(workspace)
    other = engines.editor(workspace)
    answers = _background(abuser, 30)
    assert sum("Submitted background task" in a for a in answers) == 16
    refused = [a for a in answers if "Submitted" not in a]
    assert len(refused) == 14
    assert all("limits.max_running_jobs_per_session (16)" in a for a in refused), refused[0]
    answers = _background(second, 10)
    assert sum("Submitted background task" in a for a in answers) == 8
    assert "limits.max_running_jobs (24)" in answers[-1], answers[-1]
    pid = engines.status(workspace)["pid"]
    print(f"engine descriptors with 24 jobs running: {len(os.listdir(f'/proc/{pid}/fd'))}")
    assert _quick_read(other) < FAST_S
    started = time.monotonic()
    ran = other.tool("bash", command="echo still here")
    assert "still here" in json.dumps(ran) and time.monotonic() - started < FAST_S * 5


def test_four_hundred_jobs_leave_descriptors_for_another_session(
    engines: Engines, workspace: Path
) -> None:
    """The issue's case: 400 unasked ``sleep 90`` jobs under the stock limit of 1,024
    descriptors (set on the engine here), from four sessions. 64 run (the workspace's
    cap); another session's read_file and bash still work."""
    local_runner(workspace)
    other = engines.editor(workspace)
    pid = engines.status(workspace)["pid"]
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (1024, 1024))
    abusers = [engines.editor(workspace) for _ in range(4)]
    submitted = sum(
        "Submitted background task" in answer
        for abuser in abusers
        for answer in _background(abuser, 100)
    )
    assert submitted == 64
    print(f"engine descriptors with 64 jobs running: {_open_fds(pid)} of 1024")
    assert _quick_read(other) < FAST_S
    ran = other.tool("bash", command="echo still here")
    assert "still here" in json.dumps(ran), ran


def _socket(engines: Engines) -> str:
    (path,) = [p for p in engines.runtime.iterdir() if p.suffix == ".sock"]
    return os.fspath(path)


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _hung_up(peer: socket.socket) -> bool:
    """The engine closed ``peer`` (it reads end of file, or a reset)."""
    try:
        return peer.recv(1 << 16, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_silent_connections_cannot_lock_clients_out(engines: Engines, workspace: Path) -> None:
    """1,023 connections that never said hello took every descriptor of the engine, and
    new clients failed. At most UNGREETED_LIMIT wait for their hello now; beyond it the
    oldest is closed, so a new client (and an attached session) is still served."""
    other = engines.editor(workspace)
    _quick_read(other)
    pid = engines.status(workspace)["pid"]
    before = _open_fds(pid)
    silent = []
    try:
        for _ in range(UNGREETED_LIMIT * 5):
            peer = socket.socket(socket.AF_UNIX)
            peer.connect(_socket(engines))
            silent.append(peer)
        wait_until(
            lambda: sum(map(_hung_up, silent)) >= len(silent) - UNGREETED_LIMIT,
            "the engine to close the oldest silent connections",
        )
        held = _open_fds(pid) - before
        print(f"{len(silent)} silent connections hold {held} descriptors of the engine")
        assert held <= UNGREETED_LIMIT + 8
        assert _quick_read(other) < FAST_S
        done = engines.toold("call", "read_file", '{"file_path": "src/main.py"}', cwd=workspace)
        assert done.returncode == 0 and "needle" in done.stdout, done.stderr
    finally:
        for peer in silent:
            peer.close()


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1])


def test_a_hello_past_its_limit_is_refused_unread(engines: Engines, workspace: Path) -> None:
    """Four 96 MiB hellos once added 361 MiB to the engine. A hello is a few hundred bytes:
    past HELLO_LIMIT the engine answers with the limit and hangs up, keeping none of it."""
    other = engines.editor(workspace)
    _quick_read(other)
    pid = engines.status(workspace)["pid"]
    before = _rss_kib(pid)
    peers = []
    try:
        for _ in range(4):
            peer = socket.socket(socket.AF_UNIX)
            peer.connect(_socket(engines))
            peer.sendall(b'{"toold": 3, "kind": "session", "pad": "' + b"x" * (HELLO_LIMIT * 4))
            peers.append(peer)
        for peer in peers:
            reply = json.loads(peer.makefile("rb").readline())
            assert reply["ok"] is False and f"at most {HELLO_LIMIT} bytes" in reply["error"]
        assert _quick_read(other) < FAST_S
    finally:
        for peer in peers:
            peer.close()
    grown = _rss_kib(pid) - before
    print(f"the engine grew by {grown} KiB after four oversized hellos")
    assert grown < 16 * 1024


def test_a_large_initialize_still_reaches_the_engine(engines: Engines, workspace: Path) -> None:
    """What ``toold serve`` read to find the workspace (here a 2 MiB initialize) is sent
    after the engine's answer, not in the bounded hello."""
    editor = WireClient(None, env=engines.env)  # the workspace comes from initialize
    engines.editors.append(editor)
    result = editor.initialize(
        workspaceFolders=[{"uri": workspace.as_uri(), "name": "ws"}],
        capabilities={"experimental": {"pad": "x" * (2 << 20)}},
    )
    assert result["capabilities"]["experimental"]["toold"]["workspace"] == str(workspace)
    assert _quick_read(editor) < FAST_S
