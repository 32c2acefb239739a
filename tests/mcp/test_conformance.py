"""``toold mcp --http`` against the official MCP conformance suite and the MCP Inspector CLI
(which also drives ``toold mcp`` on stdio, through the workspace's engine).

Both come from npm (``@modelcontextprotocol/conformance`` 0.1.16 and
``@modelcontextprotocol/inspector`` 2.12.0), installed once by the fixture into
``${XDG_CACHE_HOME:-~/.cache}/toold/mcp-conformance`` and run by Node 24 (both need
Node 22 or later; the Node 24 of tests/clients/code_server.py, itself from npm), so the
README's test command needs nothing more than node and npm.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clients.code_server import SetupError, ensure_node
from tests.engine.support import live_engines
from tests.environment import unavailable
from tests.mcp.http_process import toold_http

PACKAGES = {
    "@modelcontextprotocol/conformance": "0.1.16",
    "@modelcontextprotocol/inspector": "2.12.0",
}
BASELINE = Path(__file__).with_name("conformance-baseline.yml")
PASSING = {
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
}
"""The scenarios toold passes; every other one is in the baseline, with its reason."""
TOKEN = "inspector-token-0123456789"


@dataclass(frozen=True)
class NodeTools:
    """Node 24 and the folder the two packages are installed in."""

    node: Path
    folder: Path

    def argv(self, package: str, entry: str, *args: str) -> list[str]:
        """The command line running ``entry`` of the installed ``package``."""
        return [str(self.node), str(self.folder / "node_modules" / package / entry), *args]


def _installed(folder: Path) -> bool:
    for name, version in PACKAGES.items():
        manifest = folder / "node_modules" / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text())["version"] != version:
            return False
    return True


@pytest.fixture(scope="module")
def node_tools() -> NodeTools:
    """Node 24 and both packages, installed on first use and cached."""
    npm = shutil.which("npm")
    if npm is None:
        unavailable("npm is needed for the MCP conformance suite and Inspector")
    try:
        node = ensure_node()
    except SetupError as exc:
        unavailable(f"Node 24 could not be installed from npm: {exc}")
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = home / "toold" / "mcp-conformance"
    if not _installed(folder):
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {"name": "toold-mcp-conformance", "private": True}
        (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
        specs = [f"{name}@{version}" for name, version in PACKAGES.items()]
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", *specs],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"npm install failed: {done.stderr[-2000:]}"
        assert _installed(folder), "npm installed other versions than asked"
    return NodeTools(node, folder)


def scenario_results(output: Path) -> dict[str, list[dict[str, str]]]:
    """Each scenario's checks, from the suite's ``-o`` folder (one folder a scenario)."""
    results = {}
    for folder in output.iterdir():
        # server-<scenario>-<ISO timestamp, with dashes for colons>
        named = re.fullmatch(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z", folder.name)
        assert named is not None, folder.name
        results[named.group(1)] = json.loads((folder / "checks.json").read_text(encoding="utf-8"))
    return results


@pytest.mark.timeout(900)  # the first run on a machine installs Node 24 and both packages
def test_the_conformance_suite_passes_every_scenario_toold_offers(
    node_tools: NodeTools, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    output = tmp_path / "results"
    # The suite sends no credentials; its DNS rebinding scenario is for loopback servers
    # without a token, which --no-token allows on loopback only.
    with toold_http(workspace, "--no-token") as server:
        conformance = "@modelcontextprotocol/conformance"
        argv = node_tools.argv(conformance, "dist/index.js", "server", "--url", server.url)
        done = subprocess.run(
            [*argv, "--suite", "all", "--expected-failures", str(BASELINE), "-o", str(output)],
            cwd=node_tools.folder,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert server.stop() == 0
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    results = scenario_results(output)
    passed = {
        name
        for name, checks in results.items()
        if checks and all(c["status"] in ("SUCCESS", "INFO") for c in checks)
    }
    assert passed == PASSING
    # The one scenario in the baseline for warnings alone. It calls the suite's own
    # test_reconnection tool with protocol version 2025-03-26: no priming event (the SDK
    # primes 2025-11-25 streams only), no retry field, and the unknown tool's error was
    # the stream's last event, so the resumed GET has nothing more to send.
    polling = {c["id"]: c["status"] for c in results["server-sse-polling"]}
    assert {s for s in polling.values() if s not in ("SUCCESS", "INFO")} == {"WARNING"}
    assert {k for k, s in polling.items() if s == "WARNING"} == {
        "server-sse-priming-event",
        "server-sse-retry-field",
        "server-sse-disconnect-resume",
    }


def _inspector(tools: NodeTools, tmp_path: Path, *args: str) -> Any:
    """The Inspector CLI's JSON answer to ``--cli ARGS`` (its server, then its method)."""
    env = {**os.environ, "HOME": str(tmp_path), "MCP_CATALOG_PATH": str(tmp_path / "mcp.json")}
    argv = tools.argv("@modelcontextprotocol/inspector", "clients/launcher/build/index.js")
    done = subprocess.run(
        [*argv, "--cli", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)


WRITE = ["--method", "tools/call", "--tool-name", "write_file", "--tool-arg"]
WRITE += ["file_path=inspected.txt", "content=from the inspector"]
"""The Inspector's call: a write_file (the workspace is in bypass mode)."""


def _bypass(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "toold.toml").write_text('[permissions]\nmode = "bypass"\n', encoding="utf-8")
    return workspace


@pytest.mark.timeout(900)  # as above, when it runs first
def test_the_inspector_cli_lists_and_calls_a_tool_over_http(
    node_tools: NodeTools, tmp_path: Path
) -> None:
    workspace = _bypass(tmp_path)
    with toold_http(workspace, token=TOKEN) as server:
        target = [server.url, "--header", f"Authorization: Bearer {TOKEN}"]
        listed = _inspector(node_tools, tmp_path, *target, "--method", "tools/list")
        called = _inspector(node_tools, tmp_path, *target, *WRITE)
        assert server.stop() == 0
    assert {"bash", "read_file", "write_file"} <= {t["name"] for t in listed["tools"]}
    assert called["isError"] is False, called
    assert (workspace / "inspected.txt").read_text(encoding="utf-8") == "from the inspector"


@pytest.mark.timeout(900)  # as above, when it runs first
def test_the_inspector_cli_lists_and_calls_a_tool_over_stdio_through_the_engine(
    node_tools: NodeTools, tmp_path: Path, runtime: Path
) -> None:
    """The TypeScript SDK's stdio client on ``toold mcp``, served by the workspace's engine
    (the Inspector passes a server only the variables it is given with ``-e``)."""
    workspace = _bypass(tmp_path)
    target = ["-e", f"TOOLD_RUNTIME_DIR={runtime}", sys.executable, "-m", "toold", "mcp"]
    target += ["--workspace", str(workspace)]
    listed = _inspector(node_tools, tmp_path, *target, "--method", "tools/list")
    called = _inspector(node_tools, tmp_path, *target, *WRITE)
    assert {"bash", "read_file", "write_file"} <= {t["name"] for t in listed["tools"]}
    assert called["isError"] is False, called
    assert (workspace / "inspected.txt").read_text(encoding="utf-8") == "from the inspector"
    assert len(live_engines(runtime)) == 1  # both Inspector runs were served by one engine
