"""``toold acp`` sessions: cancel, modes, plans and an MCP server passed at session/new."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

from acp import RequestError, text_block
from acp.schema import EnvVariable, HttpMcpServer, McpServerStdio

from tests.acp.conftest import WAIT, Recorder, acp_agent, agent_env, run, start_session
from tests.agents.conftest import ModelServer, tool_names, tool_results
from tests.waiting import wait_until

NOTES_SERVER = Path(__file__).with_name("notes_server.py")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has finished)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_cancel_during_a_slow_command_kills_it_and_answers_cancelled(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    # The local runner: $! is the host's pid only outside a sandbox's PID namespace.
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "local"\n')
    pid_file = workspace / "sleep.pid"
    command = f"sleep 60 & echo $! > {pid_file.name}; echo started; wait"
    model.tool_use(("bash", {"command": command}))
    model.text("Still here after the cancel.")

    async def scenario() -> tuple[str, str, int]:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace)
            await conn.set_session_mode(session_id=session_id, mode_id="bypass")
            turn = asyncio.ensure_future(
                conn.prompt(session_id=session_id, prompt=[text_block("sleep")])
            )
            pid = int(
                await asyncio.to_thread(
                    wait_until,
                    lambda: pid_file.exists() and pid_file.read_text().strip(),
                    "the command's pid file",
                    WAIT,
                )
            )
            assert alive(pid)
            await conn.cancel(session_id=session_id)
            first = (await asyncio.wait_for(turn, 20)).stop_reason
            await asyncio.to_thread(wait_until, lambda: not alive(pid), "the sleep to die", WAIT)
            again = await conn.prompt(session_id=session_id, prompt=[text_block("still?")])
            return first, again.stop_reason, pid

    first, second, pid = run(scenario)
    assert (first, second) == ("cancelled", "end_turn")
    assert not alive(pid)
    assert recorder.updates("current_mode_update")[0]["currentModeId"] == "bypass"
    call = recorder.updates("tool_call")[0]
    assert call["kind"] == "execute"
    assert call["title"].startswith("Run `sleep 60")
    assert recorder.call_updates(call["toolCallId"])[-1]["status"] == "failed"
    # The conversation goes on: the cancelled call is answered for the model.
    last = model.wait_requests(2)[1]
    assert tool_results(last)[0]["content"] == "Cancelled by the user."
    assert last["messages"][-1]["content"][-1] == {"type": "text", "text": "still?"}


def test_command_output_is_the_tool_calls_content(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    model.tool_use(("bash", {"command": "echo one; echo two; exit 3"}))
    model.text("it failed")

    async def scenario() -> str:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace)
            await conn.set_session_mode(session_id=session_id, mode_id="bypass")
            reply = await conn.prompt(session_id=session_id, prompt=[text_block("run")])
            return reply.stop_reason

    assert run(scenario) == "end_turn"
    call_id = recorder.updates("tool_call")[0]["toolCallId"]
    final = recorder.call_updates(call_id)[-1]
    assert final["status"] == "failed"  # exit 3
    assert "one\ntwo" in final["content"][0]["content"]["text"]


def test_todo_write_updates_the_plan(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    model.tool_use(
        ("todo_write", {"action": "add", "task": "Read the code", "priority": "high"}),
        ("todo_write", {"action": "add", "task": "Fix the bug"}),
    )
    model.tool_use(("todo_write", {"action": "update", "task_id": "t1", "status": "done"}))
    model.text("Planned.")

    async def scenario() -> str:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace)
            reply = await conn.prompt(session_id=session_id, prompt=[text_block("plan")])
            return reply.stop_reason

    assert run(scenario) == "end_turn"
    plans = [u["entries"] for u in recorder.updates("plan")]
    assert len(plans) == 3
    assert plans[-1] == [
        {"content": "Read the code", "priority": "high", "status": "completed"},
        {"content": "Fix the bug", "priority": "medium", "status": "pending"},
    ]
    assert {u["kind"] for u in recorder.updates("tool_call")} == {"think"}


def test_plan_mode_refuses_a_write_without_asking(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    model.tool_use(("write_file", {"file_path": "x.txt", "content": "x"}))
    model.text("refused")

    async def scenario() -> str:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace)
            await conn.set_session_mode(session_id=session_id, mode_id="plan")
            reply = await conn.prompt(session_id=session_id, prompt=[text_block("write")])
            return reply.stop_reason

    assert run(scenario) == "end_turn"
    assert recorder.requests("session/request_permission") == []
    assert recorder.updates("tool_call_update")[-1]["status"] == "failed"
    assert not (workspace / "x.txt").exists()


def test_an_mcp_server_given_at_session_new_is_called_through_the_guard(
    model: ModelServer, workspace: Path, recorder: Recorder, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    model.tool_use(("notes__add_note", {"text": "remember the milk"}))
    model.text("Noted.")
    recorder.answers = ["allow_once"]
    server = McpServerStdio(
        name="notes",
        command=sys.executable,
        args=[str(NOTES_SERVER)],
        env=[
            EnvVariable(name="NOTES_FILE", value=str(notes)),
            EnvVariable(name="PYTHONPATH", value=os.environ.get("PYTHONPATH", "")),
        ],
    )

    async def scenario() -> str:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace, mcp_servers=[server])
            reply = await conn.prompt(session_id=session_id, prompt=[text_block("note it")])
            return reply.stop_reason

    assert run(scenario) == "end_turn"
    first, second = model.wait_requests(2)
    assert "notes__add_note" in tool_names(first)
    assert tool_results(second)[0]["content"] == "noted (1 notes)"
    assert notes.read_text(encoding="utf-8") == "remember the milk\n"
    asked = recorder.requests("session/request_permission")
    assert [a["toolCall"]["title"] for a in asked] == ["Notes: add note 'remember the milk'"]
    call = recorder.updates("tool_call")[0]
    assert call["kind"] == "other"
    assert recorder.call_updates(call["toolCallId"])[-1]["status"] == "completed"


def test_files_go_through_the_editor_when_it_offers_them(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    notes, out = workspace.resolve() / "notes.txt", workspace.resolve() / "out.txt"
    notes.write_text("saved text\n", encoding="utf-8")
    recorder.buffers[str(notes)] = "unsaved text\n"
    model.tool_use(("read_file", {"file_path": "notes.txt"}))
    model.tool_use(("write_file", {"file_path": "out.txt", "content": "from the agent\n"}))
    model.tool_use(("read_file", {"file_path": "../outside.txt"}))
    model.text("done")
    recorder.answers = ["allow_once"]

    async def scenario() -> str:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace, client_fs=True)
            reply = await conn.prompt(session_id=session_id, prompt=[text_block("edit")])
            return reply.stop_reason

    assert run(scenario) == "end_turn"
    requests = model.wait_requests(4)
    assert tool_results(requests[1])[0]["content"] == "1: unsaved text"
    assert recorder.writes == [(str(out), "from the agent\n")]
    assert not out.exists()  # the editor holds it
    assert tool_results(requests[3])[0]["is_error"] is True
    assert [p["path"] for p in recorder.requests("fs/read_text_file")] == [str(notes), str(out)]
    write_call = recorder.updates("tool_call")[1]["toolCallId"]
    diff = recorder.call_updates(write_call)[-1]["content"][0]
    assert diff == {"type": "diff", "path": str(out), "newText": "from the agent\n"}


def test_use_client_fs_false_keeps_files_on_disk(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    (workspace / "toold.toml").write_text("[acp]\nuse_client_fs = false\n", encoding="utf-8")
    (workspace / "notes.txt").write_text("saved text\n", encoding="utf-8")
    model.tool_use(("read_file", {"file_path": "notes.txt"}))
    model.text("done")

    async def scenario() -> str:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace, client_fs=True)
            reply = await conn.prompt(session_id=session_id, prompt=[text_block("read")])
            return reply.stop_reason

    assert run(scenario) == "end_turn"
    assert tool_results(model.wait_requests(2)[1])[0]["content"] == "1: saved text"
    assert recorder.requests("fs/read_text_file") == []


def test_a_skill_is_a_slash_command(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    model.text("Let us debug.")

    async def scenario() -> str:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace)
            prompt = [text_block("/debugging the test hangs")]
            reply = await conn.prompt(session_id=session_id, prompt=prompt)
            return reply.stop_reason

    assert run(scenario) == "end_turn"
    first = model.wait_requests(1)[0]["messages"][0]["content"][0]["text"]
    assert first.startswith('<skill name="debugging">\n')
    assert first.endswith("</skill>\n\nthe test hangs")


def test_a_new_skill_becomes_a_command_while_the_session_lives(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    def commands() -> list[set[str]]:
        updates = recorder.updates("available_commands_update")
        return [{c["name"] for c in u["availableCommands"]} for u in updates]

    async def scenario() -> None:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            await start_session(conn, workspace)
            await recorder.until(commands, "the first commands")
            folder = workspace / ".toold" / "skills" / "release"
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text("# Release\nCut a release.\n", encoding="utf-8")
            await recorder.until(lambda: "release" in commands()[-1], "the new skill")

    run(scenario)
    assert "release" not in commands()[0]


def test_a_subagents_question_is_shown_and_settled(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    model.tool_use(("subagent", {"task": "write it", "agent_type": "general-purpose"}))
    model.tool_use(("write_file", {"file_path": "sub.txt", "content": "from a subagent\n"}))
    model.text("sub done")
    model.text("all done")
    recorder.answers = ["allow_once", "allow_once"]  # the subagent tool, then its write

    async def scenario() -> str:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace)
            return (await conn.prompt(session_id=session_id, prompt=[text_block("go")])).stop_reason

    assert run(scenario) == "end_turn"
    assert (workspace / "sub.txt").read_text(encoding="utf-8") == "from a subagent\n"
    outer, inner = (c["toolCallId"] for c in recorder.updates("tool_call"))
    asked = recorder.requests("session/request_permission")
    assert [a["toolCall"]["toolCallId"] for a in asked] == [outer, inner]
    assert recorder.call_updates(inner)[-1]["status"] == "completed"
    assert recorder.call_updates(outer)[-1]["status"] == "completed"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_an_http_mcp_server_given_at_session_new_is_called_through_the_guard(
    model: ModelServer, workspace: Path, recorder: Recorder, tmp_path: Path
) -> None:
    notes, port = tmp_path / "notes.txt", free_port()
    env = {**os.environ, "NOTES_FILE": str(notes)}
    command = [sys.executable, str(NOTES_SERVER), "http", str(port)]
    log = (tmp_path / "http-server.log").open("wb")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    try:
        wait_until(lambda: accepts(port) or server.poll() is not None, "the HTTP server", WAIT)
        assert server.poll() is None, (tmp_path / "http-server.log").read_text()
        model.tool_use(("notes__add_note", {"text": "over http"}))
        model.text("Noted.")
        recorder.answers = ["allow_once"]
        link = HttpMcpServer(
            type="http", name="notes", url=f"http://127.0.0.1:{port}/mcp", headers=[]
        )

        async def scenario() -> str:
            async with acp_agent(workspace, agent_env(model), recorder) as conn:
                session_id = await start_session(conn, workspace, mcp_servers=[link])
                reply = await conn.prompt(session_id=session_id, prompt=[text_block("note")])
                return reply.stop_reason

        assert run(scenario) == "end_turn"
    finally:
        server.terminate()
        server.wait(timeout=WAIT)
        log.close()
    assert tool_results(model.wait_requests(2)[1])[0]["content"] == "noted (1 notes)"
    assert notes.read_text(encoding="utf-8") == "over http\n"
    assert len(recorder.requests("session/request_permission")) == 1


def test_two_servers_whose_tools_would_share_a_name_are_refused(
    workspace: Path, recorder: Recorder, tmp_path: Path
) -> None:
    env = [
        EnvVariable(name="NOTES_FILE", value=str(tmp_path / "notes.txt")),
        EnvVariable(name="PYTHONPATH", value=os.environ.get("PYTHONPATH", "")),
    ]
    servers = [
        McpServerStdio(name=name, command=sys.executable, args=[str(NOTES_SERVER)], env=env)
        for name in ("notes.x", "notes_x")
    ]

    async def scenario() -> RequestError:
        async with acp_agent(workspace, agent_env(None), recorder) as conn:
            try:
                await start_session(conn, workspace, mcp_servers=servers)
            except RequestError as exc:
                return exc
            raise AssertionError("session/new accepted two tools of one name")

    error = run(scenario)
    assert error.code == -32602
    assert "would both be the tool 'notes_x__add_note'" in str(error)
