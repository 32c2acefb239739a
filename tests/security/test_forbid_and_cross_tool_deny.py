"""A rule on a file holds for every tool that can reach it; a forbid rule never runs.

The rules name read_file only (``read_file(prefix:.env*)``, ``read_file(prefix:secrets/*)``),
in auto mode, where shell commands that are not dangerous run unasked. Every way of
reading the secrets is generated: file tools, folder searches, and shell lines built from
readers x spellings of the path x forms (an argument, a redirection, a wrapper, a folder
moved to, a job). Each shell line is first run by real bash in a copy of the workspace,
to prove it does print the secret; then through the gateway of a bound workspace
(real tools, real bash) whose user answers every prompt Deny. The effect is checked:
the secret is in no result, no job was started, and (forbid) nobody was asked.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.security.conftest import DenyingClient
from toold.assembly import bind
from toold.tools.context import CallContext
from toold.workspace import WorkspaceState

SECRETS = {".env": "API_TOKEN=canary-env-9137\n", "secrets/key.txt": "canary-key-4412\n"}
PLAIN = {"src/main.py": "print('hello-plain')\n", "d/inner.txt": "inside d\n"}
RULES = ["read_file(prefix:.env*)", "read_file(prefix:secrets/*)"]

# Spellings of each secret's path, as bash reads them ("{root}": the workspace's path).
SPELLINGS = {
    ".env": [
        ".env",
        "./.env",
        "d/../.env",
        "'.env'",
        '".env"',
        ".e''nv",
        ".e\\nv",
        ".e*",
        ".en[v]",
        '"$PWD"/.env',
        "$(printf .env)",
        "`echo .env`",
        "{.env,/dev/null}",
        "{root}/.env",
        "{root}/d/../.env",
        "{root}//.env",
    ],
    "secrets/key.txt": [
        "secrets/key.txt",
        "./secrets/key.txt",
        "secrets/*",
        "secrets/k*",
        "s*/key.txt",
        "'secrets'/key.txt",
        "secrets//key.txt",
        "{root}/secrets/key.txt",
        "{root}/secrets/*",
    ],
}
READERS = [
    "cat {p}",
    "head -n 5 {p}",
    "tail -n 5 {p}",
    "sed -n p {p}",
    "awk 1 {p}",
    "grep -h . {p}",
    "tac {p}",
    "base64 {p} | base64 -d",
    "cat < {p}",
    "< {p} cat",
    "cat 0< {p}",
    "env cat {p}",
    "timeout 5 cat {p}",
    "cp {p} out.txt && cat out.txt",
    "while read -r l; do echo $l; done < {p}",
    "F={p}; cat $F",
]
PLAIN_ARGUMENT = ("cat {p}", "head", "tail", "sed", "awk", "grep", "tac", "env", "timeout")
# Lines that reach every secret without naming one.
FOLDER_READERS = [
    "grep -r canary .",
    "grep -rh canary",
    "rg -uu --no-filename canary",
    "find . -type f -exec cat {} +",
    "tar cf - . | tar xOf -",
    "cat $(find . -type f)",
    "ls -A | xargs cat 2>/dev/null; cat */*",
    "cd secrets && cat key.txt",
    "cd d && cat ../.env",
    "cd / && cat {rel}/.env",
    "git -C secrets --no-pager diff --no-index /dev/null key.txt",
    "sh -c 'cat .env'",
    'bash -c "cat secrets/key.txt"',
]


def shell_lines() -> list[tuple[str, str]]:
    """(command line with ``{root}``/``{rel}`` for the workspace, the secret it prints:
    ``*`` for any), generated."""
    lines: list[tuple[str, str]] = []
    for secret, spellings in SPELLINGS.items():
        for spelling in spellings:
            for reader in READERS:
                if spelling.startswith("{.") and not reader.startswith(PLAIN_ARGUMENT):
                    continue  # a brace makes two words: not a redirection target, one file
                lines.append((reader.replace("{p}", spelling), secret))
    readers = [r for r in FOLDER_READERS if shutil.which("rg") or not r.startswith("rg ")]
    return lines + [(line, "*") for line in readers]


def expand(line: str, root: Path) -> str:
    """A generated line for the workspace at ``root``."""
    return line.replace("{root}", str(root)).replace("{rel}", str(root).lstrip("/"))


def plant(workspace: Path) -> None:
    for name, text in {**SECRETS, **PLAIN}.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def secrets_in(text: str) -> list[str]:
    return [name for name, content in SECRETS.items() if content.strip() in text]


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    """The generated lines, each proved (by real bash) to print its secret."""
    copy = tmp_path_factory.mktemp("bash-proof").resolve()
    plant(copy)
    generated = shell_lines()
    # One bash runs them all, each in a subshell of its own, its output between markers.
    script = "".join(
        f"( {expand(line, copy)} ) </dev/null 2>/dev/null; rm -f out.txt; echo; echo @@{i}@@\n"
        for i, (line, _) in enumerate(generated)
    )
    out = subprocess.run(
        ["bash", "-c", script], cwd=copy, capture_output=True, text=True, timeout=100
    ).stdout
    missed = []
    for i, (line, secret) in enumerate(generated):
        printed, _, out = out.partition(f"@@{i}@@\n")
        found = secrets_in(printed)
        if not found or (secret != "*" and secret not in found):
            missed.append(line)
    assert not missed, f"these lines do not print a secret in real bash: {missed}"
    return generated


@dataclass
class DenyAsker:
    """The user: every prompt is answered Deny, and recorded."""

    asked: list[tuple[str, Any, str]] = field(default_factory=list)

    async def __call__(self, tool: str, args: Any, reason: str) -> str:
        self.asked.append((tool, args, reason))
        return "deny"


@dataclass
class Bound:
    state: WorkspaceState
    asker: DenyAsker
    root: Path


@pytest.fixture(params=["deny", "forbid"])
def bound(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Bound]:
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    plant(workspace)
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    asker = DenyAsker()
    permissions = {"mode": "auto", request.param: RULES}
    state = bind(workspace, {"permissions": permissions}, lambda *_: None, pytest.fail, ask=asker)
    yield Bound(state, asker, workspace)
    asyncio.run(state.aclose())


def run_calls(bound: Bound, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[Any, str]]:
    """Each call through the gateway as the agent: (call, result text)."""

    async def main() -> list[tuple[Any, str]]:
        out = []
        for tool, args in calls:
            outcome = await bound.state.gateway.call(tool, args, CallContext(origin="agent"))
            out.append(((tool, args), str(outcome.content)))
        return out

    return asyncio.run(main())


def forbidding(bound: Bound) -> bool:
    return bool(bound.state.guard.forbid)


def test_every_shell_line_that_prints_a_secret_is_held(
    bound: Bound, lines: list[tuple[str, str]]
) -> None:
    calls = [("bash", {"command": expand(line, bound.root)}) for line, _ in lines]
    results = run_calls(bound, calls)
    leaked = [call for call, text in results if secrets_in(text)]
    assert not leaked, f"{len(leaked)} of {len(calls)} lines printed a secret: {leaked[:5]}"
    asked = len(bound.asker.asked)
    assert asked == (0 if forbidding(bound) else len(calls)), asked


def test_background_jobs_of_those_lines_never_start(
    bound: Bound, lines: list[tuple[str, str]]
) -> None:
    sample = lines[:: max(1, len(lines) // 40)]  # every reader form and spelling kind
    calls = [("background_run", {"command": expand(line, bound.root)}) for line, _ in sample]
    run_calls(bound, calls)
    started = [job["command"] for job in bound.state.jobs.list()]
    assert not started, f"jobs started: {started[:5]}"
    # A job that reads no secret does start: the rules are not refusing every job.
    run_calls(bound, [("background_run", {"command": "cat src/main.py"})])
    assert [job["command"] for job in bound.state.jobs.list()] == ["cat src/main.py"]


TOOL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"file_path": ".env"}),
    ("read_file", {"file_path": "./.env"}),
    ("read_file", {"file_path": "d/../.env"}),
    ("read_file", {"file_path": ".env.local"}),
    ("read_file", {"file_path": "secrets/key.txt"}),
    ("grep", {"pattern": "canary"}),
    ("grep", {"pattern": "canary", "path": "."}),
    ("grep", {"pattern": "canary", "path": "secrets"}),
    ("grep", {"pattern": "canary", "path": ".env"}),
    ("grep", {"pattern": "canary", "path": "secrets/key.txt"}),
    ("grep_search", {"query": "canary"}),
    ("grep_search", {"query": "canary", "path": "secrets"}),
    ("grep_search", {"query": "canary", "path": "./secrets/"}),
    ("glob", {"pattern": "**/key.txt"}),
    ("glob", {"pattern": "*", "path": "secrets"}),
    ("glob_search", {"pattern": "**/key.txt"}),
    ("list_dir", {"path": "secrets"}),
    ("list_dir", {"path": "."}),
    ("file_info", {"path": "secrets/key.txt"}),
]


def test_every_file_tool_that_reaches_a_secret_is_held(bound: Bound) -> None:
    (bound.root / ".env.local").write_text(SECRETS[".env"], encoding="utf-8")
    results = run_calls(bound, TOOL_CALLS)
    leaked = [call for call, text in results if secrets_in(text) or "key.txt" in text]
    assert not leaked, leaked
    assert len(bound.asker.asked) == (0 if forbidding(bound) else len(TOOL_CALLS))


def test_what_reaches_no_secret_still_runs_unasked(bound: Bound) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"file_path": "src/main.py"}),
        ("grep", {"pattern": "hello", "path": "src"}),
        ("list_dir", {"path": "src"}),
        ("bash", {"command": "cat src/main.py"}),
        ("bash", {"command": "grep -r hello src"}),
        ("bash", {"command": "cd src && cat main.py"}),
        ("bash", {"command": f"cat {bound.root}/src/main.py"}),
    ]
    results = run_calls(bound, calls)
    assert [("hello-plain" in text or "main.py" in text) for _, text in results] == [True] * 7
    assert bound.asker.asked == []


def test_a_user_call_that_reaches_a_secret_is_refused(bound: Bound) -> None:
    async def main() -> list[str]:
        out = []
        for tool, args in [("bash", {"command": "cat .env"}), ("grep", {"pattern": "canary"})]:
            outcome = await bound.state.gateway.call(tool, args, CallContext(origin="user"))
            out.append(str(outcome.content))
        return out

    assert not any(secrets_in(text) for text in asyncio.run(main()))
    assert bound.asker.asked == []


def test_a_forbidden_call_runs_in_bypass_mode_and_past_allow_rules_never(tmp_path: Path) -> None:
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    plant(workspace)
    asker = DenyAsker()
    permissions = {"mode": "bypass", "allow": ["bash", "read_file", "grep"], "forbid": RULES}
    state = bind(workspace, {"permissions": permissions}, lambda *_: None, pytest.fail, ask=asker)
    calls = [
        ("read_file", {"file_path": ".env"}),
        ("bash", {"command": "cat .env"}),
        ("bash", {"command": "grep -r canary ."}),
        ("grep", {"pattern": "canary"}),
        ("bash", {"command": "cat src/main.py"}),
    ]
    results = run_calls(Bound(state, asker, workspace), calls)
    asyncio.run(state.aclose())
    assert [bool(secrets_in(text)) for _, text in results] == [False] * 5
    assert "hello-plain" in results[-1][1]
    assert "forbidden by rule read_file(prefix:.env*)" in results[0][1].lower()
    assert asker.asked == []


def test_the_generated_class_is_large(lines: list[tuple[str, str]]) -> None:
    assert len(lines) > 300


def test_toold_toml_forbid_holds_over_the_wire(tmp_path: Path) -> None:
    """[permissions] forbid in toold.toml, through the real daemon over stdio: refused
    unasked even in bypass mode, the rule named, the secret unread; what it does not
    cover runs."""
    workspace = tmp_path.resolve()
    plant(workspace)
    (workspace / "toold.toml").write_text(
        '[permissions]\nmode = "bypass"\nforbid = ["read_file(prefix:.env*)"]\n'
        '[execution]\ntool_runner = "local"\n',
        encoding="utf-8",
    )
    client = DenyingClient(workspace, env=dict(os.environ))
    try:
        client.initialize(
            rootUri=workspace.as_uri(),
            capabilities={"window": {"showMessage": {"messageActionItem": {}}}},
        )

        def call(command: str) -> dict[str, Any]:
            params = {"name": "bash", "arguments": {"command": command}, "origin": "agent"}
            return client.response(client.request("tools/call", params))["result"]

        refused = call("grep -r canary .")
        ran = call("cat src/main.py")
    finally:
        client.close()
    assert not secrets_in(str(refused)) and refused["isError"], refused
    assert "Forbidden by rule read_file(prefix:.env*)" in str(refused["content"])
    assert "hello-plain" in str(ran["content"])
    assert client.asked == []
