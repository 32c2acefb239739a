"""The docker runner through the real daemon and a real Docker engine."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.sandbox.conftest import Daemon, progress_until, start_call
from tests.waiting import wait_until

pytestmark = pytest.mark.usefixtures("docker_ready", "private_daemon")


def _containers(daemon_pid: int) -> list[Any]:
    import docker

    client = docker.from_env(timeout=10)
    try:
        return list(
            client.containers.list(all=True, filters={"label": f"org.toold.daemon={daemon_pid}"})
        )
    finally:
        client.close()


def test_tools_run_in_a_container_that_sees_only_the_workspace(
    daemon: Daemon, tmp_path: Path
) -> None:
    client = daemon("docker", events=True, warm_workers=0)
    assert client.tool("read_file", file_path="notes.txt")["content"] == "1: alpha\n2: beta"
    assert client.notification("execution/event")["params"]["runner"] == "docker"
    outside = tmp_path / "outside.txt"
    probe = f"/etc/toold-docker-probe-{os.getpid()}"
    writes = f"echo in > shell.txt; echo etc > {probe}; echo tmp > {outside}"
    init = "echo init=$(tr '\\0' ' ' </proc/1/cmdline)"
    result = client.tool("bash", command=f"{writes}; {init}")
    content = result["content"]
    assert "Read-only file system" in content
    assert "toold.sandbox.worker" in content  # the worker is the container's PID 1
    assert (tmp_path / "ws" / "shell.txt").read_text() == "in\n"
    assert (tmp_path / "ws" / "shell.txt").stat().st_uid == os.getuid()
    assert not os.path.exists(probe)
    assert not outside.exists()
    wait_until(lambda: not _containers(client.proc.pid), "the call's container to go")


def _bridge_gateway() -> str:
    import docker

    engine = docker.from_env(timeout=10)
    try:
        config = engine.networks.get("bridge").attrs["IPAM"]["Config"][0]
    finally:
        engine.close()
    return str(config.get("Gateway") or ipaddress.ip_network(config["Subnet"])[1])


def test_the_network_is_off_unless_allowed(daemon: Daemon, tcp_server: socket.socket) -> None:
    # The test's server listens on the host; the bridge gateway is the host as containers see it.
    connect = (
        f"exec 3<>/dev/tcp/{_bridge_gateway()}/{tcp_server.getsockname()[1]} && echo connected"
    )
    offline = daemon("docker")
    result = offline.tool("bash", command=f"ls /sys/class/net; {connect}")
    lines = result["content"].splitlines()
    assert "lo" in lines and "eth0" not in lines
    assert "connected" not in lines
    assert "Network is unreachable" in result["content"]
    online = daemon("docker", network=True)
    assert "connected" in online.tool("bash", command=connect)["content"].splitlines()
    # Shutting down releases the warm container each daemon kept.
    for client in (offline, online):
        client.close()
        wait_until(lambda c=client: not _containers(c.proc.pid), "the warm containers to go")


def test_cancel_kills_the_container(daemon: Daemon) -> None:
    client = daemon("docker", warm_workers=0)
    msg_id = start_call(client, "bash", "cancel-me", command="echo started; sleep 300")
    progress_until(client, "started")
    assert len(_containers(client.proc.pid)) == 1
    client.notify("$/cancelRequest", {"id": msg_id})
    assert client.response(msg_id)["error"]["code"] == -32800
    wait_until(lambda: not _containers(client.proc.pid), "the container to go")
