"""The Neovim plugin (editor-clients/neovim) against the real daemon, inside nvim --headless.

tests/clients/neovim_test.lua does the driving; this runs it and checks its report.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.agents.conftest import API_KEY, ModelServer
from tests.clients.toolchain import CLIENTS, ROOT, require_tool, run
from tests.engine.support import stop_engines

SCRIPT = Path(__file__).with_name("neovim_test.lua")
EXPECTED = [
    "setup and request: tools/list through the real daemon",
    ":TooldTools lists the tools in toold://tools",
    ":TooldCall runs grep and writes its output to toold://call/grep",
    "a background job's jobs/finished notification reaches vim.notify",
    "a permission request answered Allow through vim.ui.select writes the file",
    "an asynchronous picker answering Deny refuses the call",
    ":TooldTasks shows tasks with status and dependencies",
    ":TooldAsk streams the agent's tool calls into toold://agent, then its answer",
    "a teammate's team_send to main reaches vim.notify as team/message",
    ":TooldCancel stops a running :TooldAsk",
    ":TooldAsk without an API key says how to set one",
]
UNDO = [
    ":TooldUndo restores the file a tool wrote, byte for byte",
    ":TooldUndo after an outside change asks, and Restore anyway restores",
    ":TooldCheckpoints lists newest first; <CR> shows the diff, r restores",
]
DIAGNOSTICS = [
    "an agent's write shows its ruff diagnostic in the buffer through vim.diagnostic",
    ":TooldDiagnostics fills the quickfix list, files not loaded included",
    "the fix clears the buffer's diagnostic",
]
PREVIEW = "a permission prompt for an edit opens its diff in a split first"


def _script_the_model(model: ModelServer) -> None:
    """The model's answers, in the order neovim_test.lua asks (the public API is the only
    fake: a real HTTP server on 127.0.0.1 reached through the real SDK)."""
    # :TooldAsk — two tool calls, then the answer.
    model.tool_use(("read_file", {"file_path": "main.py"}))
    model.tool_use(("write_file", {"file_path": "notes.md", "content": "from the agent"}))
    model.text("It prints **needle**.")
    # alice's turn: she messages main on her own, then answers.
    model.tool_use(("team_send", {"to_agent": "main", "content": "hello from alice"}))
    model.text("said hi")
    # :TooldCancel — one tool call, then the model keeps the agent waiting.
    model.tool_use(("glob", {"pattern": "*.py"}))
    model.hold()


@pytest.fixture(scope="module")
def nvim_report(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The lines neovim_test.lua printed: one ``ok``/``not ok`` per case (it ran them all)."""
    nvim = require_tool("nvim", ["neovim"], (0, 7, 0), "--version")
    tmp_path = tmp_path_factory.mktemp("nvim")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "main.py").write_text("print('needle')\n", encoding="utf-8")
    model = ModelServer()
    try:
        _script_the_model(model)
        return _run_nvim(nvim, tmp_path, workspace, model)
    finally:
        model.close()


@pytest.mark.timeout(600)
def test_neovim_plugin_against_the_daemon(nvim_report: list[str]) -> None:
    output = "\n".join(nvim_report)
    assert not [line for line in nvim_report if line.startswith("not ok")], output
    for name in EXPECTED:
        assert f"ok - {name}" in nvim_report, output
    assert nvim_report[-1].endswith(" passed, 0 failed"), output


@pytest.mark.timeout(600)
def test_neovim_undo_and_checkpoints(nvim_report: list[str]) -> None:
    for name in UNDO:
        assert f"ok - {name}" in nvim_report, "\n".join(nvim_report)


@pytest.mark.timeout(600)
def test_neovim_permission_prompt_opens_the_diff_split(nvim_report: list[str]) -> None:
    assert f"ok - {PREVIEW}" in nvim_report, "\n".join(nvim_report)


@pytest.mark.timeout(600)
def test_neovim_shows_what_the_agents_edits_broke(nvim_report: list[str]) -> None:
    """diagnostics/changed from a real ruff server into vim.diagnostic; diagnostics/get
    into the quickfix list."""
    for name in DIAGNOSTICS:
        assert f"ok - {name}" in nvim_report, "\n".join(nvim_report)


def _run_nvim(nvim: str, tmp_path: Path, workspace: Path, model: ModelServer) -> list[str]:
    """nvim with the plugin, whose ``toold serve`` relays to the workspace's engine, as
    for a user (not the private daemon the rest of the suite defaults to)."""
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith("ANTHROPIC_") and k != "TOOLD_NO_DAEMON"
        },
        "TOOLD_RUNTIME_DIR": os.fspath(runtime),
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": model.url,
        "TOOLD_TEST_WS": os.fspath(workspace),
        "TOOLD_TEST_CMD": json.dumps([sys.executable, "-m", "toold", "serve"]),
        # Keep nvim's state, cache and LSP log out of the user's home.
        "XDG_CACHE_HOME": os.fspath(tmp_path / "cache"),
        "XDG_STATE_HOME": os.fspath(tmp_path / "state"),
        "XDG_DATA_HOME": os.fspath(tmp_path / "data"),
    }
    argv = [
        nvim,
        "--headless",
        "-u",
        "NONE",
        "-i",
        "NONE",
        "-n",
        "--cmd",
        f"set rtp+={CLIENTS / 'neovim'}",
        "-c",
        f"luafile {SCRIPT}",
    ]
    try:
        lines = run(argv, cwd=ROOT, timeout=300, env=env).splitlines()
    finally:
        stop_engines(runtime, env)
    # The plugin's sessions were served by an engine (each engine logs under the runtime).
    assert list(runtime.rglob("*.log")), f"no engine ran under {runtime}"
    return lines
