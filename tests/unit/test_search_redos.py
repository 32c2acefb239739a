"""A pattern the model writes, or a rule a cloned repository ships, cannot stall the daemon.

Python's ``re`` holds the GIL and cannot be interrupted: before search.bounded, grep with
``(a*)*b`` on a line of 28 ``a`` froze the event loop for 33 s, and a glob such as
``*a*a*a*a*a*a*a*a*b`` on a 100-character name for hours. Real files, the real tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import toold.search.grep as grep_module
import toold.tools.builtin.coding as coding
from tests.calls import user_call
from toold.tools import ToolRuntime
from toold.tools.toolset import ToolSet

STAR_GLOB = "*a" * 9 + "*b"
"""Backtracks on the order of len(name) ** 9 under ``re``."""
SLOW_EVEN_PRUNED = r"(a|aa)+$"
"""Exponential in the run of ``a`` even for the ``regex`` package (about 1 s at 30)."""


def invoke(workspace: Path, tool: str, **args: Any) -> Any:
    """One call through the gateway, as the user: its outcome."""
    tools = ToolSet.resolve([tool], ToolRuntime(workspace=workspace))
    return asyncio.run(user_call(tools, tool, args))


@pytest.fixture
def runs(workspace: Path) -> Path:
    (workspace / "runs.txt").write_text("a" * 40 + "!\nbaaab\n", encoding="utf-8")
    (workspace / f"{'a' * 120}.txt").write_text("x\n", encoding="utf-8")
    return workspace


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("grep", {"pattern": "(a*)*b"}),
        ("grep_search", {"query": "(a*)*b", "regex": True}),
    ],
)
def test_nested_repeats_answer_with_the_same_lines_as_re(
    runs: Path, tool: str, args: dict[str, Any]
) -> None:
    outcome = invoke(runs, tool, **args)
    assert not outcome.is_error
    text = outcome.content if isinstance(outcome.content, str) else "\n".join(outcome.content)
    assert "runs.txt:2:baaab" in text
    assert "runs.txt:1:" not in text


def test_a_glob_of_many_stars_matches_long_names(runs: Path) -> None:
    outcome = invoke(runs, "glob", pattern=STAR_GLOB)
    assert outcome.content == []
    assert invoke(runs, "glob", pattern=STAR_GLOB[:-1] + "t").content == [f"{'a' * 120}.txt"]


def test_a_gitignore_rule_of_many_stars_does_not_stall_the_walk(runs: Path) -> None:
    (runs / ".gitignore").write_text(STAR_GLOB + "\n" + "*a" * 9 + "*.txt\n", encoding="utf-8")
    (runs / "kept.md").write_text("x\n", encoding="utf-8")
    assert invoke(runs, "glob", pattern="*").content == [".gitignore", "kept.md", "runs.txt"]


def test_a_pattern_too_slow_even_so_fails_naming_the_fix(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep_module, "SEARCH_BUDGET", 0.3)
    outcome = invoke(runs, "grep", pattern=SLOW_EVEN_PRUNED)
    assert outcome.is_error
    assert outcome.content.startswith(
        f"Error: PatternTooSlow: the pattern {SLOW_EVEN_PRUNED!r} took more than 0.3 s to match"
    )
    assert "simplify it or search for a literal part of it" in outcome.content


def test_the_event_loop_runs_while_a_slow_pattern_is_matched(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The match releases the GIL: other work of the daemon goes on meanwhile."""
    monkeypatch.setattr(grep_module, "SEARCH_BUDGET", 3.0)
    tools = ToolSet.resolve(["grep"], ToolRuntime(workspace=runs))

    async def scenario() -> None:
        search = asyncio.create_task(user_call(tools, "grep", {"pattern": SLOW_EVEN_PRUNED}))
        for _ in range(5):
            await asyncio.sleep(0.01)
        assert not search.done(), "the loop turned only once the match had ended"
        outcome = await search
        assert outcome.is_error and "PatternTooSlow" in outcome.content

    asyncio.run(scenario())


def test_str_replace_with_a_runaway_regex_fails_and_changes_nothing(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its diff is computed for the permission prompt too, before anyone approved it."""
    monkeypatch.setattr(coding, "SEARCH_BUDGET", 0.3)
    before = (runs / "runs.txt").read_bytes()
    outcome = invoke(runs, "str_replace", path="runs.txt", old=SLOW_EVEN_PRUNED, new="", regex=True)
    assert outcome.is_error and "PatternTooSlow" in outcome.content
    assert (runs / "runs.txt").read_bytes() == before
    done = invoke(runs, "str_replace", path="runs.txt", old=r"b(a+)b", new=r"<\1>", regex=True)
    assert not done.is_error, done.content
    assert (runs / "runs.txt").read_text(encoding="utf-8").endswith("\n<aaa>\n")
