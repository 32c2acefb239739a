"""Escapes tried from inside the bwrap and docker sandboxes, as an agent's command would.

A probe script runs in the sandbox through the bash tool (origin ``agent``, the daemon
as whoever runs the suite: root on CI machines) and reports what it reached: the
Docker socket, other users' homes, /etc/shadow and keys, every Unix socket it can find
by walking its whole view, host sockets made for the test (in /run, in the host's /tmp,
abstract), its uid and capabilities. Each finding is an escape.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient
from tests.hardening.support import start_daemon
from tests.sandbox.conftest import bwrap_ready, docker_ready  # noqa: F401  (fixtures)

PROBE = r"""
import json, os, socket, stat, sys
targets = json.loads(sys.argv[1])
found = {"uid": os.getuid(), "gid": os.getgid(), "present": [], "readable": [],
         "connected": [], "sockets": [], "root_entries": []}
for path in targets["paths"]:
    if os.path.lexists(path):
        found["present"].append(path)
        try:
            with open(path, "rb") as f:
                f.read(1)
            found["readable"].append(path)
        except OSError:
            pass
with open("/proc/self/status") as f:
    found["cap_eff"] = [l.split()[1] for l in f if l.startswith("CapEff")][0]

def connect(address):
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        try:
            s.connect(address)
        except OSError:
            return False
        return True

def walk(folder):
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode):
            found["sockets"].append(entry.path)
        elif stat.S_ISDIR(mode) and entry.path not in ("/proc", "/sys"):
            walk(entry.path)

walk("/")
for pid in os.listdir("/proc"):
    if pid.isdigit():
        found["sockets"] += [f"/proc/{pid}/root{p}" for p in targets["sockets"]]
for path in found["sockets"] + targets["sockets"]:
    if connect(path):
        found["connected"].append(path)
for name in targets["abstract"]:
    if connect("\0" + name):
        found["connected"].append("@" + name)
for top, dirs, files in os.walk("/root"):
    kept = (top + "/").startswith(tuple(p.rstrip("/") + "/" for p in targets["runtime"]))
    found["root_entries"] += [] if kept else [os.path.join(top, n) for n in files]
with open("probe.json", "w") as f:
    json.dump(found, f)
"""

SECRET_PATHS = [
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/ssh",
    "/etc/ssl/private",
    "/root/.ssh",
    "/root/.bash_history",
    "/home",
    "/run",
    "/var/run",
]


@pytest.fixture
def host_sockets(tmp_path: Path) -> Iterator[dict[str, list[str]]]:
    """Listening host sockets the sandbox must not reach: in /run, in the host's /tmp,
    abstract, plus the Docker engine's when it runs."""
    tag = uuid.uuid4().hex[:8]
    paths = [f"/run/toold-escape-{tag}.sock", f"/tmp/toold-escape-{tag}.sock"]
    listeners = []
    for path in paths:
        listener = socket.socket(socket.AF_UNIX)
        try:
            listener.bind(path)
        except OSError:
            listener.close()
            continue
        listener.listen()
        listeners.append(listener)
    abstract = f"toold-escape-{tag}"
    hidden = socket.socket(socket.AF_UNIX)
    hidden.bind("\0" + abstract)
    hidden.listen()
    listeners.append(hidden)
    sockets = [p for p in paths if os.path.exists(p)]
    for engine in ("/var/run/docker.sock", "/run/docker.sock"):
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(engine)
            sockets.append(engine)  # reachable from the host: it must not be from inside
        except OSError:
            pass
        finally:
            probe.close()
    yield {"sockets": sockets, "abstract": [abstract]}
    for listener in listeners:
        listener.close()
    for path in paths:
        with __import__("contextlib").suppress(OSError):
            os.unlink(path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    return ws


def _daemon(workspace: Path, runner: str) -> WireClient:
    """A daemon on ``runner`` whose agent calls run unasked (the attacker's best case)."""
    (workspace / "toold.toml").write_text(
        f'[execution]\ntool_runner = "{runner}"\nwarm_workers = 0\n'
        '[permissions]\nmode = "bypass"\n',
        encoding="utf-8",
    )
    return start_daemon(workspace)


def _probe(client: WireClient, workspace: Path, targets: dict[str, list[str]]) -> dict:
    (workspace / "probe.py").write_text(PROBE, encoding="utf-8")
    runtime = [sys.prefix, sys.base_prefix]
    argument = json.dumps({**targets, "paths": SECRET_PATHS, "runtime": runtime})
    quoted = argument.replace("'", "'\\''")
    result = client.tool("bash", origin="agent", command=f"python3 probe.py '{quoted}'")
    assert result["isError"] is False, result
    found: dict = json.loads((workspace / "probe.json").read_text())
    return found


@pytest.mark.usefixtures("bwrap_ready")
def test_nothing_of_the_host_is_reachable_from_bwrap(
    workspace: Path, host_sockets: dict[str, list[str]]
) -> None:
    client = _daemon(workspace, "bwrap")
    try:
        found = _probe(client, workspace, host_sockets)
        # A nested user namespace would hand the call a full capability set again.
        nested = client.tool("bash", origin="agent", command="unshare -Ur id -u; echo rc=$?")
    finally:
        client.close()
    assert "rc=0" not in nested["content"], nested
    assert found["uid"] != 0 and found["gid"] != 0
    assert int(found["cap_eff"], 16) == 0
    assert found["present"] == [], found["present"]
    assert found["readable"] == []
    assert found["connected"] == [], found["connected"]
    # No socket at all in the view (the workspace has none either).
    assert found["sockets"] == [p for p in found["sockets"] if p.startswith("/proc/")]
    # /root holds at most the Python runtime the worker runs on (when it lives there) and
    # the user's toolchains, read-only (toold.sandbox.toolchains: never a secret folder).
    import sys

    from toold.sandbox.toolchains import toolchain_paths

    allowed = (sys.base_prefix, *toolchain_paths())
    assert all(p.startswith(allowed) for p in found["root_entries"]), found["root_entries"][:5]


@pytest.mark.usefixtures("docker_ready")
def test_nothing_of_the_host_is_reachable_from_docker(
    workspace: Path, host_sockets: dict[str, list[str]]
) -> None:
    client = _daemon(workspace, "docker")
    try:
        found = _probe(client, workspace, host_sockets)
    finally:
        client.close()
    assert int(found["cap_eff"], 16) == 0
    assert found["readable"] == [], found["readable"]
    assert found["connected"] == [], found["connected"]
    assert not any(p.endswith(".sock") for p in found["present"]), found["present"]


@pytest.mark.usefixtures("bwrap_ready")
def test_ordinary_commands_still_work_under_bwrap(workspace: Path) -> None:
    client = _daemon(workspace, "bwrap")
    try:
        shell = client.tool(
            "bash",
            origin="agent",
            command="set -e; git init -q repo && cd repo && echo hi > a.txt && git add a.txt "
            "&& git -c user.email=a@b -c user.name=t commit -qm one && git log --oneline "
            "| wc -l; ls /usr/bin | grep -c . >/dev/null && echo ls-ok; python3 -c "
            "'import ssl, sqlite3, json; print(\"py-ok\")'; echo home=$HOME; id -un",
        )
        assert shell["isError"] is False, shell
        lines = shell["content"].splitlines()
        assert lines[:3] == ["1", "ls-ok", "py-ok"], lines
        assert "home=/tmp" in lines and "sandbox" in lines
        repl = client.tool("python_repl", origin="agent", code="import os; print(os.getuid())")
        assert repl["content"].strip() == "1000"
        assert client.tool("grep", origin="agent", pattern="beta")["content"] == [
            "notes.txt:2:beta"
        ]
        written = client.tool("write_file", origin="agent", file_path="w.txt", content="x")
        assert written["isError"] is False
    finally:
        client.close()
