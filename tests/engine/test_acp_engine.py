"""``toold acp`` attaches to the workspace's engine like every other client (issue 28).

Real processes: ``toold acp`` driven by the ACP Python SDK's client (tests/acp), an
editor through ``toold serve``, and the engines they share under the test's runtime
folder. The scripted model plays the agent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block

from tests.acp.conftest import Recorder, acp_agent, agent_env, run, start_session
from tests.agents.conftest import ModelServer, tool_results
from tests.agents.conftest import model as model  # the scripted Messages API, shared
from tests.engine.support import Engines, live_engines
from tests.processes import wait_gone
from toold.acp import history


def _env(engines: Engines, model: ModelServer | None) -> dict[str, str]:
    """``toold acp``'s environment: the scripted model, the test's engines, no private mode."""
    env = agent_env(model, TOOLD_RUNTIME_DIR=str(engines.runtime))
    env.pop("TOOLD_NO_DAEMON", None)
    env.pop("CI", None)
    return env


def _listed(engines: Engines, cwd: Path) -> list[dict[str, Any]]:
    done = engines.toold("daemon", "list", "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    listed: list[dict[str, Any]] = json.loads(done.stdout)
    return listed


def test_two_acp_clients_and_an_editor_share_one_engine(
    engines: Engines, model: ModelServer, workspace: Path
) -> None:
    """One engine, three sessions: a TODO and a job made through ACP are the editor's to
    see, an "Always allow" given in one ACP session holds in the other, and the engine
    outlives one client and exits after the last, per its idle rules."""
    (workspace / "toold.toml").write_text("[daemon]\nidle_timeout = 1\n")
    first, second = Recorder(), Recorder()
    first.answers = ["allow_always"]
    model.tool_use(("todo_write", {"action": "add", "task": "shared todo"}))
    model.tool_use(("background_run", {"command": "echo from-acp", "task_id": "acpjob"}))
    model.text("Planned and started.")
    model.tool_use(("write_file", {"file_path": "one.txt", "content": "1"}))
    model.text("Wrote one.")
    model.tool_use(("write_file", {"file_path": "two.txt", "content": "2"}))
    model.text("Wrote two.")

    async def scenario() -> tuple[list[dict[str, Any]], list[str], list[str]]:
        env = _env(engines, model)
        async with acp_agent(workspace, env, first) as conn_a:
            session_a = await start_session(conn_a, workspace)
            async with acp_agent(workspace, env, second) as conn_b:
                session_b = await start_session(conn_b, workspace)
                editor = engines.editor(workspace)
                listed = _listed(engines, workspace)
                kinds = [s["kind"] for s in engines.status(workspace)["sessions"]]
                await conn_a.prompt(session_id=session_a, prompt=[text_block("plan")])
                todos = editor.call("todos/list", {})
                jobs = editor.call("jobs/list", {})
                await conn_a.prompt(session_id=session_a, prompt=[text_block("write one")])
                await conn_b.prompt(session_id=session_b, prompt=[text_block("write two")])
                assert [t["task"] for t in todos["todos"]] == ["shared todo"], todos
                assert [j["jobId"] for j in jobs["jobs"]] == ["acpjob"], jobs
            # The second client is gone: the engine still serves the first and the editor.
            after = [s["kind"] for s in engines.status(workspace)["sessions"]]
            return listed, kinds, after

    listed, kinds, after = run(scenario, timeout=120)
    assert [e["sessions"] for e in listed] == [3], listed  # one engine, three sessions
    assert sorted(kinds) == ["acp", "acp", "stdio"]
    assert sorted(after) == ["acp", "stdio"]
    # Asked in the first session (one.txt: Always), never in the second (two.txt).
    assert len(first.requests("session/request_permission")) == 1
    assert second.requests("session/request_permission") == []
    assert (workspace / "two.txt").read_text() == "2"
    results = [r["content"] for body in model.wait_requests(7) for r in tool_results(body)]
    assert any("two.txt" in str(r) for r in results)
    # The last client leaves: the engine exits after daemon.idle_timeout.
    pids = live_engines(engines.runtime)
    assert len(pids) == 1
    engines.editors[0].close()
    wait_gone(pids, "the engine, idle after its last client")


def test_a_session_on_a_second_folder_gets_a_second_engine(
    engines: Engines, workspace: Path, tmp_path: Path
) -> None:
    """One ``toold acp``, two sessions on two folders: two engines, one ACP session each;
    session/list without a cwd merges the sessions kept in both folders."""
    other = tmp_path / "other"
    other.mkdir()
    kept = {"a" * 32: workspace, "b" * 32: other}
    for session_id, folder in kept.items():
        history.save(folder, session_id, [{"role": "user", "content": f"in {folder.name}"}])
    recorder = Recorder()

    async def scenario() -> tuple[list[dict[str, Any]], list[str], str]:
        env = _env(engines, None)
        async with acp_agent(workspace, env, recorder) as conn:
            await start_session(conn, workspace)
            await conn.new_session(cwd=str(other), mcp_servers=[])
            listed = [engines.status(folder) for folder in (workspace, other)]
            merged = await conn.list_sessions()
            with pytest.raises(RequestError) as unknown:
                await conn.prompt(session_id="not-a-session", prompt=[text_block("hi")])
            return listed, [s.session_id for s in merged.sessions], str(unknown.value)

    listed, merged, unknown = run(scenario)
    assert sorted(e["workspace"] for e in listed) == sorted(
        [str(workspace.resolve()), str(other.resolve())]
    )
    assert all([s["kind"] for s in e["sessions"]] == ["acp"] for e in listed), listed
    assert sorted(merged) == sorted(kept)
    assert "create one with session/new" in unknown


INNER = """\
import asyncio, os, sys
from acp import spawn_agent_process, text_block
from acp.schema import ClientCapabilities

class Client:
    asked = 0
    async def request_permission(self, **kw):
        Client.asked += 1
        from acp.schema import AllowedOutcome, RequestPermissionResponse
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow_always")
        )
    async def session_update(self, **kw):
        pass

async def main():
    # The SDK starts agents with a few variables only: TOOLD_RUNTIME_DIR is the test's.
    spawned = spawn_agent_process(
        Client(), sys.executable, "-m", "toold", "acp", env=dict(os.environ)
    )
    async with spawned as (conn, _):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        session = (await conn.new_session(cwd=".", mcp_servers=[])).session_id
        try:
            await conn.set_session_mode(session_id=session, mode_id="bypass")
            print("mode set")
        except Exception as exc:
            print("mode refused:", exc)
        reply = await conn.prompt(session_id=session, prompt=[text_block("write")])
        print("stop", reply.stop_reason, "asked", Client.asked)

asyncio.run(main())
"""


def test_an_acp_client_inside_a_tool_call_is_the_agents(
    engines: Engines, model: ModelServer, workspace: Path
) -> None:
    """An agent's command running its own ``toold acp`` on the folder reaches the engine
    as the agent: it cannot change the mode, and its calls that would ask are denied
    without asking it (it would allow its own writes, and remember "Always")."""
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "local"\n')
    (workspace / "inner.py").write_text(INNER.replace('cwd="."', f"cwd={str(workspace)!r}"))
    user = Recorder()
    user.answers = ["allow_once"]
    model.tool_use(("bash", {"command": f"{sys.executable} inner.py > inner.out 2>&1"}))
    model.tool_use(("write_file", {"file_path": "pwned.txt", "content": "agent"}))
    model.text("inner done")
    model.text("outer done")

    async def scenario() -> None:
        async with acp_agent(workspace, _env(engines, model), user) as conn:
            session = await start_session(conn, workspace)
            await conn.prompt(session_id=session, prompt=[text_block("run inner")])

    run(scenario, timeout=120)
    out = (workspace / "inner.out").read_text()
    assert "mode refused" in out and "stop end_turn asked 0" in out, out
    assert not (workspace / "pwned.txt").exists()
    # Only the user's one question (the bash call) was asked, of the user.
    assert len(user.requests("session/request_permission")) == 1
