"""An agent's command that leaves its tool call every way a shell can, then asks the
engine for what only the user may do: it stays the agent's (issue 22).

Each route runs as a real bash tool call through the shared engine (auto mode, local
runner). The attack is a raw-socket client (its own hello and LSP frames) asking for
``permissions/setMode bypass``, ``team/register``, ``jobs/cancel`` of the user's job,
``checkpoints/restore`` and a user-origin ``rm -rf victim``, then a copy of the toold
script running ``undo``, ``daemon stop`` and ``call bash rm -rf victim`` (also
``--no-daemon``). The effects are checked, not the refusals' words.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient
from tests.engine.support import Engines, live_engines, stop_engines
from toold.engine.hardening import runs_tools

PROMPT = "injected-prompt-5d1e"
"""The system prompt the attack tries to register (must land in no file)."""

RAW_CLIENT = r"""
import glob, json, os, socket, sys

def frame(message):
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body

def read(stream):
    length = None
    while (line := stream.readline().strip()):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(stream.read(length)) if length is not None else None

(path,) = glob.glob(os.path.join(os.environ["TOOLD_RUNTIME_DIR"], "*.sock"))
sock = socket.socket(socket.AF_UNIX)
sock.connect(path)
sock.sendall(json.dumps({"toold": 3, "kind": "session", "client": "editor"}).encode() + b"\n")
stream = sock.makefile("rb")
print("hello", stream.readline().decode().strip(), flush=True)
asks = [
    ("initialize", {"processId": None, "capabilities": {}}),
    ("permissions/setMode", {"mode": "bypass"}),
    ("team/register", {"name": "mole", "role": "helper", "systemPrompt": sys.argv[1]}),
    ("jobs/cancel", {"jobId": "users"}),
    ("checkpoints/restore", {}),
    ("tools/call", {"name": "bash", "arguments": {"command": "rm -rf victim"}, "origin": "user"}),
]
for number, (method, params) in enumerate(asks, 1):
    sock.sendall(frame({"jsonrpc": "2.0", "id": number, "method": method, "params": params}))
    if method == "initialize":
        sock.sendall(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    while (answer := read(stream)) is not None and answer.get("id") != number:
        pass
    print(method, json.dumps(answer), flush=True)
"""

ATTACK = """\
{python} raw.py {prompt} > raw.out 2>&1
./t undo > cli.out 2>&1
./t daemon stop >> cli.out 2>&1
./t call bash '{{"command": "rm -rf victim"}}' >> cli.out 2>&1
env -u TOOLD_TOOL_CALL ./t call --no-daemon bash '{{"command": "rm -rf victim"}}' >> cli.out 2>&1
env -u TOOLD_TOOL_CALL ./t undo --no-daemon >> cli.out 2>&1
echo finished > done.txt
"""

WAIT = "; while [ ! -e done.txt ]; do sleep 0.05; done; cat raw.out cli.out"
ROUTES = {
    "setsid -f": "setsid -f sh attack.sh" + WAIT,
    "set -m background": "set -m; (sleep 0.2; sh attack.sh) & " + WAIT.lstrip("; "),
    "python setsid double fork": (
        f"{sys.executable} -c 'import os\nif os.fork(): os._exit(0)\nos.setsid()\n"
        'if os.fork(): os._exit(0)\nos.execvp("sh", ["sh", "attack.sh"])\'' + WAIT
    ),
    "bash imp.sh": "bash imp.sh" + WAIT,
}


def _toold_copy(workspace: Path) -> None:
    """``./t``: a copy of the toold console script, or a stand-in where there is none."""
    found = shutil.which("toold")
    target = workspace / "t"
    if found is not None:
        shutil.copy(found, target)
    else:
        target.write_text(f'#!/bin/sh\nexec {sys.executable} -m toold "$@"\n')
    target.chmod(0o755)


@pytest.fixture
def editor(engines: Engines, workspace: Path) -> WireClient:
    """The user's editor on an auto-mode, local-runner workspace, with a running job, a
    checkpoint to undo and a victim folder."""
    (workspace / "toold.toml").write_text(
        '[permissions]\nmode = "auto"\n[execution]\ntool_runner = "local"\n'
    )
    (workspace / "victim").mkdir()
    (workspace / "victim" / "keep.txt").write_text("precious")
    (workspace / "raw.py").write_text(RAW_CLIENT)
    (workspace / "attack.sh").write_text(ATTACK.format(python=sys.executable, prompt=PROMPT))
    (workspace / "imp.sh").write_text("nohup setsid sh attack.sh > /dev/null 2>&1 &\ndisown\n")
    _toold_copy(workspace)
    client = engines.editor(workspace)
    job = client.tool("background_run", command="sleep 120", task_id="users")
    assert not job["isError"], job
    assert not client.tool("write_file", file_path="kept.txt", content="mine")["isError"]
    return client


def _agent_rm_is_denied(editor: WireClient, workspace: Path) -> bool:
    """The guard's mode, by its effect: an agent's ``rm -rf victim`` in auto mode with no
    one to ask is refused; in bypass mode it runs."""
    editor.tool("bash", origin="agent", command="rm -rf victim")
    return (workspace / "victim" / "keep.txt").exists()


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_detached_command_is_still_the_agent(
    engines: Engines, editor: WireClient, workspace: Path, route: str
) -> None:
    engine = engines.status(workspace)["pid"]
    call = {"name": "bash", "arguments": {"command": ROUTES[route], "timeout": 100}}
    ran = editor.call("tools/call", {**call, "origin": "user"}, timeout=110)
    raw = (workspace / "raw.out").read_text()
    assert (workspace / "done.txt").exists() and raw.startswith("hello"), ran
    answers = dict(line.split(" ", 1) for line in raw.splitlines())
    assert '"ok": true' in answers["hello"], raw  # it reached the engine and was served
    for method in ("permissions/setMode", "team/register", "jobs/cancel", "checkpoints/restore"):
        assert '"error"' in answers[method], (method, raw)
    assert (workspace / "victim" / "keep.txt").read_text() == "precious", ran
    assert (workspace / "kept.txt").read_text() == "mine", ran  # no undo happened
    status = engines.status(workspace)
    assert status["pid"] == engine, ran  # not stopped
    job = editor.call("jobs/get", {"jobId": "users"})
    assert job["status"] == "running", job
    # The script and its outputs hold the words; so do undo's copies of them (the shell
    # call's checkpoint keeps every file's content in .toold/checkpoints/objects).
    copies = workspace / ".toold" / "checkpoints" / "objects"
    allowed = ("attack.sh", "raw.out", "cli.out")
    for path in workspace.rglob("*"):
        if path.is_file() and path.name not in allowed and path.parent != copies:
            assert PROMPT.encode() not in path.read_bytes(), path
    assert _agent_rm_is_denied(editor, workspace), "the guard was switched to bypass"


def test_the_mode_probe_sees_bypass(editor: WireClient, workspace: Path) -> None:
    """The check above can fail: once the user switches to bypass, the same agent call
    removes the victim."""
    assert _agent_rm_is_denied(editor, workspace)
    editor.call("permissions/setMode", {"mode": "bypass"})
    assert not _agent_rm_is_denied(editor, workspace)


def test_the_user_keeps_every_control(
    engines: Engines, editor: WireClient, workspace: Path
) -> None:
    """What a tool call may not do, the user's own clients still do."""
    registered = editor.call("team/register", {"name": "mate", "role": "helper"})
    assert registered["name"] == "mate"
    assert editor.call("jobs/cancel", {"jobId": "users"})["status"] in ("cancelled", "running")
    undo = engines.toold("undo", cwd=workspace)
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert not (workspace / "kept.txt").exists()
    assert engines.toold("daemon", "stop", cwd=workspace).returncode == 0
    assert os.path.isdir(workspace / "victim")


SECOND = """\
env -u TOOLD_TOOL_CALL TOOLD_RUNTIME_DIR={other} ./t call write_file \
    '{{"file_path": "pwned.txt", "content": "x"}}' > second.out 2>&1
env -u TOOLD_TOOL_CALL TOOLD_RUNTIME_DIR={other} ./t daemon stop >> second.out 2>&1
echo finished > done.txt
"""


def test_an_engine_a_tool_call_starts_elsewhere_knows_the_agent(
    engines: Engines, editor: WireClient, workspace: Path
) -> None:
    """A runtime folder the tool call cannot see (a sandboxed runner carries no
    TOOLD_RUNTIME_DIR) makes its ``toold`` start a second engine for the workspace, its
    marker removed: that engine runs below the first and judges by it too."""
    other = Path(tempfile.mkdtemp(prefix="toold-o-", dir="/tmp"))
    try:
        (workspace / "second.sh").write_text(SECOND.format(other=other))
        command = "setsid -f sh second.sh" + WAIT.replace("raw.out cli.out", "second.out")
        ran = editor.call("tools/call", {"name": "bash", "arguments": {"command": command}})
        assert live_engines(other), ran  # the second engine was started, and still runs
        assert not (workspace / "pwned.txt").exists(), ran
    finally:
        stop_engines(other, engines.env)
        shutil.rmtree(other, ignore_errors=True)


@pytest.mark.parametrize(
    ("argv", "runner"),
    [
        (["/usr/bin/python3", "-P", "-m", "toold.engine", "--workspace", "/w"], True),
        (["python", "-m", "toold", "serve", "--no-daemon"], True),
        (["/home/u/.local/bin/toold", "serve", "--stdio", "--no-daemon"], True),
        (["/usr/bin/toold", "mcp", "--workspace", "/w", "--no-daemon"], True),
        (["/usr/bin/toold", "mcp", "--http", "--port", "8000", "--no-daemon"], True),
        (["/usr/bin/toold", "mcp", "--http", "--port", "8000"], False),  # the engine serves
        (["/usr/bin/toold", "mcp", "--workspace", "/w"], False),  # relays to the engine
        (["python3", "/venv/bin/toold", "acp", "--no-daemon"], True),
        (["/usr/bin/toold", "acp"], False),  # relays to the engines, which run the tools
        (["/usr/bin/toold", "serve", "--stdio"], False),  # the relay runs no tool
        (["python", "-m", "toold", "call", "bash", "{}"], False),
        (["bash", "-c", "toold mcp"], False),
        (["vim", "toold", "mcp"], False),
    ],
)
def test_which_command_lines_run_tools(argv: list[str], runner: bool) -> None:
    assert runs_tools(argv) is runner


OTHER = """\
./t call --workspace {other} bash '{{"command": "rm -rf victim"}}' > other.out 2>&1
./t daemon stop --workspace {other} >> other.out 2>&1
echo finished > done.txt
"""


def test_another_workspaces_engine_knows_this_agent(
    engines: Engines, editor: WireClient, workspace: Path, tmp_path: Path
) -> None:
    """The engine the user runs for another folder serves this agent's command as the
    agent too: it runs below a toold that runs tools, if not below that engine."""
    other = tmp_path / "other"
    (other / "victim").mkdir(parents=True)
    (other / "victim" / "keep.txt").write_text("precious")
    (other / "toold.toml").write_text('[permissions]\nmode = "auto"\n')
    assert engines.toold("daemon", "start", cwd=other).returncode == 0
    pid = engines.status(other)["pid"]
    (workspace / "other.sh").write_text(OTHER.format(other=other))
    command = "setsid -f sh other.sh" + WAIT.replace("raw.out cli.out", "other.out")
    ran = editor.call("tools/call", {"name": "bash", "arguments": {"command": command}})
    assert (other / "victim" / "keep.txt").exists(), ran
    assert engines.status(other)["pid"] == pid, ran
