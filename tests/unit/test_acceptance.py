"""BareAgent's own test cases for the six base tools (REFERENCE.md §1), with the exact strings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toold.compat.bareagent import get_tools

from .conftest import Call, Put


def test_write_then_read_nested_file(call: Call, workspace: Path) -> None:
    assert (
        call("write_file", file_path="nested/example.txt", content="alpha\nbeta\n")
        == "Wrote 11 characters to nested/example.txt"
    )
    assert (workspace / "nested" / "example.txt").read_text(encoding="utf-8") == "alpha\nbeta\n"
    assert call("read_file", file_path="nested/example.txt") == "1: alpha\n2: beta"
    assert call("read_file", file_path="nested/example.txt", offset=1, limit=1) == "2: beta"


def test_edit_replaces_text(call: Call, put: Put, workspace: Path) -> None:
    put("sample.txt", "hello world")
    assert (
        call("edit_file", file_path="sample.txt", old_text="world", new_text="there")
        == "Edited sample.txt"
    )
    assert (workspace / "sample.txt").read_text(encoding="utf-8") == "hello there"


def test_edit_missing_text_raises(call: Call, put: Put) -> None:
    put("sample.txt", "hello world")
    with call.fails(ValueError, match="old_text not found"):
        call("edit_file", file_path="sample.txt", old_text="absent", new_text="x")


def test_chinese_text_round_trips(call: Call, workspace: Path) -> None:
    text = "你好，世界\n第二行：测试\n"
    assert call("write_file", file_path="中文/说明.txt", content=text) == (
        f"Wrote {len(text)} characters to 中文/说明.txt"
    )
    assert (workspace / "中文" / "说明.txt").read_bytes() == text.encode("utf-8")
    assert call("read_file", file_path="中文/说明.txt") == "1: 你好，世界\n2: 第二行：测试"


@pytest.fixture
def needle_tree(put: Put) -> None:
    put("src/main.py", "print('needle')")
    put("src/helper.txt", "needle line")


@pytest.mark.usefixtures("needle_tree")
def test_glob_recursive_pattern(call: Call) -> None:
    assert call("glob", pattern="**/*.py") == ["src/main.py"]


@pytest.mark.usefixtures("needle_tree")
def test_grep_finds_lines_in_sorted_files(call: Call) -> None:
    assert call("grep", pattern="needle") == [
        "src/helper.txt:1:needle line",
        "src/main.py:1:print('needle')",
    ]


@pytest.mark.usefixtures("needle_tree")
def test_grep_include_filter(call: Call) -> None:
    assert call("grep", pattern="needle", include="**/*.py") == ["src/main.py:1:print('needle')"]


@pytest.fixture
def ignored_tree(put: Put) -> None:
    put(".venv/lib.py", "needle")
    put(".git/hook.py", "needle")
    put(".pytest_cache/cache.py", "needle")


@pytest.mark.usefixtures("ignored_tree")
def test_ignored_folders_are_skipped_by_default(call: Call) -> None:
    assert call("glob", pattern="*.py") == []
    assert call("grep", pattern="needle") == []


@pytest.mark.usefixtures("ignored_tree")
def test_explicit_path_searches_inside_ignored_folder(call: Call) -> None:
    assert call("glob", pattern="*.py", path=".venv") == [".venv/lib.py"]
    assert call("grep", pattern="needle", path=".venv") == [".venv/lib.py:1:needle"]


def test_glob_star_walks_subfolders(call: Call, put: Put) -> None:
    put("top.py", "")
    put("sub/deep.py", "")
    put("sub/nested/leaf.py", "")
    put("sub/notes.txt", "")
    assert call("glob", pattern="*.py") == ["sub/deep.py", "sub/nested/leaf.py", "top.py"]


def test_no_match_is_an_empty_list(call: Call, put: Put) -> None:
    put("a.txt", "alpha")
    assert call("glob", pattern="*.rs") == []
    assert call("grep", pattern="zzz") == []


@pytest.fixture
def alpha_tree(put: Put) -> None:
    put("a.txt", "alpha\nbeta\nalpha\n")
    put("b.txt", "alpha\ngamma\n")


@pytest.mark.usefixtures("alpha_tree")
def test_grep_output_modes(call: Call) -> None:
    assert call("grep", pattern="alpha") == ["a.txt:1:alpha", "a.txt:3:alpha", "b.txt:1:alpha"]
    assert call("grep", pattern="alpha", output_mode="content") == [
        "a.txt:1:alpha",
        "a.txt:3:alpha",
        "b.txt:1:alpha",
    ]
    assert call("grep", pattern="alpha", output_mode="files_with_matches") == ["a.txt", "b.txt"]
    assert call("grep", pattern="alpha", output_mode="count") == ["a.txt:2", "b.txt:1"]


@pytest.mark.usefixtures("alpha_tree")
def test_grep_unknown_output_mode_behaves_as_content(call: Call) -> None:
    assert call("grep", pattern="alpha", output_mode="lines") == [
        "a.txt:1:alpha",
        "a.txt:3:alpha",
        "b.txt:1:alpha",
    ]


def test_bash_runs_in_bound_workspace(
    call: Call, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert call("bash", command="pwd") == os.fspath(workspace)


def test_bash_replacement_character_passes_through(call: Call) -> None:
    assert call("bash", command="printf 'a\\xffb'") == "a\ufffdb"
    assert call("bash", command="printf 'x\\ufffdy'") == "x\ufffdy"


def test_mutating_get_tools_result_does_not_leak() -> None:
    first = get_tools()
    first[0]["name"] = "hijacked"
    first[0]["parameters"]["properties"].clear()
    first[1]["parameters"]["required"].append("zzz")
    first.pop()
    second = get_tools()
    assert len(second) == len(first) + 1
    assert second[0]["name"] == "bash"
    assert "command" in second[0]["parameters"]["properties"]
    assert "zzz" not in second[1]["parameters"]["required"]
