"""``toold serve`` and ``toold run`` through the engine: what editors and CI scripts see."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.e2e.wire import WireClient
from tests.engine.support import Engines, local_runner
from tests.processes import process_alive, wait_gone
from tests.waiting import wait_until


def _pid_in(path: Path) -> int:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return 0
    return int(text) if text.isdigit() else 0


def test_the_workspace_comes_from_initialize_without_a_flag(
    engines: Engines, workspace: Path, tmp_path: Path
) -> None:
    assert engines.toold("daemon", "start", cwd=workspace).returncode == 0
    pid = engines.status(workspace)["pid"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    editor = WireClient(None, env=engines.env)  # started in this process's folder
    engines.editors.append(editor)
    result = editor.initialize(workspaceFolders=[{"uri": workspace.as_uri(), "name": "ws"}])
    assert result["capabilities"]["experimental"]["toold"]["workspace"] == str(workspace)
    assert editor.tool("read_file", file_path="src/main.py")["content"] == "1: print('needle')"
    status = engines.status(workspace)
    assert status["pid"] == pid and len(status["sessions"]) == 1
    assert editor.close() == 0  # shutdown and exit: status 0, as from a private daemon


def test_a_killed_toold_serve_ends_its_session_and_cancels_its_calls(
    engines: Engines, workspace: Path
) -> None:
    local_runner(workspace)  # the shell's pid, as the test sees it
    editor = engines.editor(workspace)
    command = "echo $$ > slow.pid; exec sleep 60"
    editor.request(
        "tools/call", {"name": "bash", "arguments": {"command": command}, "origin": "user"}
    )
    shell = wait_until(lambda: _pid_in(workspace / "slow.pid"), "the call's shell")
    os.kill(editor.proc.pid, signal.SIGKILL)
    wait_gone(shell, "the killed session's call")
    wait_until(lambda: not engines.status(workspace)["sessions"], "the session to end")
    assert process_alive(engines.status(workspace)["pid"])


def test_end_of_input_lets_running_calls_finish(engines: Engines, workspace: Path) -> None:
    editor = engines.editor(workspace)
    msg_id = editor.request(
        "tools/call",
        {"name": "bash", "arguments": {"command": "sleep 0.3; echo late"}, "origin": "user"},
    )
    assert editor.proc.stdin is not None
    editor.proc.stdin.close()
    assert editor.response(msg_id)["result"]["content"] == "late"
    assert editor.proc.wait(timeout=30) == 1  # no shutdown: 1, as from a private daemon


def test_toold_run_attaches_and_its_job_is_seen_by_the_cli(
    engines: Engines, workspace: Path
) -> None:
    script = {
        "steps": [
            {"tool": "background_run", "arguments": {"command": "echo built", "task_id": "b1"}},
            {"wait_for": "jobs/finished", "match": {"jobId": "b1", "status": "done"}},
        ]
    }
    (workspace / "checks.json").write_text(json.dumps(script))
    done = engines.toold("run", "checks.json", cwd=workspace)
    assert done.returncode == 0, done.stdout + done.stderr
    pid = engines.status(workspace)["pid"]  # the engine toold run started lives on
    listed = json.loads(engines.toold("jobs", "--json", cwd=workspace).stdout)
    assert [j["status"] for j in listed if j["jobId"] == "b1"] == ["done"]
    private = engines.toold("run", "checks.json", "--no-daemon", cwd=workspace)
    assert private.returncode == 0, private.stdout + private.stderr
    assert engines.status(workspace)["pid"] == pid


def test_an_engine_crash_ends_toold_serve_naming_the_log(engines: Engines, workspace: Path) -> None:
    editor = engines.editor(workspace)
    pid = engines.status(workspace)["pid"]
    os.kill(pid, signal.SIGKILL)
    assert editor.proc.wait(timeout=30) == 1
    wait_until(lambda: "see its log" in editor.stderr(), "toold serve's error")
    assert ".log" in editor.stderr()
    again = engines.editor(workspace)  # the next client starts a fresh engine
    assert again.tool("todo_read")["content"] == "No TODO items."
    assert engines.status(workspace)["pid"] != pid


def test_execution_events_go_to_the_sessions_that_asked(engines: Engines, workspace: Path) -> None:
    asked = engines.editor(workspace, initializationOptions={"executionEvents": True})
    quiet = engines.editor(workspace)
    asked.tool("read_file", file_path="src/main.py")
    event = asked.notification("execution/event")["params"]
    assert event["tool"] == "read_file"
    quiet.tool("read_file", file_path="src/main.py")
    assert not [m for m in quiet._pending if m.get("method") == "execution/event"]


def test_an_editors_settings_apply_to_the_shared_workspace(
    engines: Engines, workspace: Path
) -> None:
    """initializationOptions.config is the editor's settings, as didChangeConfiguration
    sends them: they apply to the engine's workspace, for every session."""
    other = engines.editor(workspace)
    call = {"name": "write_file", "arguments": {"file_path": "w.txt", "content": "x"}}
    assert other.call("tools/call", {**call, "origin": "agent"})["isError"]  # default: asks
    options = {"config": {"permissions": {"mode": "bypass"}}}
    editor = engines.editor(workspace, initializationOptions=options)
    assert not editor.call("tools/call", {**call, "origin": "agent"})["isError"]
    assert (workspace / "w.txt").read_text() == "x"
    again = {**call, "arguments": {"file_path": "v.txt", "content": "y"}}
    assert not other.call("tools/call", {**again, "origin": "agent"})["isError"]
