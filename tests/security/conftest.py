"""Shared fixtures of the attack suite: the real daemon over stdio, an agent's calls, a user
who answers every prompt with Deny, and canary files that must survive.

``daemon_for(mode, allow=..., deny=...)`` starts (once per configuration, for the whole
session) ``toold serve`` in a fresh workspace whose toold.toml holds that [permissions]
section, initialised with the window capability so the daemon can ask. Every
``window/showMessageRequest`` is answered "Deny" and recorded in ``asked``.
``call(tool, args)`` sends tools/call as origin ``agent``; ``damage()`` lists canaries that
changed (and restores them, so one damaged case does not hide the next).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import DEFAULT_TIMEOUT, WireClient

DENIED = "User denied."
CANARY_FILES = {
    "canary.txt": "canary\n",
    "a": "file a\n",
    "b": "file b\n",
    ".env": "API_TOKEN=canary-secret\n",
    "secrets/key.txt": "secret key\n",
    "d/inner.txt": "inside d\n",
    "d/sub/deep.txt": "deep inside d\n",
    "src/main.py": "print('hello')\n",
    "f": "line one\nline two\n",
    ".toold/keep.txt": "toold's own folder\n",
}
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


class DenyingClient(WireClient):
    """A WireClient whose user answers every permission prompt with Deny (or ``answer``)."""

    def __init__(self, workspace: Path, env: dict[str, str], answer: str = "Deny") -> None:
        super().__init__(workspace, env=env)
        self.answer = answer
        self.asked: list[dict[str, Any]] = []
        self._write = threading.Lock()
        # No message arrives before initialize, so swapping the queue now is race-free.
        self.messages = _Answering(self)

    def send_raw(self, data: bytes) -> None:
        """Write bytes; the reader thread answers prompts, so writes take a lock."""
        with self._write:
            super().send_raw(data)


class _Answering(queue.Queue[dict[str, Any] | None]):
    """Answers the daemon's requests on the reader thread: prompts get Deny, others null."""

    def __init__(self, client: DenyingClient) -> None:
        super().__init__()
        self.client = client

    def put(
        self, item: dict[str, Any] | None, block: bool = True, timeout: float | None = None
    ) -> None:
        if isinstance(item, dict) and "method" in item and "id" in item:
            result: Any = None
            if item["method"] == "window/showMessageRequest":
                self.client.asked.append(item.get("params") or {})
                result = {"title": self.client.answer}
            self.client.send({"jsonrpc": "2.0", "id": item["id"], "result": result})
            return
        super().put(item, block, timeout)


def _toml_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def config_text(mode: str, allow: tuple[str, ...], deny: tuple[str, ...]) -> str:
    """toold.toml's text for one [permissions] section, on the local runner: these tests
    judge the guard alone, whose failures show as damage outside the workspace (the
    remote, the canaries), which a sandbox would hide."""
    return (
        f'[permissions]\nmode = "{mode}"\nallow = {_toml_list(allow)}\n'
        f"deny = {_toml_list(deny)}\nask_timeout = 20\n"
        '[execution]\ntool_runner = "local"\n'
    )


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"


@dataclass
class GuardedDaemon:
    """One running daemon, its workspace and what must survive in it."""

    workspace: Path
    remote: Path
    client: DenyingClient
    config: str
    expected: dict[str, str] = field(default_factory=dict)

    def call(self, tool: str, args: Any, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """tools/call as the agent; returns the raw result (or error) object."""
        reply = self.client.response(
            self.client.request("tools/call", {"name": tool, "arguments": args, "origin": "agent"}),
            timeout=timeout,
        )
        return reply.get("result") or {"error": reply.get("error")}

    def snapshot(self) -> dict[str, str]:
        """Digest of every canary, the configuration and the remote's refs."""
        files = {name: _digest(self.workspace / name) for name in CANARY_FILES}
        files["toold.toml"] = _digest(self.workspace / "toold.toml")
        files["remote refs"] = _remote_refs(self.remote)
        return files

    def damage(self) -> list[str]:
        """Canaries that changed since the daemon started; each is put back."""
        now = self.snapshot()
        changed = [name for name, digest in now.items() if digest != self.expected[name]]
        if changed:
            _plant(self.workspace, self.config)
            _reset_remote(self.workspace, self.remote)
        for stray in ("pwned", "out.txt", "x.xml"):
            (self.workspace / stray).unlink(missing_ok=True)
        return changed
        return changed


def _remote_refs(remote: Path) -> str:
    out = subprocess.run(
        ["git", "--git-dir", str(remote), "for-each-ref", "--format=%(refname) %(objectname)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def _plant(workspace: Path, config: str) -> None:
    for name, text in CANARY_FILES.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (workspace / "toold.toml").write_text(config, encoding="utf-8")


def _reset_remote(workspace: Path, remote: Path) -> None:
    shutil.rmtree(remote, ignore_errors=True)
    env = {**os.environ, **_GIT_ENV}
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, env=env)
    subprocess.run(
        ["git", "-C", str(workspace), "push", "-q", "origin", "main:refs/heads/keep"],
        check=True,
        env=env,
        capture_output=True,
    )


def _start(
    root: Path,
    mode: str,
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    answer: str,
    extra_env: tuple[tuple[str, str], ...],
    extra_config: str,
) -> GuardedDaemon:
    workspace, remote = root / "ws", root / "remote.git"
    workspace.mkdir(parents=True)
    config = config_text(mode, allow, deny) + extra_config
    _plant(workspace, config)
    env = {**os.environ, **_GIT_ENV}
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "canary.txt", "a", "b", "src"],
        ["git", "commit", "-q", "-m", "init"],
        ["git", "remote", "add", "origin", str(remote)],
    ):
        subprocess.run(argv, cwd=workspace, check=True, env=env, capture_output=True)
    _reset_remote(workspace, remote)
    client = DenyingClient(workspace, env={**env, **dict(extra_env)}, answer=answer)
    client.initialize(
        rootUri=workspace.as_uri(),
        capabilities={"window": {"showMessage": {"messageActionItem": {}}}},
    )
    daemon = GuardedDaemon(workspace, remote, client, config)
    daemon.expected = daemon.snapshot()
    return daemon


DaemonFactory = Callable[..., GuardedDaemon]


@pytest.fixture(scope="session")
def daemon_for(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonFactory]:
    """Start (once per configuration) a guarded daemon: ``daemon_for("auto", deny=(...))``.

    ``answer`` is the user's answer to every prompt ("Deny" unless a test needs another);
    ``extra_env`` adds variables to the daemon's environment (an API server, say);
    ``extra_config`` is more toold.toml (hooks, say).
    """
    started: dict[tuple[Any, ...], GuardedDaemon] = {}

    def get(
        mode: str = "default",
        allow: tuple[str, ...] = (),
        deny: tuple[str, ...] = (),
        answer: str = "Deny",
        extra_env: tuple[tuple[str, str], ...] = (),
        extra_config: str = "",
    ) -> GuardedDaemon:
        key = (mode, tuple(allow), tuple(deny), answer, tuple(extra_env), extra_config)
        if key not in started:
            started[key] = _start(tmp_path_factory.mktemp(f"guard-{mode}"), *key)
        return started[key]

    yield get
    for daemon in started.values():
        daemon.client.close()


HELD = {"denied_by_rule", "denied_by_user", "refused"}
"""tools/call's ``decision`` for a call that did not run: a rule, plan mode or nobody to ask;
the user's no; or arguments, files or a command the guard could not judge."""


def held(result: dict[str, Any]) -> bool:
    """Whether the daemon refused the call (its ``decision`` says it did not run)."""
    if "error" in result:
        return True
    return bool(result.get("isError")) and result.get("decision") in HELD
