"""Editors, the command line and jobs on one engine per workspace (real processes)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

from tests.engine.support import Engines, live_engines, local_runner
from tests.processes import process_alive, wait_gone
from tests.waiting import wait_until


def _todo(engines: Engines, workspace: Path, text: str) -> None:
    arguments = json.dumps({"action": "add", "task": text})
    done = engines.toold("call", "todo_write", arguments, cwd=workspace)
    assert done.returncode == 0, done.stderr


def test_two_editors_and_the_cli_share_one_engine(engines: Engines, workspace: Path) -> None:
    first = engines.editor(workspace)
    second = engines.editor(workspace)
    status = engines.status(workspace)
    assert len(status["sessions"]) == 2
    assert live_engines(engines.runtime) == [status["pid"]]

    first.tool("todo_write", action="add", task="from the first editor")
    for editor in (first, second):
        seen = editor.notification("todos/changed")["params"]["todos"]
        assert [t["task"] for t in seen] == ["from the first editor"]

    _todo(engines, workspace, "from the command line")
    for editor in (first, second):
        tasks = [t["task"] for t in editor.notification("todos/changed")["params"]["todos"]]
        assert "from the command line" in tasks
    assert engines.status(workspace)["pid"] == status["pid"]


def test_a_job_started_by_toold_call_outlives_the_cli(engines: Engines, workspace: Path) -> None:
    command = "sleep 0.5; echo finished > out.txt"
    arguments = json.dumps({"command": command, "task_id": "late"})
    started = engines.toold("call", "background_run", arguments, cwd=workspace)
    assert started.returncode == 0, started.stderr
    assert "late" in started.stdout

    waited = engines.toold("jobs", "wait", "late", cwd=workspace)
    assert waited.returncode == 0, waited.stderr
    assert (workspace / "out.txt").read_text() == "finished\n"
    listed = engines.toold("jobs", "--json", cwd=workspace)
    jobs = {job["jobId"]: job for job in json.loads(listed.stdout)}
    assert jobs["late"]["status"] == "done" and jobs["late"]["exitCode"] == 0

    failing = json.dumps({"command": "exit 7", "task_id": "bad"})
    assert engines.toold("call", "background_run", failing, cwd=workspace).returncode == 0
    assert engines.toold("jobs", "wait", "bad", cwd=workspace).returncode == 7


def test_a_prompt_goes_to_the_calling_session_only(engines: Engines, workspace: Path) -> None:
    can_ask: dict[str, object] = {"window": {"showMessage": {}}}
    asking = engines.editor(workspace, capabilities=can_ask)
    other = engines.editor(workspace, capabilities=can_ask)
    call = {
        "name": "write_file",
        "arguments": {"file_path": "a.txt", "content": "x"},
        "origin": "agent",
    }
    msg_id = asking.request("tools/call", call)
    prompt = asking.next_message(lambda m: m.get("method") == "window/showMessageRequest")
    assert "write_file" in prompt["params"]["message"]
    # The other session gets nothing: its own request's answer comes with no prompt before it.
    other.call("todos/list", {})
    assert not [m for m in other._pending if m.get("method") == "window/showMessageRequest"]
    asking.send({"jsonrpc": "2.0", "id": prompt["id"], "result": {"title": "Deny"}})
    result = asking.response(msg_id)["result"]
    assert result["isError"] and not (workspace / "a.txt").exists()


def test_a_session_without_prompts_is_denied_not_another_asked(
    engines: Engines, workspace: Path
) -> None:
    engines.editor(workspace, capabilities={"window": {"showMessage": {}}})
    call = json.dumps({"file_path": "b.txt", "content": "x"})
    # toold call is a person's call (origin user): it is not asked, it runs.
    assert engines.toold("call", "write_file", call, cwd=workspace).returncode == 0
    mute = engines.editor(workspace)
    params = {"name": "write_file", "arguments": {"file_path": "c.txt", "content": "x"}}
    result = mute.call("tools/call", {**params, "origin": "agent"})
    assert result["isError"] and not (workspace / "c.txt").exists()


def test_killing_one_editor_cancels_its_calls_only(engines: Engines, workspace: Path) -> None:
    local_runner(workspace)  # the shells' pids, as the test sees them
    stand_in = subprocess.Popen(["sleep", "600"])  # the editor whose processId dies
    try:
        doomed = engines.editor(workspace, processId=stand_in.pid)
        survivor = engines.editor(workspace)
        slow = "echo $$ > {name}.pid; exec sleep 60"
        doomed.request("tools/call", _bash(slow.format(name="a")))
        kept = survivor.request("tools/call", _bash(slow.format(name="b")))
        pid_a = _wait_pid(workspace / "a.pid", "the doomed call's shell")
        pid_b = _wait_pid(workspace / "b.pid", "the surviving call's shell")
        stand_in.kill()
        stand_in.wait()
        wait_gone(pid_a, "the dead editor's call")
        assert process_alive(pid_b)
        assert doomed.proc.wait(timeout=20) == 0  # its toold serve ends with the session
        assert engines.status(workspace)["sessions"][0]["kind"] == "stdio"
        survivor.notify("$/cancelRequest", {"id": kept})
        assert survivor.response(kept)["error"]["code"] == -32800
        wait_gone(pid_b, "the cancelled call")
    finally:
        stand_in.kill()
        stand_in.wait()


def _bash(command: str) -> dict[str, object]:
    return {"name": "bash", "arguments": {"command": command}, "origin": "user"}


def _wait_pid(path: Path, what: str) -> int:
    pid: int = wait_until(lambda: _pid_in(path) or 0, what)
    return pid


def _pid_in(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def test_sigkill_of_the_engine_loses_no_acknowledged_todo_or_task(
    engines: Engines, workspace: Path
) -> None:
    _todo(engines, workspace, "kept across the crash")
    task = json.dumps({"title": "kept too"})
    assert engines.toold("call", "task_create", task, cwd=workspace).returncode == 0
    first = engines.status(workspace)["pid"]
    os.kill(first, signal.SIGKILL)
    wait_gone(first, "the killed engine")
    assert any(p.suffix == ".sock" for p in engines.runtime.iterdir())

    todos = engines.toold("call", "todo_read", cwd=workspace)
    assert todos.returncode == 0, todos.stderr
    assert "kept across the crash" in todos.stdout
    tasks = engines.toold("call", "task_list", cwd=workspace)
    assert "kept too" in tasks.stdout
    second = engines.status(workspace)["pid"]
    assert second != first and live_engines(engines.runtime) == [second]


def test_a_crash_during_a_call_names_the_log(engines: Engines, workspace: Path) -> None:
    local_runner(workspace)  # the shell's pid, as the test sees it
    engines.toold("daemon", "start", cwd=workspace)
    pid = engines.status(workspace)["pid"]
    call = subprocess.Popen(
        [sys.executable, "-m", "toold", "call", "bash", '{"command": "echo $$ > c.pid; sleep 60"}'],
        cwd=workspace,
        env=engines.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: _pid_in(workspace / "c.pid"), "the call to run")
    os.kill(pid, signal.SIGKILL)
    _, err = call.communicate(timeout=30)
    assert call.returncode != 0
    assert "exited before answering; see its log" in err and ".log" in err
    os.killpg(_pid_in(workspace / "c.pid") or 0, signal.SIGKILL)


def test_two_simultaneous_starts_leave_one_engine(engines: Engines, workspace: Path) -> None:
    starts = [
        subprocess.Popen(
            [sys.executable, "-m", "toold", "daemon", "start", "--json"],
            cwd=workspace,
            env=engines.env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    pids = set()
    for start in starts:
        out, _ = start.communicate(timeout=60)
        assert start.returncode == 0
        pids.add(json.loads(out)["pid"])
    assert len(pids) == 1
    assert live_engines(engines.runtime) == list(pids)


def test_daemon_start_status_stop(engines: Engines, workspace: Path) -> None:
    none = engines.toold("daemon", "status", cwd=workspace)
    assert none.returncode == 3 and "no toold engine" in none.stdout
    assert engines.toold("daemon", "start", cwd=workspace).returncode == 0
    status = engines.toold("daemon", "status", cwd=workspace)
    assert status.returncode == 0
    assert "sessions: 0" in status.stdout and "running jobs: 0" in status.stdout
    pid = engines.status(workspace)["pid"]

    job = json.dumps({"command": "sleep 60", "task_id": "long"})
    engines.toold("call", "background_run", job, cwd=workspace)
    assert "long" in engines.toold("daemon", "status", cwd=workspace).stdout
    stopped = engines.toold("daemon", "stop", cwd=workspace)
    assert stopped.returncode == 0 and "cancelled jobs: long" in stopped.stdout
    wait_gone(pid, "the stopped engine")
    assert engines.toold("daemon", "status", cwd=workspace).returncode == 3
    listed = json.loads(engines.toold("jobs", "--json", cwd=workspace).stdout)
    assert [j["status"] for j in listed if j["jobId"] == "long"] == ["cancelled"]


def test_the_engine_exits_when_idle(engines: Engines, workspace: Path) -> None:
    (workspace / "toold.toml").write_text("[daemon]\nidle_timeout = 0.3\n")
    editor = engines.editor(workspace)
    pid = engines.status(workspace)["pid"]
    editor.tool("todo_read")
    assert process_alive(pid)  # a session is attached: not idle
    editor.close()
    wait_gone(pid, "the idle engine")


def test_the_socket_is_owner_only(engines: Engines, workspace: Path) -> None:
    engines.toold("daemon", "start", cwd=workspace)
    assert stat.S_IMODE(engines.runtime.stat().st_mode) == 0o700
    sockets = [p for p in engines.runtime.iterdir() if p.suffix == ".sock"]
    assert [stat.S_IMODE(p.stat().st_mode) for p in sockets] == [0o600]


def test_a_peer_of_another_uid_is_refused(engines: Engines, workspace: Path) -> None:
    engines.toold("daemon", "start", cwd=workspace)
    (sock,) = [p for p in engines.runtime.iterdir() if p.suffix == ".sock"]
    # Open the folder and socket on purpose: SO_PEERCRED must refuse the peer by itself.
    engines.runtime.chmod(0o711)
    sock.chmod(0o666)
    probe = (
        "import socket, sys\n"
        "peer = socket.socket(socket.AF_UNIX)\n"
        "peer.connect(sys.argv[1])\n"
        "try:\n"
        '    peer.sendall(b\'{"toold": 3, "kind": "status"}\\n\')\n'
        "except (BrokenPipeError, ConnectionResetError):\n"
        "    pass  # refused before it spoke: the refusal is still there to read\n"
        "sys.stdout.buffer.write(peer.makefile('rb').readline())\n"
    )
    # An interpreter nobody may run (this one may live in root's home), as nobody.
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    done = subprocess.run(
        [python, "-I", "-c", probe, str(sock)],
        user=65534,
        group=65534,
        extra_groups=[],
        capture_output=True,
        timeout=30,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply.get("ok") is False and "may not use the engine" in reply["error"], reply
    assert engines.toold("daemon", "status", cwd=workspace).returncode == 0


def test_a_runtime_folder_of_another_user_is_not_used(tmp_path: Path, workspace: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, 65534, 65534)
    env = {**os.environ, "TOOLD_RUNTIME_DIR": str(foreign)}
    env.pop("TOOLD_NO_DAEMON", None)
    done = subprocess.run(
        [sys.executable, "-m", "toold", "call", "todo_read"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "belongs to uid 65534" in done.stderr
    assert list(foreign.iterdir()) == []


def test_progress_goes_to_the_session_that_owns_the_token(
    engines: Engines, workspace: Path
) -> None:
    owner = engines.editor(workspace)
    other = engines.editor(workspace)
    params = {**_bash("echo one; echo two"), "workDoneToken": "tok-1"}
    assert owner.call("tools/call", params)["content"] == "one\ntwo"
    ended = owner.next_message(
        lambda m: m.get("method") == "$/progress" and m["params"]["value"]["kind"] == "end"
    )
    assert ended["params"]["token"] == "tok-1"
    other.call("todos/list", {})  # answered after anything sent to it before
    assert not [m for m in other._pending if m.get("method") == "$/progress"]


def test_the_engine_of_a_removed_folder_exits(engines: Engines, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "toold.toml").write_text("[daemon]\nidle_timeout = 600\n")
    assert engines.toold("daemon", "start", cwd=scratch).returncode == 0
    pid = engines.status(scratch)["pid"]
    shutil.rmtree(scratch)
    wait_gone(pid, "the engine of the removed folder", timeout=30)


def test_a_dead_engines_socket_still_held_open_is_replaced(
    engines: Engines, workspace: Path
) -> None:
    """An engine killed while a child of it still holds its listening socket leaves a
    socket that accepts and never answers; with no engine holding the pid lock, the next
    client starts a fresh engine instead of failing on it."""
    key = hashlib.sha256(os.fsencode(os.path.realpath(workspace))).hexdigest()[:20]
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    held.bind(os.fspath(engines.runtime / f"{key}.sock"))
    held.listen(8)

    def hang_up() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = held.accept()
                conn.close()  # as the holder dying does: the client reads nothing

    threading.Thread(target=hang_up, daemon=True).start()
    try:
        done = engines.toold("call", "todo_read", cwd=workspace)
    finally:
        held.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "No TODO items."
    assert live_engines(engines.runtime) == [engines.status(workspace)["pid"]]


def test_a_client_inside_a_tool_call_is_the_agent(engines: Engines, workspace: Path) -> None:
    """A command a tool call runs (an agent's bash) that attaches to the engine is the
    agent's, whatever origin it claims: its calls are judged as the agent's, it cannot
    switch the mode, change the settings or stop the engine."""
    local_runner(workspace)  # a command that reaches the engine's socket
    editor = engines.editor(workspace)
    pid = engines.status(workspace)["pid"]
    toold = f"{sys.executable} -m toold"
    write = json.dumps({"file_path": "pwned.txt", "content": "x"})
    inside = editor.tool("bash", command=f"{toold} call write_file '{write}'")
    assert not (workspace / "pwned.txt").exists(), inside
    assert "User denied." in str(inside["content"])

    stop = editor.tool("bash", command=f"{toold} daemon stop")
    assert "a tool call cannot stop the engine it runs in" in str(stop["content"])
    assert engines.status(workspace)["pid"] == pid

    mode = editor.tool(
        "bash",
        command=(
            f"{sys.executable} -c 'from toold.client import connect; from pathlib import Path\n"
            'with connect(Path("."), private=False) as c: print(c.request("permissions/setMode", '
            '{"mode": "bypass"}))\''
        ),
    )
    assert "is refused" in str(mode["content"]), mode
    # The user's own call from the editor is still the user's.
    assert not editor.tool("write_file", file_path="mine.txt", content="y")["isError"]


def test_the_engine_of_a_folder_renamed_and_replaced_exits(
    engines: Engines, tmp_path: Path
) -> None:
    """A folder renamed away and another made at its path (a fresh clone) is not the
    folder the engine bound: it exits once no session is attached."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "toold.toml").write_text("[daemon]\nidle_timeout = 600\n")
    assert engines.toold("daemon", "start", cwd=scratch).returncode == 0
    pid = engines.status(scratch)["pid"]
    scratch.rename(tmp_path / "moved")
    scratch.mkdir()
    wait_gone(pid, "the engine of the replaced folder", timeout=30)


def test_an_engine_whose_socket_was_removed_exits_and_a_fresh_one_serves(
    engines: Engines, workspace: Path
) -> None:
    """No client can reach an engine whose socket is gone (``rm`` in the runtime folder):
    it must not hold the workspace's pid lock until its idle timeout, making the next
    client's engine wait for it and give up."""
    (workspace / "toold.toml").write_text("[daemon]\nidle_timeout = 600\n")
    assert engines.toold("daemon", "start", cwd=workspace).returncode == 0
    pid = engines.status(workspace)["pid"]
    (sock,) = [p for p in engines.runtime.iterdir() if p.suffix == ".sock"]
    sock.unlink()
    wait_gone(pid, "the unreachable engine", timeout=30)
    done = engines.toold("call", "todo_read", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert live_engines(engines.runtime) == [engines.status(workspace)["pid"]]


def test_an_engine_that_stops_leaves_a_newer_engines_socket_alone(
    engines: Engines, workspace: Path
) -> None:
    """Its files removed (``rm -rf`` of the runtime folder's contents), an engine lives on
    while the next client starts another; when the old one stops it must not remove the
    socket the new one listens on."""
    editor = engines.editor(workspace)  # keeps the first engine up
    first = engines.status(workspace)["pid"]
    for path in engines.runtime.iterdir():
        path.unlink()
    done = engines.toold("call", "todo_read", cwd=workspace)
    assert done.returncode == 0, done.stderr
    second = engines.status(workspace)["pid"]
    assert second != first
    editor.close()
    wait_gone(first, "the first engine, its files gone", timeout=30)
    assert engines.status(workspace)["pid"] == second
