"""The VS Code extension (editor-clients/vscode): install, compile, lint, test, package.

Its own tests (npm test) drive the real daemon through vscode-jsonrpc; this runs the whole
Node toolchain as subprocesses and checks the packaged .vsix loads with its dependencies.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from tests.clients.toolchain import CLIENTS, require_tool, run

VSCODE = CLIENTS / "vscode"
MIN_NODE = (20, 0, 0)
NODE_HINT = (
    "install Node.js 20 or later with npm (NodeSource's nodejs package; "
    "Debian 12's own nodejs is 18, too old for @vscode/vsce 3)"
)


@pytest.fixture(scope="module")
def npm() -> str:
    """npm, with node_modules installed (npm ci only when missing or stale) and compiled."""
    require_tool("node", ["nodejs", "npm"], MIN_NODE, "--version", NODE_HINT)
    npm = require_tool("npm", ["nodejs", "npm"], (9, 0, 0), "--version", NODE_HINT)
    installed = VSCODE / "node_modules" / ".package-lock.json"
    lock = VSCODE / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        run([npm, "ci", "--no-audit", "--no-fund"], cwd=VSCODE, timeout=600)
    run([npm, "run", "compile"], cwd=VSCODE, timeout=300)
    return npm


@pytest.mark.timeout(900)
def test_compiles_strictly(npm: str) -> None:
    config = json.loads((VSCODE / "tsconfig.json").read_text(encoding="utf-8"))
    options = config["compilerOptions"]
    assert options["strict"] is True and options["noImplicitAny"] is True
    assert (VSCODE / "out" / "extension.js").is_file()
    assert (VSCODE / "out" / "client-core.js").is_file()


@pytest.mark.timeout(300)
def test_lint(npm: str) -> None:
    run([npm, "run", "lint"], cwd=VSCODE, timeout=300)


@pytest.mark.timeout(300)
def test_node_tests_against_the_daemon(npm: str) -> None:
    env = {**os.environ, "TOOLD_PYTHON": sys.executable}
    output = run([npm, "test"], cwd=VSCODE, timeout=300, env=env)
    assert "# fail 0" in output, output
    for name in (
        "tools/list returns the native catalogue with JSON Schemas",
        "tools/call runs grep for the user and returns its matches",
        "background_run ends with a jobs/finished notification and jobs/get output",
        "Allow lets the agent's write_file run",
        "Deny refuses it with 'User denied.'",
        "agent/run streams each tool call as $/progress and answers the final text",
        "cancelling the token stops the agent (RequestCancelled)",
        "agent/run is refused and the client names the fix",
        "an edit is listed newest first and undo puts the file back byte for byte",
        "a file changed outside toold is a Conflict naming it; force restores anyway",
        "permissions/preview carries the file's texts and arrives before the prompt",
    ):
        assert re.search(rf"^\s*ok \d+ - {re.escape(name)}$", output, re.MULTILINE), output


@pytest.mark.timeout(300)
def test_vsix_packages_and_loads(npm: str, tmp_path: Path) -> None:
    manifest = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    vsix = VSCODE / f"{manifest['name']}-{manifest['version']}.vsix"
    vsix.unlink(missing_ok=True)
    # --no: use the locally installed vsce, never download one.
    npx = shutil.which("npx") or pytest.fail("npx is missing (it ships with npm)")
    run([npx, "--no", "@vscode/vsce", "package"], cwd=VSCODE, timeout=300)
    assert vsix.is_file()
    with zipfile.ZipFile(vsix) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path)
    assert "extension/out/extension.js" in names
    assert "extension/node_modules/vscode-languageclient/package.json" in names
    assert not [n for n in names if n.startswith(("extension/out/test", "extension/src/"))]
    print(f"packaged {vsix} ({vsix.stat().st_size} bytes)")
    # Loads outside the source tree, with a stub `vscode`: every runtime dependency ships.
    node = require_tool("node", ["nodejs", "npm"], MIN_NODE, "--version", NODE_HINT)
    script = VSCODE / "scripts" / "load-extension.cjs"
    extension = os.fspath(tmp_path / "extension")
    out = run([node, os.fspath(script), extension], cwd=tmp_path, timeout=60)
    assert f"loaded toold {manifest['version']}" in out
