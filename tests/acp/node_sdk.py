"""The ACP TypeScript SDK (``@agentclientprotocol/sdk`` from npm) as a client of ``toold acp``,
run by node: the fixture that installs it, and one run of ``node_client.mjs``.

The SDK is installed by the fixture (``npm install``, cached in ~/.cache/toold/acp-node),
so the README's test command needs nothing more than node and npm on the machine; without
them the tests skip, and fail under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acp.conftest import agent_env
from tests.agents.conftest import ModelServer
from tests.environment import unavailable

SDK = "@agentclientprotocol/sdk"
SDK_VERSION = "2.4.0"
"""ACP v1's session/resume, session/close and usage_update are in its stable entry point;
clientCapabilities.subagents and subagent_update only in ``/unstable``."""
CLIENT = Path(__file__).with_name("node_client.mjs")


@pytest.fixture(scope="module")
def node_client() -> Path:
    """The client script, next to an installed SDK (installed once, then cached)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable("node and npm are needed for the TypeScript ACP client")
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = home / "toold" / "acp-node"
    installed = folder / "node_modules" / SDK / "package.json"
    if not installed.exists() or json.loads(installed.read_text())["version"] != SDK_VERSION:
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {"name": "toold-acp-node", "private": True, "type": "module"}
        (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", f"{SDK}@{SDK_VERSION}"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"npm install failed: {done.stderr[-2000:]}"
    script = folder / CLIENT.name
    script.write_bytes(CLIENT.read_bytes())  # ESM resolves the SDK from the script's folder
    return script


def drive(script: Path, workspace: Path, model: ModelServer, **plan: Any) -> dict[str, Any]:
    """Run the node client on ``plan``; its record, once the SDK's schemas accepted every
    message and the SDK's parse of each notification and request kept it whole."""
    full = {
        "command": [sys.executable, "-m", "toold", "acp"],
        "cwd": str(workspace),
        "env": agent_env(model),
        "answers": [],
        **plan,
    }
    done = subprocess.run(
        ["node", str(script), json.dumps(full)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["invalid"] == [], record["invalid"]
    # The schemas' defaults-on-error would repair a malformed field silently, and they strip
    # unknown ones: every field toold sent must have reached the client unchanged.
    for method, key in (
        ("session/update", "notifications"),
        ("session/request_permission", "permissions"),
    ):
        sent = [m["params"] for m in record["wire"] if m.get("method") == method]
        assert len(sent) == len(record[key]), f"the SDK dropped a {method}"
        for raw, parsed in zip(sent, record[key], strict=True):
            assert (where := lost(raw, parsed)) is None, f"{method}: the SDK changed {where}"
    for result in record["results"]:
        where = lost(result["sent"], result["parsed"])
        assert where is None, f"{result['method']}'s result: its schema changed {where}"
    return record


def lost(sent: Any, parsed: Any, path: str = "") -> str | None:
    """The first field of ``sent`` that ``parsed`` does not hold unchanged (None: all kept;
    fields the schema added as defaults are not counted)."""
    if isinstance(sent, dict):
        if not isinstance(parsed, dict):
            return path or "the message"
        for key, value in sent.items():
            if key not in parsed:
                return f"{path}.{key}"
            if (where := lost(value, parsed[key], f"{path}.{key}")) is not None:
                return where
        return None
    if isinstance(sent, list):
        if not isinstance(parsed, list) or len(parsed) != len(sent):
            return path
        found = (
            lost(v, p, f"{path}[{i}]") for i, (v, p) in enumerate(zip(sent, parsed, strict=True))
        )
        return next((where for where in found if where is not None), None)
    return None if type(sent) is type(parsed) and sent == parsed else path


def of_kind(record: dict[str, Any], kind: str, session: str | None = None) -> list[dict[str, Any]]:
    """The parsed updates of one kind, optionally of one session only."""
    return [
        n["update"]
        for n in record["notifications"]
        if n["update"]["sessionUpdate"] == kind and session in (None, n["sessionId"])
    ]
