"""The default runner: bwrap where it works, else subprocess with a notice; what
everyday work needs runs inside it; .git's code-running parts stay read-only."""

from __future__ import annotations

import asyncio
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from tests.e2e.wire import WireClient
from tests.sandbox.conftest import Daemon
from toold.config import TooldConfig
from toold.sandbox.runner import ToolRunner
from toold.sandbox.runners import make_runner
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet

WARNING = 2  # window/showMessage's MessageType.Warning
HOOK = "#!/bin/sh\ntouch {canary}\n"
ATTACKS = [
    "printf '[core]\\n\\tfsmonitor = \"touch {canary}\"\\n' >> .git/config",
    "mkdir -p .git/hooks; printf '{hook}' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit",
    "echo '* filter=evil' > .git/info/attributes",
    "cp .git/config evil; printf '[core]\\n\\tpager = touch {canary}\\n' >> evil; "
    "mv evil .git/config",
    "rm -f .git/config",
    "rm -rf .git/hooks",
    "mv .git moved && mkdir .git && "
    "printf '[core]\\n\\tfsmonitor = touch {canary}\\n' > .git/config",
    "ln -sf /dev/null .git/config",
]


def _git(workspace: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(workspace), *args], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _repository(workspace: Path) -> bytes:
    _git(workspace, "init", "-q")
    _git(workspace, "config", "user.name", "Test")
    _git(workspace, "config", "user.email", "test@example.invalid")
    return (workspace / ".git" / "config").read_bytes()


class Calls:
    """A runner and the builtin tools on one workspace, called in process."""

    def __init__(self, workspace: Path, config: TooldConfig) -> None:
        self.workspace = workspace
        self.runner: ToolRunner = make_runner(config, workspace)
        self.toolset = ToolSet(BuiltinToolProvider(ToolRuntime(workspace, config)).get_tools())
        self.loop = asyncio.new_event_loop()

    def bash(self, command: str, timeout: int = 60) -> str:
        async def run() -> Any:
            return await user_call(
                self.toolset,
                "bash",
                {"command": command, "timeout": timeout},
                runner=self.runner,
            )

        outcome = self.loop.run_until_complete(run())
        return str(outcome.content)

    def close(self) -> None:
        self.loop.run_until_complete(self.runner.close())
        self.loop.close()


@pytest.fixture
def calls(workspace: Path) -> Any:
    opened: list[Calls] = []

    def open_(runner: str = "auto", **execution: Any) -> Calls:
        config = TooldConfig.model_validate({"execution": {"tool_runner": runner, **execution}})
        made = Calls(workspace, config)
        opened.append(made)
        return made

    yield open_
    for made in opened:
        made.close()


def _failing_bwrap(folder: Path) -> dict[str, str]:
    """An environment whose PATH finds a bwrap that fails as one without user namespaces
    does (a real executable, first on PATH; the real bwrap needs the kernel's refusal)."""
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}


@pytest.mark.usefixtures("bwrap_ready")
def test_a_fresh_workspace_runs_its_commands_in_bwrap(workspace: Path) -> None:
    client = WireClient(workspace)
    try:
        client.initialize(
            rootUri=workspace.as_uri(), initializationOptions={"executionEvents": True}
        )
        result = client.tool("bash", command="id -u; cat /proc/1/cmdline | tr '\\0' ' '")
        assert client.notification("execution/event")["params"]["runner"] == "bwrap"
        lines = result["content"].splitlines()
        assert lines[0] == "1000", result  # the sandbox user, whoever runs the daemon
        assert "bwrap" in lines[1] or "toold.sandbox.worker" in lines[1], result
    finally:
        client.close()


def test_without_bwrap_the_default_falls_back_to_subprocess_and_says_why(
    workspace: Path, tmp_path: Path
) -> None:
    env = _failing_bwrap(tmp_path / "bin")
    client = WireClient(workspace, env=env)
    try:
        client.initialize(
            rootUri=workspace.as_uri(), initializationOptions={"executionEvents": True}
        )
        shown = client.notification("window/showMessage")["params"]
        assert shown["type"] == WARNING
        message = shown["message"]
        assert (
            "subprocess runner" in message and "No permissions to create new namespace" in message
        )
        assert "kernel.unprivileged_userns_clone=1" in message
        assert "apt-get install bubblewrap" in message or "bubblewrap" in message
        assert "execution.tool_runner" in message
        result = client.tool("bash", command="echo $$ ran")
        assert result["isError"] is False and result["content"].endswith(" ran"), result
        assert client.notification("execution/event")["params"]["runner"] == "subprocess"
    finally:
        client.close()


def test_an_explicit_bwrap_that_cannot_work_still_fails_closed(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "bwrap"\n')
    canary = workspace / "ran"
    client = WireClient(workspace, env=_failing_bwrap(tmp_path / "bin"))
    try:
        client.initialize(rootUri=workspace.as_uri())
        shown = client.notification("window/showMessage")["params"]
        assert "cannot run tools here" in shown["message"], shown
        result = client.tool("bash", command=f"touch {canary}")
        assert result["content"].startswith("Error: SandboxUnavailable: "), result
        assert not canary.exists()
    finally:
        client.close()


def _attack_and_check(
    bash: Callable[[str], str], workspace: Path, original: bytes, *, one_call: bool = False
) -> None:
    """Every attack (in a call of its own, or all in ``one_call``), then git commit."""
    canary = workspace.parent / "pwned"
    hook = HOOK.format(canary=canary).replace("\n", "\\n")
    commands = [attack.format(canary=canary, hook=hook) for attack in ATTACKS]
    for attack in ["; ".join(commands)] if one_call else commands:
        bash(attack)
        assert (workspace / ".git" / "config").read_bytes() == original, attack
        assert not (workspace / ".git" / "hooks" / "pre-commit").exists(), attack
        assert not (workspace / ".git" / "info" / "attributes").exists(), attack
        assert not (workspace / "moved").exists(), attack
    # git commit still works inside: objects, refs and the index are writable.
    out = bash("echo x > f.txt && git add f.txt && git commit -qm inside && git log --oneline")
    assert out.strip().endswith("inside"), out
    assert _git(workspace, "log", "--format=%s").split() == ["inside"]
    _git(workspace, "status", "--short")  # the user's next git command runs nothing
    assert not canary.exists()


@pytest.mark.usefixtures("bwrap_ready")
def test_git_config_hooks_and_info_are_read_only_in_bwrap(calls: Any, workspace: Path) -> None:
    original = _repository(workspace)
    shutil.rmtree(workspace / ".git" / "hooks")  # a missing part gets a read-only stand-in
    sandbox = calls("bwrap")
    _attack_and_check(sandbox.bash, workspace, original)
    refused = sandbox.bash("echo x >> .git/config")
    assert "Read-only file system" in refused and 'tool_runner = "subprocess"' in refused


@pytest.mark.usefixtures("docker_ready")
def test_git_config_hooks_and_info_are_read_only_in_docker(daemon: Daemon, workspace: Path) -> None:
    original = _repository(workspace)
    client = daemon("docker")  # through a daemon: docker-py's sockets stay there
    bash = lambda c: str(client.tool("bash", command=c)["content"])  # noqa: E731
    _attack_and_check(bash, workspace, original, one_call=True)


@pytest.mark.usefixtures("bwrap_ready")
def test_a_repository_made_inside_is_protected_from_the_next_call_on(
    calls: Any, workspace: Path
) -> None:
    sandbox = calls()
    assert sandbox.runner.name == "bwrap"
    out = sandbox.bash(
        "git init -q && git config user.name T && git config user.email t@e && echo ok"
    )
    assert out.strip() == "ok", out
    original = (workspace / ".git" / "config").read_bytes()
    _attack_and_check(sandbox.bash, workspace, original)


@pytest.mark.usefixtures("bwrap_ready")
def test_everyday_work_runs_in_the_default_sandbox(calls: Any, workspace: Path) -> None:
    (workspace / "test_tiny.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    (workspace / "Makefile").write_text("all:\n\techo built > built.txt\n")
    sandbox = calls()
    assert sandbox.runner.name == "bwrap"
    venv = sandbox.bash(
        f"{sys.executable} -m venv --without-pip --system-site-packages .venv && "
        ".venv/bin/python -m pytest -q -p no:cacheprovider test_tiny.py",
        timeout=120,
    )
    assert "1 passed" in venv, venv
    assert "built" in sandbox.bash("make && cat built.txt")
    git = sandbox.bash(
        "git init -q && git add Makefile && git commit -qm first && git log --format=%s"
    )
    assert git.strip().endswith("first"), git  # the user's name and email crossed
    if shutil.which("node") and shutil.which("npm"):
        scripts = '"scripts": {"test": "node -e \\"process.exit(0)\\""}'
        (workspace / "package.json").write_text(
            f'{{"name": "tiny", "version": "1.0.0", {scripts}}}'
        )
        node = sandbox.bash("node -e 'console.log(6 * 7)' && npm test --silent && echo npm-ok")
        assert "42" in node and "npm-ok" in node, node
    if shutil.which("rustc") and shutil.which("cargo"):  # rustup's proxies need RUSTUP_HOME
        rust = sandbox.bash("rustc --version && cargo --version")
        assert rust.startswith("rustc ") and "\ncargo " in rust, rust
    for secret in (".ssh", ".aws", ".gnupg", ".config/gh", ".netrc", ".git-credentials", ".npmrc"):
        seen = sandbox.bash(f"ls -d {Path.home() / secret} 2>&1 || true")
        assert "No such file or directory" in seen, (secret, seen)


@pytest.mark.usefixtures("bwrap_ready")
def test_toolchains_cross_read_only_and_their_secrets_do_not(
    calls: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    tool = home / ".cargo" / "bin" / "hello-tool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho tool-ran\n")
    tool.chmod(0o755)
    (home / ".rustup" / "toolchains").mkdir(parents=True)
    secrets = {
        ".cargo/credentials.toml": "token-cargo-5b1",
        ".ssh/id_ed25519": "key-ssh-77c",
        ".config/gh/hosts.yml": "token-gh-90a",
        ".aws/credentials": "key-aws-3d2",
        ".npmrc": "token-npm-41e",
        ".git-credentials": "token-git-e02",
    }
    for name, value in secrets.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(value)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    monkeypatch.delenv("RUSTUP_HOME", raising=False)
    sandbox = calls()
    assert sandbox.runner.name == "bwrap"
    out = sandbox.bash(f"hello-tool; echo rustup=$RUSTUP_HOME; touch {tool.parent}/new; true")
    assert "tool-ran" in out and f"rustup={home / '.rustup'}" in out, out
    assert "Read-only file system" in out and not (tool.parent / "new").exists(), out
    names = " ".join(str(home / name) for name in secrets)
    seen = sandbox.bash(f"cat {names} 2>&1")
    for value in secrets.values():
        assert value not in seen, seen
    listed = sandbox.bash(f"ls -a {home} {home / '.cargo'}").split()
    assert {".ssh", ".aws", ".config", ".npmrc", "credentials.toml"}.isdisjoint(listed), listed
    assert {".cargo", ".rustup", "bin"} <= set(listed), listed


@pytest.mark.usefixtures("bwrap_ready")
def test_the_web_tools_reach_the_network_and_commands_do_not(
    workspace: Path, tcp_server: Any
) -> None:
    """auto's bwrap: bash has no network; http_request runs in the daemon under [http]."""

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = TooldConfig.model_validate({"http": {"allow_hosts": ["127.0.0.1"]}})
    calls = Calls(workspace, config)
    try:
        assert calls.runner.name == "bwrap"
        url = f"http://127.0.0.1:{server.server_address[1]}/"

        async def fetch() -> Any:
            return await user_call(calls.toolset, "http_request", {"url": url}, runner=calls.runner)

        assert "hello" in str(calls.loop.run_until_complete(fetch()).content)
        port = tcp_server.getsockname()[1]
        shell = calls.bash(f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
        assert "connected" not in shell and "Connection refused" in shell, shell
    finally:
        calls.close()
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.usefixtures("bwrap_ready")
@pytest.mark.parametrize(
    "made",
    [
        "git init -q && printf '[core]\\n\\tfsmonitor = \"touch {canary}\"\\n' >> .git/config",
        "git init -q && printf '#!/bin/sh\\ntouch {canary}\\n' > .git/hooks/pre-commit"
        " && chmod +x .git/hooks/pre-commit",
        "mkdir -p evil/hooks && git init -q --bare evil && ln -s evil .git"
        " && printf '[core]\\n\\tfsmonitor = \"touch {canary}\"\\n' >> evil/config",
    ],
)
def test_a_repository_a_command_makes_runs_nothing_on_the_host(
    calls: Any, workspace: Path, made: str
) -> None:
    """The call that makes .git ran where the view could not protect one yet: a repository
    it leaves that would run commands is moved aside before the user's git sees it."""
    canary = workspace.parent / "pwned"
    sandbox = calls()
    assert sandbox.runner.name == "bwrap"
    out = sandbox.bash(made.format(canary=canary) + " && echo made")
    assert "made" in out and "moved to .git-quarantined-by-toold-" in out, out
    assert not os.path.lexists(workspace / ".git")
    subprocess.run(["git", "status"], cwd=workspace, capture_output=True, timeout=30)
    (workspace / "f").write_text("x")
    subprocess.run(["git", "add", "f"], cwd=workspace, capture_output=True, timeout=30)
    assert not canary.exists()
    assert list(workspace.glob(".git-quarantined-by-toold-*"))  # kept for the user to see


def test_every_session_of_the_engine_is_told_of_the_fallback(
    workspace: Path, tmp_path: Path
) -> None:
    """The engine binds before any session attaches: each editor hears it as it comes."""
    from tests.engine.support import Engines

    box = Engines()
    box.env["PATH"] = _failing_bwrap(tmp_path / "bin")["PATH"]
    try:
        for _ in range(2):
            editor = box.editor(workspace)
            shown = editor.notification("window/showMessage")["params"]
            assert shown["type"] == WARNING, shown
            assert "subprocess runner" in shown["message"], shown
            assert "No permissions to create new namespace" in shown["message"], shown
        assert editor.tool("bash", command="echo ran")["content"] == "ran"
    finally:
        box.close()


@pytest.mark.parametrize("runner", ["subprocess", "local"])
def test_a_network_allow_list_the_runner_cannot_enforce_is_said(
    workspace: Path, runner: str
) -> None:
    (workspace / "toold.toml").write_text(
        f'[execution]\ntool_runner = "{runner}"\n\n[execution.network]\nallow = ["pypi.org"]\n'
    )
    client = WireClient(workspace)
    try:
        client.initialize(rootUri=workspace.as_uri())
        message = client.notification("window/showMessage")["params"]["message"]
        assert "allow-list is not enforced" in message and f"the {runner} runner" in message
        assert "bwrap or docker" in message
    finally:
        client.close()


def test_a_network_allow_list_under_bwrap_gets_no_such_notice(workspace: Path) -> None:
    config = TooldConfig.model_validate(
        {"execution": {"tool_runner": "bwrap", "network": {"allow": ["pypi.org"]}}}
    )
    runner = make_runner(config, workspace)
    try:
        assert runner.notice is None
    finally:
        asyncio.run(runner.close())
