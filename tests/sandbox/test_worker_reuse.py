"""A shared worker's cheap path: the configuration sent once per worker and kept, and the
sweep after each call still finds what a call left behind."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.processes import wait_gone
from tests.sandbox.standalone import exchange, start_worker
from toold.config import TooldConfig
from toold.sandbox.channel import Request, encode_request
from toold.sandbox.runners import make_runner
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime

TXT_ONLY = {"files": {"allowed_extensions": [".txt"]}}


def _read(workspace: Path, path: str, **extra: Any) -> dict[str, Any]:
    args = {"file_path": path}
    return {"tool": "read_file", "args": args, "workspace": str(workspace), "reuse": True, **extra}


def test_a_request_without_a_configuration_keeps_the_last_one_sent(workspace: Path) -> None:
    (workspace / "other.md").write_text("# md\n", encoding="utf-8")
    with start_worker() as proc:
        assert exchange(proc, _read(workspace, "notes.txt", config=TXT_ONLY))["next"] is True
        refused = exchange(proc, _read(workspace, "other.md"))  # the .txt-only one still
        assert "Extension not allowed: .md" in refused["error"]["message"]
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    with start_worker() as proc:
        assert exchange(proc, _read(workspace, "notes.txt", config=TXT_ONLY))["next"] is True
        assert exchange(proc, _read(workspace, "other.md", config={}))["result"] == "1: # md"
        assert exchange(proc, _read(workspace, "other.md"))["result"] == "1: # md"
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


def test_the_configuration_is_left_out_only_for_a_worker_that_has_it(workspace: Path) -> None:
    def request(config: TooldConfig) -> Request:
        runtime = ToolRuntime(workspace, config)
        tool = BuiltinToolProvider(runtime).resolve_named_tools(["read_file"])[0]
        return encode_request(tool, {"file_path": "notes.txt"}, workspace, config)

    txt_only, defaults = request(TooldConfig.model_validate(TXT_ONLY)), request(TooldConfig())
    first = json.loads(txt_only.line())
    assert first["config"]["files"]["allowed_extensions"] == [".txt"]
    assert "config" not in json.loads(txt_only.line(txt_only.config))
    assert json.loads(txt_only.line(defaults.config))["config"] == first["config"]


def test_a_shared_workers_later_calls_keep_its_configuration(workspace: Path) -> None:
    (workspace / "other.md").write_text("# md\n", encoding="utf-8")
    config = TooldConfig.model_validate(
        {**TXT_ONLY, "execution": {"tool_runner": "subprocess", "warm_workers": 1}}
    )

    async def run() -> tuple[list[Any], set[int]]:
        runner = make_runner(config, workspace)
        read = BuiltinToolProvider(ToolRuntime(workspace, config)).resolve_named_tools(
            ["read_file"]
        )[0]
        sandbox: Any = runner.sandbox
        seen: set[int] = set()
        results: list[Any] = []
        try:
            for path in ("notes.txt", "notes.txt", "other.md"):
                try:
                    results.append(await runner.run(read, read.validate_args({"file_path": path})))
                except ValueError as exc:
                    results.append(str(exc))
                seen.update(worker.pid for worker in sandbox._pool._idle)
        finally:
            await runner.close()
        return results, seen

    results, seen = asyncio.run(run())
    assert results[:2] == ["1: alpha\n2: beta"] * 2
    assert "Extension not allowed: .md" in results[2]
    assert len(seen) == 1, f"the calls did not share a worker: {seen}"


SWEEP = textwrap.dedent(
    """
    import os, subprocess, sys
    from toold.sandbox import worker
    worker._prctl(worker._PR_SET_CHILD_SUBREAPER, 1)
    assert worker._childless()
    # sh exits at once: the sleep is an orphan, reparented to us (the subreaper).
    subprocess.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], stdout=sys.stdout)
    sys.stdout.flush()
    assert not worker._childless()
    worker.sweep_descendants()
    assert worker._childless()
    print("swept")
    """
)


def test_the_sweep_finds_an_orphan_after_a_childless_call(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SWEEP], capture_output=True, text=True, timeout=30, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    orphan, swept = done.stdout.split()
    assert swept == "swept"
    wait_gone(int(orphan), "the orphan the sweep killed")


def test_closing_stdin_cancels_a_later_call_of_a_shared_worker(workspace: Path) -> None:
    bash = {
        "tool": "bash",
        "args": {"command": "sleep 300 & echo child=$!; wait", "timeout": 600},
        "workspace": str(workspace),
    }
    with start_worker() as proc:
        assert exchange(proc, _read(workspace, "notes.txt"))["next"] is True
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(bash).encode() + b"\n")
        proc.stdin.flush()
        line = ""
        while "child=" not in line:
            line = json.loads(proc.stdout.readline())["progress"]
        child = int(line.partition("child=")[2].split()[0])
        proc.stdin.close()  # the daemon's cancel
        assert proc.wait(timeout=30) == 0
        assert proc.stdout.read() == b"", "a cancelled call is not answered"
    wait_gone(child, "the cancelled call's child")


def test_a_request_larger_than_the_pipe_is_read_whole(workspace: Path) -> None:
    # Four times the pipe's 64 KiB: the worker's loop reads it in pieces before it runs.
    extensions = [".txt"] + [f".x{i:06d}" for i in range(30_000)]
    with start_worker() as proc:
        config = {"files": {"allowed_extensions": extensions}}
        assert exchange(proc, _read(workspace, "notes.txt", config=config))["next"] is True
        bash = {"tool": "bash", "args": {"command": "echo done"}, "workspace": str(workspace)}
        answer = exchange(proc, bash)
        while "progress" in answer:
            assert proc.stdout is not None
            answer = json.loads(proc.stdout.readline())
        assert answer["result"] == "done"  # a call that awaits runs on, not cancelled
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
