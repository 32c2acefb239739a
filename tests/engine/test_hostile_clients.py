"""Clients on the engine's socket that do not play by the rules: silent, slow, sending
descriptors they should not. The engine keeps serving everyone else and leaks nothing."""

from __future__ import annotations

import array
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.support import Engines
from tests.waiting import wait_until
from toold.engine.peers import HELLO_TIMEOUT


def _socket(engines: Engines) -> str:
    (path,) = [p for p in engines.runtime.iterdir() if p.suffix == ".sock"]
    return os.fspath(path)


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _still_waiting(peer: socket.socket) -> bool:
    """The engine has neither answered nor hung up on ``peer``."""
    try:
        peer.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK)
    except BlockingIOError:
        return True
    return False


@pytest.fixture
def engine(engines: Engines, workspace: Path) -> Iterator[int]:
    """A running engine's pid, its workspace bound (its descriptors opened)."""
    assert engines.toold("call", "todo_read", cwd=workspace).returncode == 0
    yield engines.status(workspace)["pid"]


def test_connections_that_never_speak_stall_no_one_and_leak_nothing(
    engines: Engines, workspace: Path, engine: int
) -> None:
    before = _open_fds(engine)
    silent = []
    for _ in range(40):
        peer = socket.socket(socket.AF_UNIX)
        peer.connect(_socket(engines))
        silent.append(peer)
    # Served while every silent one still waits for its hello to time out.
    status = engines.toold("daemon", "status", cwd=workspace, timeout=HELLO_TIMEOUT * 3)
    assert status.returncode == 0, status.stderr
    assert all(_still_waiting(peer) for peer in silent)
    for peer in silent:
        peer.close()
    wait_until(lambda: _open_fds(engine) <= before, lambda: f"{_open_fds(engine)} > {before}")


def _send_with_fds(peer: socket.socket, data: bytes, fds: list[int]) -> None:
    rights = array.array("i", fds).tobytes()
    peer.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])


def test_descriptors_sent_with_a_hello_that_never_ends_are_closed(
    engines: Engines, workspace: Path, engine: int
) -> None:
    read_end, write_end = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX) as peer:
            peer.connect(_socket(engines))
            _send_with_fds(peer, b'{"toold": 3, "kind": "stdio"', [write_end, write_end])
            # The engine gives up on the hello; it must not keep the pipe's write end.
            wait_until(lambda: not _still_waiting(peer), "the engine to hang up", HELLO_TIMEOUT * 3)
        os.close(write_end)
        write_end = -1
        os.set_blocking(read_end, False)
        assert wait_until(lambda: _eof(read_end), "the engine to close the sent descriptors")
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    assert engines.toold("daemon", "status", cwd=workspace).returncode == 0


def _eof(fd: int) -> bool:
    try:
        return os.read(fd, 1) == b""
    except BlockingIOError:
        return False


def test_a_stdio_session_over_a_folder_is_refused(
    engines: Engines, workspace: Path, engine: int
) -> None:
    fd = os.open(workspace, os.O_RDONLY)
    try:
        with socket.socket(socket.AF_UNIX) as peer:
            peer.connect(_socket(engines))
            hello = {"toold": 3, "kind": "stdio", "preface": ""}
            _send_with_fds(peer, json.dumps(hello).encode() + b"\n", [fd, fd])
            reply = json.loads(peer.makefile("rb").readline())
    finally:
        os.close(fd)
    assert reply["ok"] is False and "stdin" in reply["error"], reply
    assert engines.toold("daemon", "status", cwd=workspace).returncode == 0


def test_too_many_descriptors_are_refused_and_closed(
    engines: Engines, workspace: Path, engine: int
) -> None:
    before = _open_fds(engine)
    read_end, write_end = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX) as peer:
            peer.connect(_socket(engines))
            _send_with_fds(peer, b'{"toold": 3, ', [read_end, write_end])
            _send_with_fds(peer, b'"kind": "session"}\n', [read_end, write_end])
            reply = json.loads(peer.makefile("rb").readline())
    finally:
        os.close(read_end)
        os.close(write_end)
    assert reply["ok"] is False and "descriptors" in reply["error"], reply
    wait_until(lambda: _open_fds(engine) <= before, lambda: f"{_open_fds(engine)} > {before}")


def test_a_stdio_hello_with_a_broken_preface_leaves_no_session_behind(
    engines: Engines, workspace: Path, engine: int
) -> None:
    before = _open_fds(engine)
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX) as peer:
            peer.connect(_socket(engines))
            hello = {"toold": 3, "kind": "stdio", "preface": "not base64!"}
            _send_with_fds(peer, json.dumps(hello).encode() + b"\n", [stdin_r, stdout_w])
            reply = json.loads(peer.makefile("rb").readline())
    finally:
        for fd in (stdin_r, stdin_w, stdout_r, stdout_w):
            os.close(fd)
    assert reply["ok"] is False and "preface" in reply["error"], reply
    assert engines.status(workspace)["sessions"] == []
    wait_until(lambda: _open_fds(engine) <= before, lambda: f"{_open_fds(engine)} > {before}")


def test_clients_that_hang_up_right_after_hello_leave_no_session(
    engines: Engines, workspace: Path, engine: int
) -> None:
    """The engine's answer to such a hello fails (EPIPE): the session it had opened must
    end with it, or the engine counts it as attached forever and never idles out."""
    for _ in range(20):
        with socket.socket(socket.AF_UNIX) as peer:
            peer.connect(_socket(engines))
            peer.sendall(b'{"toold": 3, "kind": "session"}\n')
    wait_until(
        lambda: engines.status(workspace)["sessions"] == [],
        lambda: f"sessions left: {engines.status(workspace)['sessions']}",
    )


def _rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) // 1024


def test_what_a_relay_sends_after_its_hello_is_not_kept(
    engines: Engines, workspace: Path, engine: int
) -> None:
    """A stdio session's connection only says when the relay dies: bytes sent on it are
    read and dropped, not held (512 MB sent; the engine grows by far less)."""
    before = _rss_mb(engine)
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX) as peer:
            peer.connect(_socket(engines))
            hello = {"toold": 3, "kind": "stdio", "preface": ""}
            _send_with_fds(peer, json.dumps(hello).encode() + b"\n", [stdin_r, stdout_w])
            assert json.loads(peer.makefile("rb").readline())["ok"] is True
            chunk = b"x" * (1 << 20)
            for _ in range(512):
                peer.sendall(chunk)
            grown = _rss_mb(engine) - before
    finally:
        for fd in (stdin_r, stdin_w, stdout_r, stdout_w):
            os.close(fd)
    assert grown < 256, f"the engine grew by {grown} MB"
