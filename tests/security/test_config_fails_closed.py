"""An invalid toold.toml (or editor settings) fails closed: agents' calls are refused.

Issue 23: a typo anywhere in toold.toml (``[execution] tool_runer = "bwrap"``) made toold
start with the defaults, so the deny rules and the sandbox beside it were gone and nobody
was told. Now every agent's call is refused until the file is valid, each session is told
with a window/showMessage Error naming the key and the fix, ``toold call`` prints it on
stderr, and the strictest reading of the file still applies to the user's own calls.
The canary is a secret's content: it must never come back.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import WireClient
from tests.engine.support import Engines
from tests.waiting import wait_until
from toold.assembly import bind
from toold.config_gate import GatedGuard
from toold.config_loading import ConfigError, load_config
from toold.tools.context import CallContext
from toold.workspace import WorkspaceState

SECRET = "canary-secret-5d1e"
TYPO = """\
[execution]
tool_runer = "bwrap"

[permissions]
deny = ["read_file(prefix:secret*)"]
"""
FIXED = TYPO.replace("tool_runer", "tool_runner")
HINT = "execution.tool_runer: unknown key; did you mean 'tool_runner'?"


def _workspace(root: Path, toml: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "secret.txt").write_text(SECRET + "\n")
    (root / "notes.txt").write_text("plain notes\n")
    (root / "toold.toml").write_text(toml)
    return root


def _save(path: Path, text: str) -> None:
    """As an editor saves: a new file renamed over the old one."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    os.replace(fresh, path)


def _text(result: dict[str, Any]) -> str:
    return str(result["content"])


def _refused(result: dict[str, Any]) -> bool:
    return bool(result["isError"]) and "toold.toml is invalid" in _text(result)


# -- the real path: the shared engine, an editor through toold serve, toold call ------------


def test_an_invalid_file_refuses_agents_until_it_is_fixed(engines: Engines, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws", TYPO)
    editor = engines.editor(ws)

    shown = editor.notification("window/showMessage")["params"]
    assert shown["type"] == 1, shown  # Error
    assert HINT in shown["message"] and "agent tools are refused" in shown["message"]

    read = editor.tool("read_file", origin="agent", file_path="secret.txt")
    assert _refused(read) and HINT in _text(read)
    assert SECRET not in _text(read)
    ran = editor.tool("bash", origin="agent", command="echo pwned > pwned.txt")
    assert _refused(ran)
    assert not (ws / "pwned.txt").exists()
    # The strictest reading still holds for the user: the deny rule beside the typo.
    mine = editor.tool("read_file", file_path="secret.txt")
    assert mine["isError"] and SECRET not in _text(mine)
    # What an agent may still do to help: read the file it has to mend.
    assert "tool_runer" in _text(editor.tool("read_file", origin="agent", file_path="toold.toml"))

    done = engines.toold("call", "read_file", '{"file_path": "notes.txt"}', cwd=ws)
    assert done.returncode == 0, done.stderr
    assert "plain notes" in done.stdout
    assert HINT in done.stderr and "agent tools are refused" in done.stderr

    script = tmp_path / "notes.toml"  # outside the workspace: a run's file is not a tool's
    script.write_text('[[steps]]\ntool = "read_file"\narguments = { file_path = "notes.txt" }\n')
    ran_script = engines.toold("run", str(script), "--workspace", str(ws), cwd=ws)
    assert ran_script.returncode == 0, ran_script.stdout + ran_script.stderr
    assert HINT in ran_script.stderr and "agent tools are refused" in ran_script.stderr

    _save(ws / "toold.toml", FIXED)
    wait_until(
        lambda: not editor.tool("read_file", origin="agent", file_path="notes.txt")["isError"],
        "the fixed toold.toml to be applied",
    )
    again = editor.tool("read_file", origin="agent", file_path="secret.txt")
    assert again["isError"] and SECRET not in _text(again)  # the deny rule, now from the file


def test_a_reload_to_an_invalid_file_keeps_the_previous_configuration(
    engines: Engines, tmp_path: Path
) -> None:
    ws = _workspace(tmp_path / "ws", FIXED.replace('"bwrap"', '"local"'))
    editor = engines.editor(ws)
    assert "plain notes" in _text(editor.tool("read_file", origin="agent", file_path="notes.txt"))

    _save(ws / "toold.toml", TYPO.replace("deny = [", "deny = []\nallow = ["))
    shown = editor.notification("window/showMessage")["params"]
    assert shown["type"] == 1 and HINT in shown["message"], shown
    assert "keeping the previous configuration" in shown["message"]

    # Still served as before: the previous deny rule holds, nothing is refused wholesale.
    assert "plain notes" in _text(editor.tool("read_file", origin="agent", file_path="notes.txt"))
    read = editor.tool("read_file", origin="agent", file_path="secret.txt")
    assert read["isError"] and SECRET not in _text(read)


@pytest.mark.parametrize("extra", [(), ("--no-daemon",)], ids=["engine", "private"])
def test_invalid_initialization_options_refuse_agents(
    tmp_path: Path, extra: tuple[str, ...]
) -> None:
    """Editor settings that fail validation refuse agents' calls until valid ones come:
    on a private daemon (bound with them) and on the engine (bound before they came)."""
    ws = _workspace(tmp_path / "ws", "")
    client = WireClient(ws, *extra)
    try:
        bad = {"config": {"limits": {"bash_output_chars": 5}}}
        client.initialize(rootUri=ws.as_uri(), initializationOptions=bad)
        shown = client.notification("window/showMessage")["params"]
        assert shown["type"] == 1, shown
        assert "the editor's settings" in shown["message"]
        assert "limits.bash_output_chars" in shown["message"]

        read = client.tool("read_file", origin="agent", file_path="secret.txt")
        assert read["isError"] and "editor's settings" in _text(read)
        assert SECRET not in _text(read)
        assert "plain notes" in _text(client.tool("read_file", file_path="notes.txt"))

        good = {"settings": {"toold": {"config": {"limits": {"bash_output_chars": 5000}}}}}
        client.notify("workspace/didChangeConfiguration", good)
        # Requests wait for a configuration change sent before them (LspSession.ready).
        read = client.tool("read_file", origin="agent", file_path="secret.txt")
        assert not read["isError"] and SECRET in _text(read)
    finally:
        client.close()


# -- in process: the guard, the sandbox, the messages --------------------------------------


def _bound(ws: Path, overrides: dict[str, Any] | None = None) -> tuple[WorkspaceState, list[str]]:
    told: list[str] = []
    return bind(ws, overrides, lambda *_: None, told.append), told


async def _agent(state: WorkspaceState, tool: str, **args: Any) -> Any:
    return await state.gateway.call(tool, args, CallContext(origin="agent"))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_sandbox_the_file_asks_for_still_applies(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws", '[execution]\ntool_runner = "bwrap"\nnetwork = "maybe"\n')
    state, told = _bound(ws)

    async def scenario() -> None:
        try:
            assert state.runner.name == "bwrap"
            outcome = await _agent(state, "bash", command="echo pwned > pwned.txt")
            assert outcome.is_error and "execution.network" in str(outcome.content)
            assert not (ws / "pwned.txt").exists()
        finally:
            await state.aclose()

    asyncio.run(scenario())
    assert len(told) == 1 and "execution.network" in told[0]


def test_subagents_and_teammates_are_behind_the_same_gate(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws", TYPO)
    state, _ = _bound(ws)

    async def scenario() -> None:
        try:
            child = state.guard.child(mode="plan", fail_closed=True)
            assert isinstance(child, GatedGuard)
            verdict = await child.check("read_file", {"file_path": "notes.txt"}, "agent")
            assert not verdict.allowed and HINT in (verdict.message or "")
            _save(ws / "toold.toml", FIXED)
            assert await state.reload(state.overrides, from_file=True) is None
            verdict = await child.check("read_file", {"file_path": "notes.txt"}, "agent")
            assert verdict.allowed, verdict
        finally:
            await state.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "path",
    ["secret.txt", "./toold.toml/../secret.txt", "TOOLD.TOML", "sub/toold.toml", ""],
)
def test_only_toold_toml_itself_may_be_read_by_agents(tmp_path: Path, path: str) -> None:
    ws = _workspace(tmp_path / "ws", TYPO)
    (ws / "TOOLD.TOML").write_text(SECRET)
    (ws / "sub").mkdir()
    (ws / "sub" / "toold.toml").write_text(SECRET)
    state, _ = _bound(ws)

    async def scenario() -> None:
        try:
            outcome = await _agent(state, "read_file", file_path=path)
            assert outcome.is_error and SECRET not in str(outcome.content)
            grep = await _agent(state, "grep", pattern="canary", path="toold.toml")
            assert grep.is_error
        finally:
            await state.aclose()

    asyncio.run(scenario())


def test_a_second_bad_reload_keeps_agents_refused_and_names_the_new_problem(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path / "ws", TYPO)
    state, _ = _bound(ws)

    async def scenario() -> None:
        try:
            _save(ws / "toold.toml", "[limits]\nbash_output_chars = 1\n")
            problem = await state.reload(state.overrides, from_file=True)
            assert problem is not None and "limits.bash_output_chars" in problem
            assert "agent tools are refused" in problem
            outcome = await _agent(state, "read_file", file_path="notes.txt")
            assert outcome.is_error and "limits.bash_output_chars" in str(outcome.content)
        finally:
            await state.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        ("[exection]\n", "exection: unknown key; did you mean 'execution'?"),
        ("[[hooks.pre_tool_use]]\ncommand = 'x'\nmatchr = ''\n", "did you mean 'matcher'?"),
        ("[files]\nzzz = 1\n", "files.zzz: unknown key; expected one of: allowed_extensions"),
        ("[execution\n", "toold.toml is invalid (not valid TOML"),
        ('deny = "x"\n', "deny: unknown key; did you mean"),
        (b"\xff\xfe".decode("latin-1"), "not valid TOML"),
    ],
)
def test_messages_name_the_key_and_the_fix(tmp_path: Path, toml: str, said: str) -> None:
    (tmp_path / "toold.toml").write_text(toml, encoding="latin-1" if "\xff" in toml else "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert said in str(caught.value)


def test_bad_settings_are_blamed_not_the_file(tmp_path: Path) -> None:
    (tmp_path / "toold.toml").write_text('[execution]\ntool_runner = "local"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, {"permissions": {"mode": "yolo"}})
    assert caught.value.source != "toold.toml"
    assert str(caught.value).startswith("the editor's settings")


def test_fixing_the_file_does_not_slip_loosening_past_the_user(tmp_path: Path) -> None:
    """The strictest reading is what a fix is compared with: bypass waits for an answer."""
    ws = _workspace(tmp_path / "ws", TYPO)
    state, _ = _bound(ws)

    async def scenario() -> None:
        try:
            _save(ws / "toold.toml", '[permissions]\nmode = "bypass"\n')
            assert await state.reload(state.overrides, from_file=True) is None
            assert state.held is not None and "bypass" in state.held.summary
            assert state.guard.mode == "default"
            outcome = await _agent(state, "read_file", file_path="secret.txt")
            assert outcome.is_error and SECRET not in str(outcome.content)  # the deny rule
            assert not (await _agent(state, "read_file", file_path="notes.txt")).is_error
        finally:
            await state.aclose()

    asyncio.run(scenario())


def test_a_rule_that_does_not_parse_refuses_agents_and_keeps_the_others(tmp_path: Path) -> None:
    toml = '[permissions]\ndeny = ["read_file(prefix:secret*)", "bash(oops"]\n'
    ws = _workspace(tmp_path / "ws", toml)
    state, told = _bound(ws)

    async def scenario() -> None:
        try:
            outcome = await _agent(state, "read_file", file_path="notes.txt")
            assert outcome.is_error and "bash(oops" in str(outcome.content)
            mine = await state.gateway.call(
                "read_file", {"file_path": "secret.txt"}, CallContext(origin="user")
            )
            assert mine.is_error and SECRET not in str(mine.content)
        finally:
            await state.aclose()

    asyncio.run(scenario())
    assert len(told) == 1 and "bash(oops" in told[0]
