"""python_repl's names persist under the sandboxed runners too (the spec: "names persist
between calls"): its one interpreter is started inside the sandbox, with the sandbox's
environment, instead of a fresh worker per snippet."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import WireClient
from tests.sandbox.conftest import Daemon

SECRET = "sk-ant-repl-canary-4411"


def _run(client: WireClient, code: str) -> dict[str, Any]:
    params = {"name": "python_repl", "arguments": {"code": code}, "origin": "user"}
    result: dict[str, Any] = client.call("tools/call", params)
    return result


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    canary = tmp_path / "outside.txt"
    canary.write_text("outside canary\n", encoding="utf-8")
    return canary


@pytest.fixture
def default_client(workspace: Path) -> Iterator[WireClient]:
    """A daemon with no toold.toml (the default runner) and a secret in its environment."""
    client = WireClient(workspace, env={**os.environ, "ANTHROPIC_API_KEY": SECRET})
    client.initialize(rootUri=workspace.as_uri())
    yield client
    client.close()


def _view(client: WireClient, outside: Path) -> dict[str, Any]:
    code = (
        "import json, os; print(json.dumps({'uid': os.getuid(), 'home': os.environ.get('HOME'), "
        "'key': 'ANTHROPIC_API_KEY' in os.environ or any('" + SECRET + "' in v for v in "
        f"os.environ.values()), 'outside': os.path.exists({str(outside)!r})}}))"
    )
    result = _run(client, code)
    assert result["isError"] is False, result
    view: dict[str, Any] = json.loads(result["content"].strip().splitlines()[-1])
    return view


@pytest.mark.usefixtures("bwrap_ready")
def test_the_default_runner_keeps_names_inside_bwrap(
    default_client: WireClient, outside: Path
) -> None:
    assert _run(default_client, "x = 21")["content"] == "(No output)"
    assert _run(default_client, "x * 2") == {"content": "42", "isError": False}
    view = _view(default_client, outside)
    assert view["uid"] == 1000  # bwrap's user namespace, even for a root daemon
    assert view["key"] is False and view["outside"] is False
    assert view["home"] != os.environ.get("HOME")
    assert _run(default_client, "x") == {"content": "21", "isError": False}


@pytest.mark.usefixtures("bwrap_ready")
def test_a_bwrap_snippet_that_times_out_is_killed_and_a_fresh_one_starts(
    workspace: Path,
) -> None:
    (workspace / "toold.toml").write_text(
        '[execution]\ntool_runner = "bwrap"\n[python_repl]\ntimeout = 1.0\n', encoding="utf-8"
    )
    client = WireClient(workspace)
    try:
        client.initialize(rootUri=workspace.as_uri())
        assert _run(client, "kept = 1")["isError"] is False
        slow = _run(client, "while True: pass")
        assert slow["isError"] is True and "timed out after 1.0s" in slow["content"], slow
        after = _run(client, "kept")["content"]
        assert after.startswith("[python_repl: the previous snippet timed out after 1.0s;")
        assert "NameError" in after
        assert _run(client, "import os; print(os.getuid())")["content"] == "1000"
    finally:
        client.close()


def test_the_subprocess_runner_keeps_names_with_its_allow_listed_environment(
    daemon: Daemon, outside: Path
) -> None:
    client = daemon("subprocess")
    assert _run(client, "y = 'kept'")["isError"] is False
    assert _run(client, "y") == {"content": "kept", "isError": False}
    view = _view(client, outside)
    assert view["key"] is False and view["home"] != os.environ.get("HOME")
