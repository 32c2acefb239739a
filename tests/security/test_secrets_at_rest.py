"""Secrets at rest: a canary secret given in any spelling never reaches .toold in clear,
and everything in .toold is private (folders 0700, files 0600).

The spellings are generated: each secret-bearing flag (``--password``, ``--token``,
``--api-key``, ``-storepass``...) with ``=`` or blanks, its value bare or quoted (also
with escaped quotes, as in a JSON string), the flag quoted or not, after every kind of
word boundary (``;``, ``|``, ``$(``, a backquote, a list item); mysql's ``-pX``; curl's
``-u user:pass``; Authorization and X-Api-Key headers. Each is checked by the function,
then all of them go through the real daemon: a bash call whose output is spilled to
.toold/outputs, a background_run (its record and log) and calls whose audit lines hold
them. The canary is made up and assembled at run time (secret scanners skip this file).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.calls import user_call
from tests.e2e.wire import WireClient
from tests.waiting import wait_until
from toold.assembly import bind
from toold.permissions import redaction
from toold.permissions.redaction import REDACTED, StreamRedactor, redact, redact_text
from toold.tools import BuiltinToolProvider, ToolRuntime, ToolSet

CANARY = "Cq7" + "zN4hunter2Wx"
ENV_CANARY = "Ev9" + "kT2canaryQ8rL5"
ENV_NAME = "TOOLD_TEST_API_KEY"

FLAGS = (
    "--password", "--passwd", "--pass", "--PASSWORD", "--db-password", "--token",
    "--access-token", "--auth-token", "--api-key", "--apikey", "--api_key", "--secret",
    "--client-secret", "--private-key", "-storepass",
)  # fmt: skip
VALUE_QUOTES = (("", ""), ('"', '"'), ("'", "'"), ('\\"', '\\"'))
FLAG_QUOTES = ("", '"', "'")
BOUNDARIES = (
    "tool ", "", "x;", "x && ", "x || ", "(", "$(", "`", "x|", "sudo -E ", "env A=1 ",
    "echo \"", "bash -c '", "{ ",
)  # fmt: skip


def flag_spellings() -> Iterator[str]:
    """Every flag × ``=`` or blanks × value quoting × flag quoting × word boundary."""
    for flag, sep, (q1, q2), fq, start in itertools.product(
        FLAGS, ("=", " ", "\t", "  "), VALUE_QUOTES, FLAG_QUOTES, BOUNDARIES
    ):
        if sep == "=":
            yield f"{start}{fq}{flag}={q1}{CANARY}{q2}{fq}"
        else:
            yield f"{start}{fq}{flag}{fq}{sep}{q1}{CANARY}{q2}"
    for flag, quote in itertools.product(FLAGS, ('"', "'")):
        yield f"subprocess.run([{quote}cmd{quote}, {quote}{flag}{quote}, {quote}{CANARY}{quote}])"


def other_spellings() -> Iterator[str]:
    """mysql's -pX, curl's -u user:pass, Authorization and X-Api-Key headers."""
    for program, (q1, q2), fq in itertools.product(
        ("mysql", "mysqldump", "mariadb", "mysqladmin"), VALUE_QUOTES[:3], FLAG_QUOTES
    ):
        yield f"{program} -u root {fq}-p{q1}{CANARY}{q2}{fq} db"
        yield f"{program} --password={q1}{CANARY}{q2} db"
    for form, (q1, q2) in itertools.product(("-u ", "-u", "--user=", "--user "), VALUE_QUOTES[:3]):
        yield f"curl {form}{q1}admin:{CANARY}{q2} https://api.example"
    yield f'["curl", "-u", "admin:{CANARY}", "https://api.example"]'
    for header, (q1, q2) in itertools.product(
        (
            f"Authorization: Bearer {CANARY}",
            f"Authorization:Bearer {CANARY}",
            f"authorization: basic {CANARY}",
            f"Proxy-Authorization: Basic {CANARY}",
            f"X-Api-Key: {CANARY}",
            f"x-api-key:{CANARY}",
            f"X-Auth-Token: {CANARY}",
        ),
        VALUE_QUOTES[:3],
    ):
        yield f"curl -H {q1}{header}{q2} https://api.example"
        yield f"< {header}"  # as curl -v prints it
    yield f'{{"headers": {{"Authorization": "Bearer {CANARY}", "X-Api-Key": "{CANARY}"}}}}'


SPELLINGS = [*flag_spellings(), *other_spellings()]


def test_every_generated_spelling_is_redacted() -> None:
    kept = [text for text in SPELLINGS if CANARY in redact_text(text)]
    assert not kept, f"{len(kept)} of {len(SPELLINGS)} spellings kept in clear, e.g. {kept[:5]}"


@pytest.mark.parametrize(
    "text",
    [
        "mysql -u root -p db",  # -p alone asks; db is the database
        "docker run -u 1000:1000 --rm alpine true",
        "sudo -u root ls",
        "docker login --password-stdin",
        "anthropic --max-tokens 1024",
        "pip install -U pip && mkdir -p a/b",
        "curl -H 'Accept: application/json' https://api.example",
    ],
)
def test_lookalikes_stay_readable(text: str) -> None:
    assert redact_text(text) == text


def test_argument_lists_are_redacted_item_by_item() -> None:
    argv = ["mysql", "-u", "root", f"-p{CANARY}", "--token", CANARY, "--verbose"]
    assert redact(argv) == [
        "mysql",
        "-u",
        "root",
        f"-p{REDACTED}",
        "--token",
        REDACTED,
        "--verbose",
    ]
    assert redact(["curl", "-u", f"me:{CANARY}"]) == ["curl", "-u", f"me:{REDACTED}"]
    assert redact(["docker", "run", "-u", "1000:1000"]) == ["docker", "run", "-u", "1000:1000"]


def test_the_daemons_secret_variables_are_redacted_wherever_they_appear(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_NAME, ENV_CANARY)
    monkeypatch.setenv("TOOLD_TEST_SOCK_AUTH", "/run/user/1/agent.sock")  # a path: no secret
    redaction.reload_environment()
    try:
        shown = redact_text(
            f"plain words {ENV_CANARY}, glued:x{ENV_CANARY}y /run/user/1/agent.sock"
        )
        assert shown == f"plain words {REDACTED}, glued:x{REDACTED}y /run/user/1/agent.sock"
    finally:
        monkeypatch.delenv(ENV_NAME)
        redaction.reload_environment()
    assert redact_text(ENV_CANARY) == ENV_CANARY


PEM_BODY = ["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB", CANARY + "AAAAMwAAAAtzc2gtZW"]
STREAM = (
    f"start\nrunning mysql --password {CANARY} now\nAuthorization: Bearer {CANARY}\n"
    "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
    f"after the key\ncurl -u me:{CANARY} x\nlast line without newline --token={CANARY}"
)


def test_a_stream_split_anywhere_is_redacted_as_a_whole() -> None:
    """A secret cut across two writes, at every possible place, and a key across lines."""
    whole = StreamRedactor()
    expected = whole.feed(STREAM) + whole.flush()
    assert CANARY not in expected and "after the key\n" in expected
    for cut in range(1, len(STREAM)):
        stream = StreamRedactor()
        shown = stream.feed(STREAM[:cut]) + stream.feed(STREAM[cut:]) + stream.flush()
        assert shown == expected, cut
    lines = StreamRedactor()
    by_line = "".join(lines.feed(line) for line in STREAM.splitlines(keepends=True)) + lines.flush()
    assert CANARY not in by_line and PEM_BODY[0] not in by_line
    assert "after the key\n" in by_line


def test_a_long_line_goes_out_in_pieces_cut_at_a_blank() -> None:
    """Memory stays bounded; the last 512 characters wait, so a flag keeps its value."""
    stream = StreamRedactor(limit=1000)
    head = "word " * 300
    shown = stream.feed(head + f"--password {CANARY[:5]}")
    assert 0 < len(shown) <= len(head) - 400 and head.startswith(shown)
    assert shown.endswith(" ")  # cut after a blank
    shown += stream.feed(CANARY[5:] + " tail") + stream.flush()
    assert shown == head + f"--password {REDACTED} tail"
    blob = StreamRedactor(limit=1000)
    assert len(blob.feed("x" * 5000)) == 5000 - 512  # no blank: cut anyway


@pytest.mark.parametrize(
    "run",
    [
        '"--password" ',
        " -u a",
        "--",
        ";-",
        'mysql -p"',
        '\\"',
        '--password \\"x"',
        "-p'",
        "x;--token=",
    ],
)
def test_adversarial_200_kb_inputs_stay_linear(
    run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Measured, not asserted (the suite's per-test timeout is the bound): the figure
    shows in ``pytest -s``."""
    text = "mysql " + run * (200_000 // len(run))
    started = time.perf_counter()
    redact_text(text + f" --api-key {CANARY}")
    with capsys.disabled():
        print(f"\nredact_text({run!r} x {len(text)} chars): {time.perf_counter() - started:.3f} s")
    assert CANARY not in redact_text(f"{text} --api-key {CANARY}")


# -- private state ---------------------------------------------------------------------


def _modes(folder: Path) -> dict[str, int]:
    """Relative path → permission bits of everything under ``folder`` (links skipped)."""
    found = {".": stat.S_IMODE(folder.lstat().st_mode)}
    for path in folder.rglob("*"):
        info = path.lstat()
        if not stat.S_ISLNK(info.st_mode):
            found[path.relative_to(folder).as_posix()] = stat.S_IMODE(info.st_mode)
    return found


def _wide(folder: Path) -> dict[str, str]:
    return {name: oct(mode) for name, mode in _modes(folder).items() if mode & 0o077}


def test_a_toold_folder_open_to_others_is_tightened_on_bind(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    state = workspace / ".toold"
    (state / "jobs").mkdir(parents=True)
    (state / "deep" / "er").mkdir(parents=True)
    old_log = state / "jobs" / "old.log"
    old_log.write_text(f"--password {CANARY}\n")
    (state / "deep" / "er" / "tool.sh").write_text("#!/bin/sh\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("not toold's\n")
    linked = tmp_path / "linked.txt"
    linked.write_text("hard-linked\n")
    os.link(linked, state / "hardlink.txt")
    (state / "link.txt").symlink_to(outside)
    for path in (state, state / "jobs", state / "deep", state / "deep" / "er"):
        path.chmod(0o755)
    for path in (old_log, outside, linked):
        path.chmod(0o644)
    (state / "deep" / "er" / "tool.sh").chmod(0o755)

    asyncio.run(bind(workspace, None, lambda method, params: None, pytest.fail).aclose())

    modes = _modes(state)
    expected = {
        ".": 0o700,
        "jobs": 0o700,
        "jobs/old.log": 0o600,
        "deep": 0o700,
        "deep/er": 0o700,
        "deep/er/tool.sh": 0o700,  # the owner's bits stay
        "hardlink.txt": 0o644,  # another name of it lies outside: left alone
    }
    assert {name: modes.get(name) for name in expected} == expected
    assert _wide(state) == {"hardlink.txt": "0o644"}  # what bind made (locks) is private too
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # a symlink is never followed


# -- over the real daemon --------------------------------------------------------------


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[WireClient, Path]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "toold.toml").write_text("[limits]\nbash_output_chars = 1000\n")
    client = WireClient(workspace, env={**os.environ, ENV_NAME: ENV_CANARY})
    client.initialize(rootUri=workspace.as_uri())
    yield client, workspace
    client.close()


def _printing(lines: list[str]) -> str:
    """A bash command that prints ``lines`` as they are (a quoted heredoc)."""
    return "cat <<'TOOLD_EOF'\n" + "\n".join(lines) + "\nTOOLD_EOF"


def _stored(workspace: Path) -> dict[str, str]:
    state = workspace / ".toold"
    return {
        path.relative_to(state).as_posix(): path.read_text(encoding="utf-8", errors="replace")
        for pattern in ("audit.jsonl", "jobs/*.json", "jobs/*.log", "outputs/*")
        for path in sorted(state.glob(pattern))
    }


def test_no_spelling_reaches_toold_in_clear_and_its_files_are_private(
    daemon: tuple[WireClient, Path],
) -> None:
    client, workspace = daemon
    lines = [*SPELLINGS, f"the daemon's own key: {ENV_CANARY}"]
    # All of them in one call (from a file: one argument holds at most 128 KiB): its
    # output passes the cap and is spilled whole; the variable's value comes last.
    (workspace / "spellings.txt").write_text("\n".join(lines) + "\n")
    printing = f'cat spellings.txt; echo "${ENV_NAME}"'
    spilled = client.tool("bash", command=printing)
    assert spilled["isError"] is False, spilled
    content = json.dumps(spilled["content"])
    assert ".toold/outputs/" in content, content[-300:]
    # The audit line keeps the first 2,000 characters of a command: a sample, ~1,800 each.
    sample = SPELLINGS[:: max(1, len(SPELLINGS) // 300)]
    batches: list[list[str]] = [[]]
    for line in sample:
        if sum(len(x) + 1 for x in batches[-1]) + len(line) > 1800:
            batches.append([])
        batches[-1].append(line)
    for batch in batches:
        assert client.tool("bash", command=_printing(batch))["isError"] is False
    # And as a background job: its record (command and result) and its log.
    started = client.tool("background_run", command=_printing(batches[0]) + "\n" + printing)
    assert started["isError"] is False, started
    finished = client.notification("jobs/finished")
    assert finished["params"]["status"] == "done", finished
    job = workspace / ".toold" / "jobs" / f"{finished['params']['jobId']}.json"
    wait_until(lambda: '"status": "done"' in job.read_text(), "the job's record saved")
    audit = workspace / ".toold" / "audit.jsonl"
    calls = 2 + len(batches)
    wait_until(
        lambda: audit.is_file() and audit.read_text().count('"event": "call"') >= calls,
        "every call in the audit log",
    )
    stored = _stored(workspace)
    assert {"audit.jsonl"} < set(stored) and any(n.startswith("outputs/") for n in stored)
    assert any(n.endswith(".log") for n in stored) and any(n.endswith(".json") for n in stored)
    leaks = {
        name: secret
        for name, text in stored.items()
        for secret in (CANARY, ENV_CANARY)
        if secret in text
    }
    assert not leaks, f"secrets in clear in .toold: {leaks}"
    record = json.loads(job.read_text())
    assert REDACTED in record["command"] and REDACTED in record["result"]
    assert CANARY in json.dumps(spilled["content"])  # the call's own result is not redacted
    assert len(stored["audit.jsonl"].splitlines()) >= calls  # one line per call
    assert _wide(workspace / ".toold") == {}


def test_a_secret_across_two_reads_of_a_spilled_output_is_redacted(tmp_path: Path) -> None:
    """The bash tool reads output 64 KiB at a time: the secret is printed across the
    first boundary, with no newline near it, and must not reach the spill file whole."""
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    filler = 65536 - len("x --password ") - 5
    script = f"import sys; sys.stdout.write('y' * {filler} + ' --password {CANARY} done\\n')"
    tools = ToolSet(BuiltinToolProvider(ToolRuntime(workspace=workspace)).get_tools())
    command = f"python3 -c {script!r}"
    result = asyncio.run(user_call(tools, "bash", {"command": command})).content
    assert ".toold/outputs/" in str(result)
    [spill] = (workspace / ".toold" / "outputs").glob("*.txt")
    text = spill.read_text()
    assert CANARY not in text and text.endswith(f"--password {REDACTED} done\n")
    assert stat.S_IMODE(spill.stat().st_mode) == 0o600
