"""The bwrap runner through the real daemon and a real bubblewrap."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from tests.processes import processes_matching
from tests.sandbox.conftest import (
    Daemon,
    progress_until,
    start_call,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.usefixtures("bwrap_ready")


def test_writes_reach_the_workspace_and_nothing_else(daemon: Daemon, tmp_path: Path) -> None:
    client = daemon("bwrap", events=True)
    wrote = client.tool("write_file", file_path="out/new.txt", content="hello")
    assert wrote["isError"] is False
    assert (client_ws := tmp_path / "ws" / "out" / "new.txt").read_text() == "hello"
    assert client.tool("read_file", file_path="out/new.txt")["content"] == "1: hello"
    assert client.notification("execution/event")["params"]["runner"] == "bwrap"

    outside = tmp_path / "outside.txt"
    probe = f"/etc/toold-bwrap-probe-{os.getpid()}"
    result = client.tool(
        "bash",
        command=f"echo in > shell.txt; echo etc > {probe}; echo tmp > {outside}; cat {outside}",
    )
    assert "Read-only file system" in result["content"]
    assert (client_ws.parent.parent / "shell.txt").read_text() == "in\n"
    assert not os.path.exists(probe)
    # /tmp is the sandbox's own: the write worked there and never reached the host.
    assert "tmp" in result["content"].splitlines()
    assert not outside.exists()


def test_the_network_is_unshared_unless_allowed(daemon: Daemon, tcp_server: socket.socket) -> None:
    port = tcp_server.getsockname()[1]
    connect = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    offline = daemon("bwrap")
    result = offline.tool("bash", command=connect)
    assert "connected" not in result["content"]
    assert "Connection refused" in result["content"]
    online = daemon("bwrap", network=True)
    assert "connected" in online.tool("bash", command=connect)["content"].splitlines()


def test_the_sandbox_has_its_own_pid_namespace(daemon: Daemon) -> None:
    client = daemon("bwrap")
    result = client.tool(
        "bash",
        command="echo ns=$(readlink /proc/self/ns/pid); echo init=$(tr '\\0' ' ' </proc/1/cmdline)",
    )
    lines = dict(line.split("=", 1) for line in result["content"].splitlines() if "=" in line)
    assert lines["ns"].startswith("pid:[")
    assert lines["ns"] != os.readlink("/proc/self/ns/pid")
    with open("/proc/1/cmdline", "rb") as f:
        assert lines["init"].strip() != f.read().replace(b"\0", b" ").decode().strip()


def test_cancel_kills_what_the_call_started(daemon: Daemon) -> None:
    client = daemon("bwrap")
    marker = f"{os.getpid() % 1000}.{os.getpid() // 1000 % 1000}"
    msg_id = start_call(
        client, "bash", "cancel-me", command=f"sleep 3{marker} & echo started; sleep 3{marker}"
    )
    progress_until(client, "started")
    assert processes_matching(f"sleep 3{marker}")
    client.notify("$/cancelRequest", {"id": msg_id})
    assert client.response(msg_id)["error"]["code"] == -32800
    wait_until(lambda: not processes_matching(f"sleep 3{marker}"), "the call's processes to exit")


def test_nothing_a_call_started_outlives_it(daemon: Daemon) -> None:
    client = daemon("bwrap")
    marker = f"sleep 2{os.getpid() % 1000}.{os.getpid() // 1000 % 1000}"
    client.tool("bash", command=f"setsid {marker} >/dev/null 2>&1 & echo started")
    wait_until(lambda: not processes_matching(marker), "the daemonised process to exit")


def test_a_fork_bomb_stops_at_the_pids_limit_and_leaves_nothing(daemon: Daemon) -> None:
    client = daemon("bwrap", pids_limit=64)
    name = f"bomb{os.getpid()}"
    command = f"{name}() {{ {name} | {name} & }}; {name}; sleep 1; echo survived"
    counts: list[int] = []
    done = threading.Event()

    def sample() -> None:  # the bomb's processes, as the host sees them
        while not done.is_set():
            counts.append(len(processes_matching(name)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    msg_id = start_call(client, "bash", "bomb", command=command, timeout=4)
    try:
        wait_until(lambda: max(counts, default=0) >= 32, "the bomb to spread to 32 processes")
        # The daemon answers other calls while the bomb runs.
        assert client.tool("read_file", file_path="toold.toml")["isError"] is False
        result = client.response(msg_id)["result"]
    finally:
        done.set()
        sampler.join()
    assert max(counts) <= 64, f"{max(counts)} bomb processes: the pids limit did not hold"
    assert "Resource temporarily unavailable" in result["content"] or result["isError"], result
    wait_until(lambda: not processes_matching(name), "the bomb's processes to exit")


def test_the_view_binds_chosen_paths_only(tmp_path: Path) -> None:
    import sys

    from toold.sandbox.bwrap import sandbox_etc, view_argv
    from toold.sandbox.toolchains import SECRET_NAMES, toolchain_paths

    workspace = tmp_path / "ws"
    workspace.mkdir()
    argv = view_argv(workspace, sandbox_etc(tmp_path / "etc"))
    binds = ("--ro-bind", "--bind", "--ro-bind-try")
    sources = [argv[i + 1] for i, arg in enumerate(argv) if arg in binds]
    assert "/" not in sources and "/etc" not in sources
    never = ["/run", "/var", "/home", "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh"]
    never += ["/etc/ssl/private", "/proc", "/sys"]
    for source in sources:
        assert not any(source == n or source.startswith(n + "/") for n in never), source
        if source.startswith(("/root", "/home")):  # the Python runtime and the toolchains
            assert source.startswith((sys.prefix, sys.base_prefix, *toolchain_paths())), source
            assert not any(f"/{name}" in source for name in SECRET_NAMES), source
    assert argv[argv.index("--bind") + 1 : argv.index("--bind") + 3] == [str(workspace)] * 2
    assert argv[argv.index("--remount-ro") + 1] == "/"


def test_files_the_daemon_owns_stay_usable_inside(daemon: Daemon, workspace: Path) -> None:
    """The sandbox user is uid 1000 inside, the daemon's user outside: a 0600 file the
    daemon's user owns is still readable and writable, a host file never bound is not."""
    own = workspace / "own.txt"
    own.write_text("mine\n")
    own.chmod(0o600)
    client = daemon("bwrap")
    result = client.tool("bash", command="id -u; cat own.txt; echo more >> own.txt && echo ok")
    assert result["content"].splitlines() == ["1000", "mine", "ok"]
    assert own.read_text() == "mine\nmore\n"


REACH_PIPES = r"""
import os
for pid in filter(str.isdigit, os.listdir("/proc")):
    argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    if pid == str(os.getpid()) or not os.path.basename(argv[0]).startswith(b"python"):
        continue  # bwrap's own (pid 1) holds none of the protocol's pipes
    if b"toold.sandbox.worker" not in argv:
        continue
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError as exc:
        print(f"{pid}: {exc.strerror}")
        continue
    print(f"{pid}: looked at {len(fds)} descriptors")
    for fd in fds:
        try:
            os.close(os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK))
            print(f"{pid}: opened fd {fd}")
        except OSError:
            pass
"""


def test_a_command_cannot_open_the_pipes_of_toolds_processes(
    daemon: Daemon, tmp_path: Path
) -> None:
    """toold's fork server and workers share the command's pid namespace; through
    ``/proc/PID/fd`` the command could write into their protocol pipes (forged answers,
    floods): they are not dumpable, so their descriptors are not the command's to open."""
    client = daemon("bwrap")
    (tmp_path / "ws" / "reach.py").write_text(REACH_PIPES, encoding="utf-8")
    result = client.tool("bash", command="python3 reach.py")
    looked = [line for line in result["content"].splitlines() if ": looked at" in line]
    assert len(looked) >= 2, result["content"]  # the fork server and the command's worker
    assert "opened" not in result["content"], result["content"]
