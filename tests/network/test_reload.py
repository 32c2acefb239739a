"""The guard's held reload covers the network policy, through a real daemon and bwrap.

toold.toml is rewritten on disk (as an agent's command could): a wider allow list waits
for the user's Apply and the proxy keeps the old list until then; a narrower one
applies at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient
from tests.network.conftest import Hosts
from tests.waiting import wait_until

pytestmark = pytest.mark.usefixtures("bwrap_ready")

ASK = "window/showMessageRequest"


def _toml(allow: list[str]) -> str:
    names = ", ".join(f'"{name}"' for name in allow)
    return f'[execution]\ntool_runner = "bwrap"\n\n[execution.network]\nallow = [{names}]\n'


@pytest.fixture
def client(
    workspace: Path, hosts: Hosts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[WireClient]:
    """A private daemon (it inherits the test resolver) on a pypi.test-only policy."""
    monkeypatch.setenv("TOOLD_STATE_DIR", str(tmp_path / "user-state"))
    (workspace / "toold.toml").write_text(_toml(["pypi.test"]), encoding="utf-8")
    started = WireClient(workspace, "--no-daemon")
    started.initialize(rootUri=workspace.as_uri(), capabilities={"window": {"showMessage": {}}})
    started.call("skills/list", {})  # answers once outside edits are watched
    yield started
    started.close()


def status(client: WireClient, host: str, port: int) -> str:
    """The HTTP status a sandboxed curl gets for ``host`` through the proxy."""
    command = f"curl -s -o /dev/null -w '%{{http_code}}' -m 10 http://{host}:{port}/"
    return str(client.tool("bash", command=command)["content"]).strip()


def test_a_wider_allow_list_waits_for_apply_and_a_narrower_one_applies_at_once(
    client: WireClient, workspace: Path, hosts: Hosts
) -> None:
    port = hosts.http.port
    assert status(client, "pypi.test", port) == "200"
    assert status(client, "canary.test", port) == "403"
    (workspace / "toold.toml").write_text(_toml(["pypi.test", "canary.test"]), encoding="utf-8")
    question = client.next_message(lambda m: m.get("method") == ASK)
    said = question["params"]["message"]
    assert said == "toold: toold.toml changed: execution.network adds canary.test to allow. Apply?"
    assert status(client, "canary.test", port) == "403"  # held: the proxy's list is the old one
    client.send({"jsonrpc": "2.0", "id": question["id"], "result": {"title": "Apply"}})
    shown = client.notification("window/showMessage")["params"]["message"]
    assert shown.endswith("Applied, as you confirmed"), shown
    assert status(client, "canary.test", port) == "200"

    (workspace / "toold.toml").write_text(_toml(["canary.test"]), encoding="utf-8")
    wait_until(lambda: status(client, "pypi.test", port) == "403", "the narrower list")
    assert status(client, "canary.test", port) == "200"
    # Each decision is a line of the workspace's audit log, beside the calls'.
    lines = (workspace / ".toold" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    network = [json.loads(line) for line in lines if '"event": "network"' in line]
    seen = {(e["host"], e["port"], e["method"], e["decision"], e["rule"]) for e in network}
    assert ("canary.test", port, "GET", "denied", "execution.network.allow") in seen, seen
    assert ("canary.test", port, "GET", "allowed", "canary.test") in seen, seen
    assert ("pypi.test", port, "GET", "allowed", "pypi.test") in seen, seen
