"""``toold mcp --http``'s options in process: where the token comes from, what is refused
at start, which names Host and Origin may carry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toold.bridge.http_listener import TOKEN_ENV, HttpUsageError, http_options, is_loopback
from toold.bridge.mcp_http import security_settings


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.com", False),
        ("localhost.evil.example", False),
    ],
)
def test_loopback_is_decided_on_the_address(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_token_file_wins_and_the_environment_never_reaches_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("  from-the-file\n", encoding="utf-8")
    monkeypatch.setenv(TOKEN_ENV, "from-the-environment")
    options = http_options("127.0.0.1", 0, token_file, False, [])
    assert (options.token, options.token_printed) == ("from-the-file", False)
    assert TOKEN_ENV not in os.environ  # popped: workers and bash -l never inherit it


def test_the_environment_then_a_made_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "from-the-environment")
    assert http_options("127.0.0.1", 0, None, False, []).token == "from-the-environment"
    made = http_options("127.0.0.1", 0, None, False, [])
    again = http_options("127.0.0.1", 0, None, False, [])
    assert made.token_printed and made.token is not None and len(made.token) >= 32
    assert made.token != again.token


def test_what_must_not_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(HttpUsageError, match="--token-file FILE or set \\$TOOLD_MCP_TOKEN"):
        http_options("0.0.0.0", 0, None, True, [])
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(HttpUsageError, match="is empty"):
        http_options("127.0.0.1", 0, empty, False, [])
    with pytest.raises(HttpUsageError, match="cannot read"):
        http_options("127.0.0.1", 0, tmp_path / "missing", False, [])
    with pytest.raises(HttpUsageError, match="contradicts"):
        http_options("127.0.0.1", 0, empty, True, [])
    assert http_options("127.0.0.1", 0, None, True, []).token is None


def test_host_and_origin_accept_the_loopback_names_and_the_named_hosts_only() -> None:
    loopback = security_settings(http_options("127.0.0.1", 0, None, True, []))
    assert "localhost:*" in loopback.allowed_hosts
    assert "http://127.0.0.1:*" in loopback.allowed_origins
    assert not any("0.0.0.0" in h for h in loopback.allowed_hosts)
    wide = security_settings(http_options("0.0.0.0", 0, None, False, ["box.lan"]))
    assert {"box.lan:*", "0.0.0.0:*"} <= set(wide.allowed_hosts)
    assert "https://box.lan:*" in wide.allowed_origins
    assert not any("evil" in o for o in wide.allowed_origins)


def test_a_token_file_the_workspaces_tools_can_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However its path is spelled, a token file whose real place is in the workspace is
    refused (a tool could read it, then connect as a client answering its own questions);
    one outside is taken, a link in the workspace to it included."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    outside = tmp_path / "outside-token"
    outside.write_text("secret\n", encoding="utf-8")
    (workspace / "sub" / "token").write_text("secret\n", encoding="utf-8")
    (tmp_path / "to-ws").symlink_to(workspace)
    (workspace / "link-out").symlink_to(outside)
    (tmp_path / "link-in").symlink_to(workspace / "sub" / "token")
    monkeypatch.chdir(workspace)
    inside = [
        workspace / "sub" / "token",
        Path("sub/token"),
        Path("sub/../sub/./token"),
        tmp_path / "to-ws" / "sub" / "token",
        tmp_path / "link-in",
    ]
    for spelling in inside:
        for root in (workspace, tmp_path / "to-ws"):
            with pytest.raises(HttpUsageError, match="lies in the workspace"):
                http_options("127.0.0.1", 0, spelling, False, [], root)
    for spelling in (outside, Path("../outside-token"), workspace / "link-out"):
        taken = http_options("127.0.0.1", 0, spelling, False, [], workspace)
        assert taken.token == "secret"
