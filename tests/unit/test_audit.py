"""The audit log: whole JSON lines in .toold/audit.jsonl, secrets redacted."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from toold.permissions.audit import MAX_STRING, REDACTED, AuditLog, is_secret_key, redact, shorten


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "API_KEY",
        "x-api-key",
        "password",
        "passwd",
        "db_password",
        "token",
        "access_token",
        "refreshToken",
        "github_token",
        "authorization",
        "Authorization",
        "auth",
        "secret",
        "client_secret",
        "AWS_SECRET_ACCESS_KEY",
        "private_key",
        "cookie",
        "credentials",
    ],
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)
    assert redact({key: "value"}) == {key: REDACTED}


@pytest.mark.parametrize(
    "key", ["author", "max_tokens", "path", "file_path", "command", "passage", "keyboard"]
)
def test_ordinary_keys_stay_readable(key: str) -> None:
    assert not is_secret_key(key)
    assert redact({key: "value"}) == {key: "value"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("export KEY=sk-ant-api03-abcdefghijklmnop1234", "export KEY=[REDACTED]"),
        ("sk-proj-ABCDEFGHIJKLMNOPQRST", "[REDACTED]"),
        ("git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x", None),
        (
            "curl -H 'Authorization: Bearer abc.def-123456' x",
            "curl -H 'Authorization: Bearer [REDACTED]' x",
        ),
        ("AKIAABCDEFGHIJKLMNOP", "[REDACTED]"),
        ("mysql --password=hunter2 db", "mysql --password=[REDACTED] db"),
        ("TOKEN=abc123 make deploy", "TOKEN=[REDACTED] make deploy"),
        ("ls -la", "ls -la"),
        ("sk-short", "sk-short"),
    ],
)
def test_secret_values(text: str, expected: str | None) -> None:
    out = redact(text)
    if expected is None:
        assert "ghp_" not in out and REDACTED in out
    else:
        assert out == expected


def test_nested_values_are_redacted_and_the_input_is_untouched() -> None:
    args: dict[str, Any] = {
        "command": "deploy",
        "env": {"API_KEY": "k", "region": "eu"},
        "headers": [{"Authorization": "Bearer abcdefghij"}, "Bearer abcdefghijk"],
        "count": 3,
    }
    assert redact(args) == {
        "command": "deploy",
        "env": {"API_KEY": REDACTED, "region": "eu"},
        "headers": [{"Authorization": REDACTED}, "Bearer [REDACTED]"],
        "count": 3,
    }
    assert args["env"]["API_KEY"] == "k"


def test_record_appends_one_json_line_per_entry(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / ".toold" / "audit.jsonl")
    log.record(event="decision", tool="bash", arguments={"command": "ls", "token": "t"})
    log.record(event="call", tool="bash", arguments={"command": "ls"}, durationMs=1.5, outcome="ok")
    first, second = (json.loads(line) for line in log.path.read_text().splitlines())
    assert next(iter(first)) == "time"
    assert first["arguments"] == {"command": "ls", "token": REDACTED}
    assert second == {**second, "event": "call", "durationMs": 1.5, "outcome": "ok"}
    assert log.path.stat().st_mode & 0o777 == 0o600


def test_concurrent_writers_never_tear_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    logs = [AuditLog(path), AuditLog(path)]  # two writers, as two daemons would be

    def write(n: int) -> None:
        for i in range(200):
            logs[n % 2].record(event="call", tool=f"t{n}", arguments={"i": i, "pad": "x" * 500})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = path.read_text().splitlines()
    assert len(lines) == 800
    assert all(json.loads(line)["event"] == "call" for line in lines)


def test_a_rotated_or_deleted_log_is_reopened(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.record(event="call", tool="a")
    log.path.rename(tmp_path / "audit.jsonl.1")  # what logrotate does
    log.record(event="call", tool="b")
    log.path.unlink()
    log.record(event="call", tool="c")
    assert json.loads((tmp_path / "audit.jsonl.1").read_text())["tool"] == "a"
    assert [json.loads(line)["tool"] for line in log.path.read_text().splitlines()] == ["c"]
    log.close()
    log.record(event="call", tool="d")
    assert len(log.path.read_text().splitlines()) == 2


def test_long_strings_are_cut_and_a_secret_on_the_cut_is_still_redacted(tmp_path: Path) -> None:
    secret = "sk-ant-api03-" + "s" * 40
    content = "x" * (MAX_STRING - 10) + secret + "y" * 100_000
    log = AuditLog(tmp_path / "audit.jsonl")
    log.record(event="call", tool="write_file", arguments={"content": content, "path": "a"})
    logged = json.loads(log.path.read_text())["arguments"]
    assert logged["path"] == "a"
    assert logged["content"].startswith("x" * (MAX_STRING - 10) + REDACTED[:10])
    digest = hashlib.sha256(content.encode()).hexdigest()
    assert logged["content"].endswith(f"… [{len(content)} characters, sha256:{digest}]")
    assert "sk-ant" not in logged["content"] and "y" * 10 not in logged["content"]
    assert shorten({"short": "abc", "n": [1, "d"]}) == {"short": "abc", "n": [1, "d"]}


def test_a_line_costs_the_same_whatever_was_written(tmp_path: Path) -> None:
    """The log records the call, not the data: 1 KiB or 1 MiB of content, the same line."""
    log = AuditLog(tmp_path / "audit.jsonl")
    for size in (1024, 1024 * 1024):
        log.record(event="call", tool="write_file", arguments={"content": "a1/+" * (size // 4)})
    small, large = log.path.read_text(encoding="utf-8").splitlines()
    assert len(small) < MAX_STRING + 300 and len(large) - len(small) <= 4
    excerpt = json.loads(large)["arguments"]["content"]
    assert excerpt.startswith("a1/+" * (MAX_STRING // 4))
    assert f"[{1024 * 1024} characters, sha256:" in excerpt


def test_a_secret_in_the_excerpt_of_a_long_string_is_redacted(tmp_path: Path) -> None:
    content = "API_KEY=s3cr3t-value-1234\n" + "z" * 5000 + " password=tail-secret-77"
    log = AuditLog(tmp_path / "audit.jsonl")
    log.record(event="decision", tool="write_file", arguments={"content": content})
    logged = log.path.read_text(encoding="utf-8")
    assert "s3cr3t" not in logged and "tail-secret" not in logged
    assert "API_KEY=[REDACTED]" in logged
