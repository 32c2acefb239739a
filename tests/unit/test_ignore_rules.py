"""glob, grep, glob_search and grep_search honour .gitignore, .ignore and .git/info/exclude
(git's rules, by pathspec), unless the call asks for ignored files or the config says so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toold.config import SearchConfig, TooldConfig
from toold.search.ignore import MAX_RULES_BYTES

from .conftest import Call, Put, ToolsWith


@pytest.fixture
def repo(put: Put) -> None:
    put(".gitignore", "*.log\n!keep.log\nbuild/\n/top-only.txt\n*.egg-info/\n")
    put(".git/info/exclude", "secret-notes.md\n")
    put("src/.gitignore", "generated.py\n!important.log\n")
    put("src/.ignore", "vendored/\n")
    put("src/main.py", "needle\n")
    put("src/generated.py", "needle\n")
    put("src/important.log", "needle\n")
    put("src/vendored/lib.py", "needle\n")
    put("src/sub/top-only.txt", "needle\n")
    put("top-only.txt", "needle\n")
    put("debug.log", "needle\n")
    put("keep.log", "needle\n")
    put("build/out.py", "needle\n")
    put("toold.egg-info/PKG-INFO", "needle\n")
    put("secret-notes.md", "needle\n")


KEPT = ["keep.log", "src/important.log", "src/main.py", "src/sub/top-only.txt"]
IGNORED = [
    "build/out.py",
    "debug.log",
    "secret-notes.md",
    "src/generated.py",
    "src/vendored/lib.py",
    "toold.egg-info/PKG-INFO",
    "top-only.txt",
]


def test_glob_leaves_out_what_git_ignores(call: Call, repo: None) -> None:
    assert [p for p in call("glob", pattern="*") if "." not in p.split("/")[-1][:1]] == KEPT


def test_include_ignored_brings_everything_back(call: Call, repo: None) -> None:
    found = call("glob", pattern="*", include_ignored=True)
    assert [p for p in found if "." not in p.split("/")[-1][:1]] == sorted(KEPT + IGNORED)


def test_grep_with_and_without_ripgrep_prefilter(call: Call, repo: None) -> None:
    # A literal pattern goes through ripgrep's candidate list, a regex through the walk.
    for pattern in ("needle", "ne+dle"):
        found = call("grep", pattern=pattern, output_mode="files_with_matches")
        assert sorted(found) == KEPT, pattern
        every = call(
            "grep", pattern=pattern, output_mode="files_with_matches", include_ignored=True
        )
        assert sorted(every) == sorted(KEPT + IGNORED), pattern


def test_glob_search_and_grep_search(call: Call, repo: None) -> None:
    assert call("glob_search", pattern="*.py").splitlines() == ["src/main.py"]
    lines = call("grep_search", query="needle").splitlines()
    assert sorted(line.split(":")[0] for line in lines) == KEPT
    every = call("glob_search", pattern="*.py", include_ignored=True).splitlines()
    assert every == ["build/out.py", "src/generated.py", "src/main.py", "src/vendored/lib.py"]


def test_a_search_started_below_the_root_keeps_the_roots_rules(call: Call, repo: None) -> None:
    assert call("glob", pattern="*", path="src") == [
        "src/.gitignore",
        "src/.ignore",
        "src/important.log",
        "src/main.py",
        "src/sub/top-only.txt",
    ]
    # An ignored folder named as the start is searched; the rules still apply below it.
    assert call("glob", pattern="*", path="build") == ["build/out.py"]


def test_the_config_can_turn_it_off(tools_with: ToolsWith, repo: None) -> None:
    config = TooldConfig(search=SearchConfig(respect_gitignore=False))
    found = tools_with(config=config)("glob", pattern="*.log")
    assert found == ["debug.log", "keep.log", "src/important.log"]


def test_a_symlinked_gitignore_is_not_read(call: Call, put: Put, tmp_path: Path) -> None:
    outside = tmp_path / "outside-rules"
    outside.write_text("*.py\n")
    os.symlink(outside, Path(put("a.py", "x")).parent / ".gitignore")
    assert call("glob", pattern="*.py") == ["a.py"]


def test_only_the_head_of_a_huge_ignore_file_counts(call: Call, put: Put) -> None:
    put(".gitignore", "#" * MAX_RULES_BYTES + "\n*.py\n")
    put("a.py", "x")
    assert call("glob", pattern="*.py") == ["a.py"]
