"""glob_search, grep_search, file_info, str_replace: on the glob/grep engine, inside safe_path."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pytest

from toold.compat.bareagent import BASE_TOOLS, DEFERRED_TOOLS, get_tools
from toold.tools import ToolArgumentError
from toold.tools.registry import BuiltinToolProvider

from .conftest import Call, Put


@pytest.fixture
def tree(put: Put) -> None:
    put("src/main.py", "print('needle')\n")
    put("src/helper.txt", "needle line\nNEEDLE shout\n")
    put("src/pkg/deep.py", "x = 1  # needle.*\n")
    put(".github/ci.py", "needle = 'hidden'\n")
    put(".venv/lib.py", "needle\n")
    put("top.py", "nothing here\n")


# glob_search


def test_glob_search_lists_sorted_paths(call: Call, tree: None) -> None:
    assert call("glob_search", pattern="*.py") == "src/main.py\nsrc/pkg/deep.py\ntop.py"


def test_glob_search_matches_glob(call: Call, tree: None) -> None:
    for pattern in ("*.py", "src/**/*.py", "**/*.txt", "src/*"):
        lines = call("glob_search", pattern=pattern, include_hidden=True).splitlines()
        assert lines == call("glob", pattern=pattern), pattern


def test_glob_search_hidden_files(call: Call, tree: None) -> None:
    assert ".github/ci.py" in call("glob_search", pattern="*.py", include_hidden=True)
    # The skip list (.venv, .git, ...) still applies.
    assert ".venv" not in call("glob_search", pattern="*.py", include_hidden=True)
    assert call("glob_search", pattern="*.py", path=".venv") == ".venv/lib.py"


def test_glob_search_limit_and_notice(call: Call, put: Put) -> None:
    for i in range(5):
        put(f"f{i}.txt", "")
    result = call("glob_search", pattern="*.txt", limit=2).splitlines()
    assert result == [
        "f0.txt",
        "f1.txt",
        "... (truncated: 3 more of 5 matches; narrow the pattern or path, or raise limit)",
    ]


def test_glob_search_no_match_and_bad_path(call: Call, tree: None) -> None:
    assert call("glob_search", pattern="*.rs") == "No files matched."
    with call.fails(FileNotFoundError, match="Path not found: nope"):
        call("glob_search", pattern="*", path="nope")
    with call.fails(PermissionError):
        call("glob_search", pattern="*", path="../")


# grep_search


def test_grep_search_literal_by_default(call: Call, tree: None) -> None:
    assert call("grep_search", query="needle.*") == "src/pkg/deep.py:1:x = 1  # needle.*"


def test_grep_search_file_order_and_format(call: Call, tree: None) -> None:
    # Walk order, as grep: a folder's files, then each sub-folder; .venv skipped.
    assert call("grep_search", query="needle").splitlines() == [
        ".github/ci.py:1:needle = 'hidden'",
        "src/helper.txt:1:needle line",
        "src/main.py:1:print('needle')",
        "src/pkg/deep.py:1:x = 1  # needle.*",
    ]


def test_grep_search_same_lines_as_grep(call: Call, tree: None) -> None:
    assert call("grep_search", query="needle").splitlines() == call("grep", pattern="needle")


def test_grep_search_regex_and_case(call: Call, tree: None) -> None:
    assert call("grep_search", query=r"^needle\b", regex=True, glob="*.txt") == (
        "src/helper.txt:1:needle line"
    )
    assert call("grep_search", query="needle", case_sensitive=False, glob="*.txt") == (
        "src/helper.txt:1:needle line\nsrc/helper.txt:2:NEEDLE shout"
    )
    assert call("grep_search", query="shout", path="src") == "src/helper.txt:2:NEEDLE shout"


def test_grep_search_limit_and_notice(call: Call, put: Put) -> None:
    put("many.txt", "hit\n" * 5)
    assert call("grep_search", query="hit", limit=2).splitlines() == [
        "many.txt:1:hit",
        "many.txt:2:hit",
        "... (truncated at 2 matches; narrow query, glob or path, or raise limit)",
    ]
    assert call("grep_search", query="hit", limit=5).count("\n") == 4


def test_grep_search_long_lines_are_cut(call: Call, put: Put) -> None:
    put("min.js", "hit" + "x" * 1000 + "\n")
    result = call("grep_search", query="hit")
    assert result == "min.js:1:hit" + "x" * 497 + "... [503 more characters]"


def test_grep_search_errors(call: Call, tree: None) -> None:
    assert call("grep_search", query="absent") == "No matches found."
    with call.fails(ValueError, match="Invalid regex pattern"):
        call("grep_search", query="(", regex=True)
    with call.fails(ToolArgumentError, match="query"):
        call("grep_search", query="")


# file_info


def test_file_info_file(call: Call, put: Put) -> None:
    target = put("src/app.py", "12345")
    os.utime(target, (1_700_000_000, 1_700_000_000))
    assert call("file_info", path="src/app.py") == {
        "path": "src/app.py",
        "type": "file",
        "size": 5,
        "modified": "2023-11-14T22:13:20+00:00",
        "extension": ".py",
    }


def test_file_info_directory(call: Call, put: Put) -> None:
    put("d/x.txt", "")
    info = call("file_info", path="d")
    assert info["type"] == "directory"
    assert info["extension"] == ""
    assert datetime.fromisoformat(info["modified"]).tzinfo is not None


def test_file_info_errors(call: Call, workspace: Path) -> None:
    with call.fails(FileNotFoundError, match=r"Path not found: nope\.txt"):
        call("file_info", path="nope.txt")
    (workspace / "link").symlink_to(workspace)
    with call.fails(PermissionError, match="Symlink detected"):
        call("file_info", path="link")


# str_replace


def test_str_replace_all_by_default(call: Call, put: Put, workspace: Path) -> None:
    put("a.txt", "foo bar foo\nfoo\n")
    assert (
        call("str_replace", path="a.txt", old="foo", new="baz") == "Replaced 3 occurrences in a.txt"
    )
    assert (workspace / "a.txt").read_text() == "baz bar baz\nbaz\n"


def test_str_replace_count(call: Call, put: Put, workspace: Path) -> None:
    put("a.txt", "x x x")
    assert call("str_replace", path="a.txt", old="x", new="y", count=1) == (
        "Replaced 1 occurrence in a.txt"
    )
    assert (workspace / "a.txt").read_text() == "y x x"


def test_str_replace_literal_is_literal(call: Call, put: Put, workspace: Path) -> None:
    put("a.txt", "a.b a+b")
    call("str_replace", path="a.txt", old="a.b", new=r"\1 and \n")
    assert (workspace / "a.txt").read_text() == r"\1 and \n a+b"


def test_str_replace_regex_with_groups(call: Call, put: Put, workspace: Path) -> None:
    put("a.py", "def old_name(x):\n    return old_name(x)\n")
    result = call("str_replace", path="a.py", old=r"old_(\w+)", new=r"new_\1", regex=True)
    assert result == "Replaced 2 occurrences in a.py"
    assert (workspace / "a.py").read_text() == "def new_name(x):\n    return new_name(x)\n"


def test_str_replace_keeps_crlf(call: Call, put: Put, workspace: Path) -> None:
    put("w.txt", "one\r\ntwo\r\n")
    call("str_replace", path="w.txt", old="two", new="2")
    assert (workspace / "w.txt").read_bytes() == b"one\r\n2\r\n"


def test_str_replace_nothing_matched(call: Call, put: Put, workspace: Path) -> None:
    put("a.txt", "hello")
    with call.fails(ValueError, match=r"^No match in a.txt: old \(exact text"):
        call("str_replace", path="a.txt", old="Hello", new="x")
    with call.fails(ValueError, match=r"^No match in a.txt: the regex was not found"):
        call("str_replace", path="a.txt", old="^x", new="y", regex=True)
    assert (workspace / "a.txt").read_text() == "hello"


def test_str_replace_bad_input(call: Call, put: Put) -> None:
    put("a.txt", "hello")
    put("bin.dat", b"\xff\xfe")
    with call.fails(ValueError, match="Invalid regex pattern"):
        call("str_replace", path="a.txt", old="(", new="", regex=True)
    with call.fails(ValueError, match="Invalid replacement"):
        call("str_replace", path="a.txt", old="h", new=r"\9", regex=True)
    with call.fails(UnicodeDecodeError):
        call("str_replace", path="bin.dat", old="x", new="y")
    with call.fails(FileNotFoundError, match="File not found: nope"):
        call("str_replace", path="nope", old="x", new="y")
    with call.fails(ToolArgumentError, match="count"):
        call("str_replace", path="a.txt", old="h", new="y", count=-1)
    with call.fails(PermissionError):
        call("str_replace", path="../a.txt", old="h", new="y")


def test_str_replace_is_a_write() -> None:
    cls = BuiltinToolProvider.get_tool_class("str_replace")
    assert cls is not None
    assert cls.effect_tags == ("filesystem:write",)
    assert cls.parallel_safe is False


def test_catalogue_lists_jianmu_tools_after_bareagents() -> None:
    names = [t["name"] for t in get_tools()]
    jianmu = [
        "calculator",
        "python_repl",
        "list_dir",
        "glob_search",
        "grep_search",
        "file_info",
        "str_replace",
        "http_request",
        "duckduckgo_search",
    ]
    assert [n for n in names if n in jianmu] == jianmu
    first = names.index("calculator")
    assert all(names.index(n) < first for n in BASE_TOOLS + DEFERRED_TOOLS)
