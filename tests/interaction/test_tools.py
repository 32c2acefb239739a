"""Tool calls through every front end: each test body runs once per transport (conftest.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.interaction.conftest import WITH_JOBS, Connect
from tests.interaction.sessions import JobReader
from tests.waiting import wait_until

CORE = ["bash", "read_file", "write_file", "edit_file", "glob", "grep"]
BYPASS = '[permissions]\nmode = "bypass"\n'


def test_the_catalogue_is_listed_once(connect: Connect, workspace: Path) -> None:
    names = connect(workspace).tools()
    assert set(CORE) <= set(names)
    assert "background_run" in names
    assert len(names) == len(set(names))


def test_write_file_then_read_file_round_trip(connect: Connect, workspace: Path) -> None:
    (workspace / "toold.toml").write_text(BYPASS, encoding="utf-8")
    session = connect(workspace)
    wrote = session.call("write_file", {"file_path": "notes/a.txt", "content": "alpha\nbeta\n"})
    assert not wrote.is_error, wrote
    assert wrote.text == "Wrote 11 characters to notes/a.txt"
    assert (workspace / "notes" / "a.txt").read_text(encoding="utf-8") == "alpha\nbeta\n"
    read = session.call("read_file", {"file_path": "notes/a.txt"})
    assert (read.text, read.is_error) == ("1: alpha\n2: beta", False)


def test_an_unknown_tool_is_an_error_and_the_session_goes_on(
    connect: Connect, workspace: Path
) -> None:
    session = connect(workspace)
    unknown = session.call("no_such_tool", {"x": 1})
    assert unknown.is_error
    assert "Unknown tool: no_such_tool" in unknown.text
    read = session.call("read_file", {"file_path": "src/main.py"})
    assert (read.text, read.is_error) == ("1: print('needle')", False)


def test_a_write_nobody_can_allow_is_refused_in_default_mode(
    connect: Connect, workspace: Path
) -> None:
    session = connect(workspace)
    refused = session.call("write_file", {"file_path": "x.txt", "content": "hi"})
    assert refused.is_error
    # Each front end words it its own way, and each says it was denied (not that it failed).
    assert "denied" in refused.text.lower(), refused
    assert refused.job_id is None
    assert not (workspace / "x.txt").exists()
    # Reads need nobody's word: the same session still reads.
    assert not session.call("read_file", {"file_path": "src/main.py"}).is_error


def test_background_run_answers_a_job_id_and_the_job_runs(
    connect: Connect, workspace: Path
) -> None:
    (workspace / "toold.toml").write_text(BYPASS, encoding="utf-8")
    session = connect(workspace)
    started = session.call("background_run", {"command": "echo done > job.txt"})
    assert not started.is_error, started
    assert started.job_id is not None and re.fullmatch(r"[A-Za-z0-9]{8}", started.job_id)
    out = workspace / "job.txt"
    wait_until(lambda: out.is_file() and out.read_text(encoding="utf-8") == "done\n", "job.txt")


@pytest.mark.parametrize("connect", WITH_JOBS, indirect=True)
def test_a_background_job_is_shown_by_id(connect: Connect, workspace: Path) -> None:
    """LSP's jobs/get and MCP's job resource show the job's status and output (ACP shows
    only the tool call)."""
    (workspace / "toold.toml").write_text(BYPASS, encoding="utf-8")
    session = connect(workspace)
    started = session.call("background_run", {"command": "echo shown"})
    assert started.job_id is not None, started
    assert isinstance(session, JobReader), session.transport
    job_id = started.job_id
    job = wait_until(
        lambda: (j := session.job(job_id)).status != "running" and j, "the job to finish"
    )
    assert (job.status, job.output) == ("done", "shown\n")
