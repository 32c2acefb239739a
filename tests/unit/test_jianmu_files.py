"""One read_file/write_file for both documents, Jianmu's limits from config, list_dir, and
Jianmu's names for bash's command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toold.config import TooldConfig
from toold.tools import ToolArgumentError
from toold.tools.builtin.coding import human_size

from .conftest import Call, Put, ToolsWith


def _bound(tools_with: ToolsWith, **config: Any) -> Call:
    """The workspace's tools under a configuration of ``config``'s sections."""
    return tools_with(config=TooldConfig.model_validate(config))


# read_file / write_file with Jianmu's names


def test_path_is_accepted_for_file_path(call: Call, put: Put) -> None:
    put("a.txt", "alpha\nbeta\n")
    assert call("read_file", path="a.txt") == "1: alpha\n2: beta"
    assert call("write_file", path="b.txt", content="x") == "Wrote 1 characters to b.txt"
    assert call("edit_file", path="b.txt", old_text="x", new_text="y") == "Edited b.txt"


@pytest.mark.parametrize(
    "names",
    [
        {"file_path": "a.txt", "path": "a.txt"},
        {"file_path": "", "path": ".env"},  # the guard must judge the path that is used
        {"file_path": None, "path": "a.txt"},
    ],
)
def test_two_names_for_one_argument_are_refused_whatever_the_values(
    call: Call, put: Put, names: dict[str, Any]
) -> None:
    put("a.txt", "alpha\n")
    with call.fails(ToolArgumentError, match="file_path and path name the same argument"):
        call("read_file", **names)


def test_conflicting_names_are_refused(call: Call) -> None:
    with call.fails(ToolArgumentError, match="file_path and path name the same argument"):
        call("read_file", file_path="a.txt", path="b.txt")


def test_missing_path_names_both_spellings(call: Call) -> None:
    with call.fails(
        ToolArgumentError, match=r"file_path: Field required; pass file_path \(or path\)"
    ):
        call("write_file", content="x")


def test_schema_stays_the_base_tools() -> None:
    from toold.compat.bareagent import get_tools

    by_name = {t["name"]: t["parameters"] for t in get_tools()}
    assert list(by_name["read_file"]["properties"]) == ["file_path", "offset", "limit"]
    assert by_name["write_file"]["required"] == ["file_path", "content"]


def test_encoding_reads_and_writes(call: Call, put: Put, workspace: Path) -> None:
    put("latin.txt", "café\n".encode("latin-1"))
    assert call("read_file", path="latin.txt", encoding="latin-1") == "1: café"
    assert call("write_file", path="out.txt", content="né", encoding="latin-1") == (
        "Wrote 2 characters to out.txt"
    )
    assert (workspace / "out.txt").read_bytes() == "né".encode("latin-1")


def test_undecodable_file_names_the_fix(call: Call, put: Put) -> None:
    put("latin.txt", "café".encode("latin-1"))
    with call.fails(UnicodeDecodeError, match="Cannot decode file with utf-8 encoding"):
        call("read_file", path="latin.txt")


def test_unknown_encoding(call: Call, put: Put) -> None:
    put("a.txt", "a")
    with call.fails(LookupError, match="unknown encoding: klingon"):
        call("read_file", path="a.txt", encoding="klingon")


def test_append_with_jianmu_names(call: Call, workspace: Path) -> None:
    call("write_file", path="log.txt", content="one\n")
    assert call("write_file", path="log.txt", content="two\n", append=True) == (
        "Appended 4 characters to log.txt"
    )
    assert (workspace / "log.txt").read_text() == "one\ntwo\n"


def test_allowed_extensions(tools_with: ToolsWith, workspace: Path, put: Put) -> None:
    call = _bound(tools_with, files={"allowed_extensions": [".txt", "md"]})
    put("a.txt", "ok")
    put("b.py", "no")
    assert call("read_file", path="a.txt") == "1: ok"
    assert call("write_file", path="notes.MD", content="x") == "Wrote 1 characters to notes.MD"
    with call.fails(ValueError, match=r"^Extension not allowed: \.py \(files\.allowed"):
        call("read_file", path="b.py")
    with call.fails(ValueError, match=r"^Extension not allowed: \(none\)"):
        call("write_file", path="Makefile", content="x")
    assert not (workspace / "Makefile").exists()


def test_max_content_size(tools_with: ToolsWith, workspace: Path) -> None:
    call = _bound(tools_with, files={"max_content_size": 4})
    assert call("write_file", path="ok.txt", content="abcd") == "Wrote 4 characters to ok.txt"
    with call.fails(ValueError, match=r"^Content too large \(6 bytes, max: 4\)"):
        call("write_file", path="big.txt", content="ééé")  # 3 characters, 6 bytes
    assert not (workspace / "big.txt").exists()


def test_create_dirs_false(tools_with: ToolsWith, workspace: Path) -> None:
    call = _bound(tools_with, files={"create_dirs": False})
    with call.fails(FileNotFoundError, match=r"Parent folder does not exist: new/deeper"):
        call("write_file", path="new/deeper/a.txt", content="x")
    assert not (workspace / "new").exists()
    (workspace / "new").mkdir()
    assert call("write_file", path="new/a.txt", content="x") == "Wrote 1 characters to new/a.txt"


def test_max_file_size_applies_to_jianmu_reads(
    tools_with: ToolsWith, workspace: Path, put: Put
) -> None:
    call = _bound(tools_with, limits={"max_file_size": 3})
    put("big.txt", "abcd")
    with call.fails(ValueError, match=r"^File too large: 4 bytes \(max: 3\)"):
        call("read_file", path="big.txt")


def test_path_outside_the_workspace(call: Call, workspace: Path) -> None:
    (workspace.parent / "ws_evil").mkdir()
    (workspace.parent / "ws_evil" / "s.txt").write_text("secret")
    with call.fails(PermissionError, match="escapes workspace"):
        call("read_file", path="../ws_evil/s.txt")
    with call.fails(PermissionError, match="Absolute paths are not allowed"):
        call("write_file", path=str(workspace / "x.txt"), content="x")


# list_dir


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KB"), (1536, "1.5 KB"), (5 * 1024**2, "5.0 MB")],
)
def test_human_size(size: int, text: str) -> None:
    assert human_size(size) == text


def test_list_dir_table(call: Call, put: Put, workspace: Path) -> None:
    put("b.txt", "x" * 12)
    put("a.bin", b"\0" * 1536)
    put("sub/inner.txt", "deep")
    (workspace / ".hidden").write_text("h")
    assert call("list_dir").splitlines() == [
        "FILE        1 B  .hidden",
        "FILE     1.5 KB  a.bin",
        "FILE       12 B  b.txt",
        "DIR           -  sub",
    ]
    assert call("list_dir", path="sub") == "FILE        4 B  inner.txt"


def test_list_dir_sorted_by_name_not_type(call: Call, put: Put) -> None:
    put("b/x.txt", "")
    put("a.txt", "")
    put("c.txt", "")
    names = [line.split()[-1] for line in call("list_dir").splitlines()]
    assert names == ["a.txt", "b", "c.txt"]


def test_list_dir_empty_and_errors(call: Call, put: Put, workspace: Path) -> None:
    (workspace / "empty").mkdir()
    assert call("list_dir", path="empty") == "(empty directory)"
    put("f.txt", "x")
    with call.fails(NotADirectoryError, match=r"Not a directory: f\.txt"):
        call("list_dir", path="f.txt")
    with call.fails(FileNotFoundError, match="Directory not found: nope"):
        call("list_dir", path="nope")
    with call.fails(PermissionError):
        call("list_dir", path="..")


def test_list_dir_does_not_follow_symlinks(call: Call, workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "link").symlink_to(workspace / "real")
    lines = call("list_dir").splitlines()
    assert lines[0].startswith("FILE") and lines[0].endswith("link")
    assert lines[1].startswith("DIR") and lines[1].endswith("real")
    with call.fails(PermissionError, match="Symlink detected"):
        call("list_dir", path="link")


# bash: Jianmu's command, input, cmd


def test_bash_accepts_input_and_cmd(call: Call) -> None:
    assert call("bash", input="echo from-input") == "from-input"
    assert call("bash", cmd="echo from-cmd") == "from-cmd"


@pytest.mark.parametrize(
    "names",
    [{"command": "", "cmd": "ls"}, {"command": "ls", "input": "ls"}, {"cmd": "", "input": "x"}],
)
def test_bash_refuses_two_names_for_the_command(call: Call, names: dict[str, Any]) -> None:
    with call.fails(ToolArgumentError, match="name the same argument"):
        call("bash", **names)


@pytest.mark.parametrize("command", ["", " ", "\n\t "])
def test_bash_refuses_an_empty_command(call: Call, command: str) -> None:
    with call.fails(ToolArgumentError, match="the command is empty"):
        call("bash", command=command)


def test_bash_without_a_command_names_every_spelling(call: Call) -> None:
    with call.fails(ToolArgumentError, match=r"command: Field required; pass command \(or"):
        call("bash", timeout=5)


def test_bash_conflicting_commands_are_refused(call: Call) -> None:
    with call.fails(ToolArgumentError, match="command and cmd name the same argument"):
        call("bash", command="echo a", cmd="echo b")
