"""bash: workspace cwd, result texts, timeouts, process-group cleanup and the output cap."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

import pytest

from tests.calls import user_call
from tests.processes import wait_gone
from tests.waiting import wait_until
from toold.config import LimitsConfig, TooldConfig
from toold.tools import ToolArgumentError, ToolRuntime, ToolSet

from .conftest import Call, ToolsWith

LIMIT = 30_000


def _pids(text: str) -> list[int]:
    return [int(line) for line in text.splitlines() if line.strip().isdigit()]


def test_success_without_output_is_empty(call: Call) -> None:
    assert call("bash", command="true") == ""


def test_stdout_then_stderr_each_stripped(call: Call) -> None:
    assert call("bash", command="printf 'out  \\n\\n'; printf 'err\\n\\n' >&2") == "out\nerr"


def test_stderr_only(call: Call) -> None:
    assert call("bash", command="echo oops >&2") == "oops"


def test_exit_code_with_output(call: Call) -> None:
    result = call("bash", command="echo out; echo err >&2; exit 3")
    assert result == "Command failed with exit code 3\nout\nerr"


def test_exit_code_without_output(call: Call) -> None:
    assert call("bash", command="exit 4") == "Command failed with exit code 4"


def test_stdin_is_closed(call: Call) -> None:
    assert call("bash", command="cat", timeout=10) == ""


def test_relative_files_land_in_workspace(call: Call, workspace: Path) -> None:
    assert call("bash", command="echo hi > made.txt && cat made.txt") == "hi"
    assert (workspace / "made.txt").read_text() == "hi\n"


def test_timeout_must_be_at_least_one(call: Call) -> None:
    with call.fails(ToolArgumentError, match="timeout"):
        call("bash", command="true", timeout=0)


def test_timeout_text_with_partial_output(call: Call) -> None:
    result = call("bash", command="echo partial; echo warn >&2; sleep 1000", timeout=1)
    assert result == "Error: command timed out after 1 seconds\npartial\nwarn"


def test_timeout_text_without_output(call: Call) -> None:
    assert call("bash", command="sleep 1000", timeout=1) == (
        "Error: command timed out after 1 seconds"
    )


def test_timeout_kills_the_process_group(call: Call) -> None:
    result = call(
        "bash",
        command="sleep 1000 & echo $!; (sleep 1000 & echo $!; wait) & sleep 1000",
        timeout=1,
    )
    assert result.startswith("Error: command timed out after 1 seconds\n")
    pids = _pids(result)
    assert len(pids) == 2
    wait_gone(pids)


def test_background_child_neither_blocks_nor_outlives_the_call(call: Call) -> None:
    # The child keeps stdout open; the call must still finish when bash exits.
    result = call("bash", command="sleep 1000 & echo $!", timeout=20)
    pids = _pids(result)
    assert result == str(pids[0])
    wait_gone(pids)


@pytest.mark.timeout(20)
def test_pipe_held_outside_the_group_does_not_hang(call: Call, workspace: Path) -> None:
    # setsid -f escapes the process group; its child still holds stdout and stderr open.
    # It writes its pid to a file, not to the pipe: when that write lands in the output is
    # a race with the call's end. The command waits for the file: until the child has
    # called setsid it is still in the group, and the call's end would kill it (under load
    # it had not run yet when bash exited).
    escape = "setsid -f sh -c 'echo $$ > held.pid; exec sleep 60'"
    result = call("bash", command=f"{escape}; until [ -s held.pid ]; do sleep 0.01; done; echo hi")
    pid_file = workspace / "held.pid"
    try:
        assert result == "hi"
    finally:
        wait_until(lambda: pid_file.is_file() and pid_file.read_text().strip(), "held.pid")
        os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_cancellation_kills_the_process_group(workspace: Path) -> None:
    tools = ToolSet.resolve(["bash"], ToolRuntime(workspace=workspace))

    async def scenario() -> int:
        lines: asyncio.Queue[str] = asyncio.Queue()
        progress = lines.put_nowait
        task = asyncio.create_task(
            user_call(tools, "bash", {"command": "sleep 1000 & echo $!; wait"}, progress=progress)
        )
        first = await asyncio.wait_for(lines.get(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return _pids(first)[0]

    pid = asyncio.run(scenario())
    wait_gone([pid])


def test_exit_code_reaches_the_outcome(workspace: Path) -> None:
    tools = ToolSet.resolve(["bash"], ToolRuntime(workspace=workspace))
    outcome = asyncio.run(user_call(tools, "bash", {"command": "echo x; exit 7"}))
    assert (outcome.content, outcome.is_error, outcome.exit_code) == (
        "Command failed with exit code 7\nx",
        False,
        7,
    )
    outcome = asyncio.run(user_call(tools, "bash", {"command": "echo ok"}))
    assert (outcome.content, outcome.is_error, outcome.exit_code) == ("ok", False, 0)


def _marker(dropped: int) -> str:
    return f"\n\n... [{dropped} characters truncated] ...\n\n"


NOTE = re.compile(
    r"\n\[Output cut: all (\d+) characters are in (\.toold/outputs/[0-9a-f]+\.txt); "
    r"page through it with read_file \(offset, limit\)\]$"
)


def _cut(result: str, workspace: Path, whole: str) -> str:
    """The result without its closing note, which must name a file holding ``whole``."""
    found = NOTE.search(result)
    assert found is not None, result[-300:]
    assert int(found.group(1)) == len(whole)
    assert (workspace / found.group(2)).read_text() == whole
    return result[: found.start()]


def test_long_output_keeps_head_and_tail_and_all_of_it_in_a_file(
    call: Call, workspace: Path
) -> None:
    result = _cut(call("bash", command="yes | head -c 200000"), workspace, "y\n" * 100_000)
    # The stream is "y\n" * 100000, stripped to 199999 characters; 30000 survive.
    expected = "y\n" * (LIMIT // 4) + _marker(199_999 - LIMIT) + "\ny" * (LIMIT // 4)
    assert result == expected


def test_long_stdout_and_stderr_share_one_cap(call: Call, workspace: Path) -> None:
    result = call("bash", command="yes a | head -c 100000; yes b | head -c 100000 >&2")
    result = _cut(result, workspace, "a\n" * 50_000 + "b\n" * 50_000)
    # "a\n"*50000 stripped (99999) + "\n" + "b\n"*50000 stripped (99999) = 199999 characters.
    expected = "a\n" * (LIMIT // 4) + _marker(199_999 - LIMIT) + "\nb" * (LIMIT // 4)
    assert result == expected
    assert result.count("characters truncated") == 1


def test_long_output_after_failure_line(call: Call, workspace: Path) -> None:
    result = call("bash", command="yes | head -c 200000; exit 2")
    result = _cut(result, workspace, "y\n" * 100_000)
    head, _, rest = result.partition("\n")
    assert head == "Command failed with exit code 2"
    assert rest == "y\n" * (LIMIT // 4) + _marker(199_999 - LIMIT) + "\ny" * (LIMIT // 4)


def test_output_at_the_limit_is_kept_whole(tools_with: ToolsWith, workspace: Path) -> None:
    config = TooldConfig(limits=LimitsConfig(bash_output_chars=1000))
    bash = tools_with(config=config)
    exact = bash("bash", command="head -c 1000 /dev/zero | tr '\\0' x")
    assert exact == "x" * 1000
    over = bash("bash", command="head -c 1001 /dev/zero | tr '\\0' x")
    assert _cut(over, workspace, "x" * 1001) == "x" * 500 + _marker(1) + "x" * 500
    assert len(list((workspace / ".toold" / "outputs").iterdir())) == 1  # none for "exact"


def test_combined_streams_over_the_limit_are_capped(tools_with: ToolsWith, workspace: Path) -> None:
    config = TooldConfig(limits=LimitsConfig(bash_output_chars=1000))
    bash = tools_with(config=config)
    # Each stream fits under the cap alone; together (600 + 1 + 600) they do not.
    result = bash(
        "bash", command="head -c 600 /dev/zero | tr '\\0' o; head -c 600 /dev/zero | tr '\\0' e >&2"
    )
    result = _cut(result, workspace, "o" * 600 + "e" * 600)
    assert result == "o" * 500 + _marker(201) + "e" * 500


def test_invalid_utf8_split_across_reads(call: Call) -> None:
    # A three-byte character split by a pause still decodes; a lone byte is replaced.
    result = call("bash", command="printf '\\xe4\\xbd'; sleep 0.2; printf '\\xa0\\xff!'")
    assert result == "你\ufffd!"


def test_only_the_newest_spills_are_kept(tools_with: ToolsWith, workspace: Path) -> None:
    config = TooldConfig(limits=LimitsConfig(bash_output_chars=1000, max_finished_jobs=2))
    bash = tools_with(config=config)
    for _ in range(4):
        bash("bash", command="head -c 5000 /dev/zero | tr '\\0' x")
    assert len(list((workspace / ".toold" / "outputs").iterdir())) == 2


def test_a_symlinked_outputs_folder_is_never_written_through(
    tools_with: ToolsWith, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / ".toold").mkdir()
    os.symlink(outside, workspace / ".toold" / "outputs")
    config = TooldConfig(limits=LimitsConfig(bash_output_chars=1000))
    bash = tools_with(config=config)
    result = bash("bash", command="head -c 5000 /dev/zero | tr '\\0' x")
    assert "characters truncated" in result and "Output cut" not in result
    assert list(outside.iterdir()) == []
