"""The idle ``toold serve`` relay is a bare waiter: what it keeps, and the status it ends with.

Its memory is measured by tests/bench/memory.py; here, what the exec must not change:
the editor's pid and exit status, the engine serving the pipes, and nothing of the
editor's (pipes, environment) open in a dumpable process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.support import Engines
from tests.waiting import wait_until
from toold.engine.__main__ import parse
from toold.engine.relay import WAITER


def _waiter(sent: bytes, already_read: bytes = b"") -> subprocess.CompletedProcess[str]:
    """Run WAITER on one end of a socket pair after ``sent`` was written to the other."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(sent)
        ours.shutdown(socket.SHUT_WR)
        argv = [sys.executable, "-I", "-S", "-c", WAITER, str(theirs.fileno())]
        return subprocess.run(
            [*argv, already_read.hex(), "toold: no status"],
            pass_fds=[theirs.fileno()],
            capture_output=True,
            text=True,
            timeout=30,
        )


@pytest.mark.parametrize(
    ("sent", "already_read", "status"),
    [
        (b'{"exit": 0}\n', b"", 0),
        (b"", b'{"exit": 3}\n', 3),  # the line the relay's reader had taken already
        (b" 5}\nmore", b'{"exit":', 5),
        (b'{"exit":7}\n', b"", 7),  # another spelling: parsed as JSON
        (b'{"exit": -2}\n', b"", 254),
    ],
)
def test_the_waiter_ends_with_the_sessions_status(
    sent: bytes, already_read: bytes, status: int
) -> None:
    done = _waiter(sent, already_read)
    assert (done.returncode, done.stderr) == (status, "")


@pytest.mark.parametrize("sent", [b"", b"garbage\n", b'{"exit": "0"}\n', b'{"exit": 1'])
def test_a_session_ended_without_a_status_is_reported(sent: bytes) -> None:
    done = _waiter(sent)
    assert (done.returncode, done.stderr) == (1, "toold: no status\n")


def _link(pid: int, fd: int) -> str:
    return os.readlink(f"/proc/{pid}/fd/{fd}")


def test_an_idle_relay_holds_nothing_of_the_editors(engines: Engines, workspace: Path) -> None:
    editor = engines.editor(workspace)
    pid = editor.proc.pid
    wait_until(lambda: b"-S" in Path(f"/proc/{pid}/cmdline").read_bytes(), "the relay's exec")
    assert Path(f"/proc/{pid}/environ").read_bytes() == b""  # root reads it: nothing there
    assert _link(pid, 0) == _link(pid, 1) == os.devnull
    # Same pid, the engine still serves the editor's pipes, and the status is the session's.
    assert editor.tool("read_file", file_path="src/main.py")["content"] == "1: print('needle')"
    assert editor.close() == 0


def test_the_engines_options_are_checked_naming_the_flag() -> None:
    assert parse(["--workspace", "/w", "--ready-fd=3", "--env-fd", "4"]) == (Path("/w"), 3, 4)
    assert parse(["--workspace=/w"]) == (Path("/w"), None, None)
    for argv, named in [
        ([], "--workspace is required"),
        (["--workspace"], "--workspace needs a value"),
        (["--workspace", "/w", "--ready-fd", "x"], "--ready-fd needs a descriptor number"),
        (["--workspace", "/w", "--verbose"], "unknown argument '--verbose'"),
    ]:
        with pytest.raises(SystemExit, match=named):
            parse(argv)
