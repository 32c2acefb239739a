"""Output capping and run_command, below the bash tool."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from toold.sandbox.process import (
    CappedText,
    Clipped,
    CommandResult,
    cap_text,
    join_clipped,
    run_command,
)


def _marker(dropped: int) -> str:
    return f"\n\n... [{dropped} characters truncated] ...\n\n"


def test_cap_text_short_text_unchanged() -> None:
    assert cap_text("abc", 10) == "abc"
    assert cap_text("a" * 10, 10) == "a" * 10


def test_cap_text_keeps_head_and_tail() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    assert cap_text(text, 10) == text[:5] + _marker(90) + text[-5:]
    assert cap_text(text, 11) == text[:5] + _marker(89) + text[-6:]


def test_capped_text_streams_in_bounded_memory() -> None:
    sink = CappedText(10)
    for i in range(1000):
        sink.append(f"{i:04d}")
    kept = sink.clipped()
    assert kept.total == sink.total == 4000
    assert len(kept.head) + len(kept.tail) <= 20
    assert sink.text() == "00000" + _marker(3990) + "80999"


def test_capped_text_under_limit_is_whole() -> None:
    sink = CappedText(10)
    sink.append("abc")
    sink.append("defg")
    assert sink.clipped() == Clipped("abcdefg")
    assert sink.text() == "abcdefg"


def test_clipped_rstrip_and_str() -> None:
    assert Clipped("ab  \n").rstrip() == Clipped("ab")
    assert Clipped("head", "tail \n", 5).rstrip() == Clipped("head", "tail", 5)
    assert str(Clipped("head", "tail", 5)) == "head" + _marker(5) + "tail"
    assert str(Clipped("whole")) == "whole"


def test_join_clipped_counts_every_dropped_character() -> None:
    out = Clipped("o" * 20, "O" * 20, 100)
    err = Clipped("e" * 20, "E" * 20, 50)
    # 140 + 1 + 90 characters in all; 20 kept.
    assert join_clipped([out, err], "\n", 20) == "o" * 10 + _marker(211) + "E" * 10


def test_join_clipped_small_parts() -> None:
    assert join_clipped([Clipped("a"), Clipped("b")], "\n", 10) == "a\nb"
    assert join_clipped([], "\n", 10) == ""
    assert (
        join_clipped([Clipped("abcdef"), Clipped("ghijkl")], "-", 6) == "abc" + _marker(7) + "jkl"
    )


def test_join_clipped_keeps_a_short_tail_part_whole() -> None:
    out = Clipped("o" * 20, "O" * 20, 100)
    assert join_clipped([out, Clipped("err")], "\n", 20) == "o" * 10 + _marker(124) + "OOOOOO\nerr"


def _run(
    argv: list[str],
    cwd: Path,
    *,
    timeout: float = 10,
    on_output: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
) -> CommandResult:
    return asyncio.run(
        run_command(argv, cwd=cwd, timeout=timeout, output_limit=1000, on_output=on_output, env=env)
    )


def test_run_command_separates_streams(tmp_path: Path) -> None:
    result = _run(["sh", "-c", "echo out; echo err >&2; exit 5"], tmp_path)
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert result.returncode == 5
    assert result.timed_out is False


def test_run_command_timeout(tmp_path: Path) -> None:
    result = _run(["sh", "-c", "echo started; exec sleep 1000"], tmp_path, timeout=0.2)
    assert result.timed_out is True
    assert result.stdout == "started\n"
    assert result.returncode is not None and result.returncode < 0


def test_run_command_streams_output(tmp_path: Path) -> None:
    seen: list[str] = []
    _run(["sh", "-c", "echo one; echo two; printf three"], tmp_path, on_output=seen.append)
    # Each report is whole lines without their last newline; the unterminated rest comes last.
    assert "\n".join(seen) == "one\ntwo\nthree"
    assert seen[-1] == "three"


def test_run_command_env_and_cwd(tmp_path: Path) -> None:
    result = _run(["sh", "-c", 'echo "$GREETING"; pwd'], tmp_path, env={"GREETING": "hey"})
    assert result.stdout == f"hey\n{tmp_path}\n"


def test_run_command_missing_program(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _run(["/no/such/program"], tmp_path)
