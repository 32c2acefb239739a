"""read_file, write_file and edit_file on real files in a tmp_path workspace."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from toold.config import FilesConfig, LimitsConfig, TooldConfig
from toold.tools import ToolArgumentError

from .conftest import Call, Put, ToolsWith

# read_file


def test_read_numbers_lines_from_one(call: Call, put: Put) -> None:
    put("f.txt", "a\nb\nc\n")
    assert call("read_file", file_path="f.txt") == "1: a\n2: b\n3: c"


def test_read_without_trailing_newline(call: Call, put: Put) -> None:
    put("f.txt", "a\n\nc")
    assert call("read_file", file_path="f.txt") == "1: a\n2: \n3: c"


def test_read_offset_and_limit(call: Call, put: Put) -> None:
    put("f.txt", "".join(f"line{i}\n" for i in range(1, 11)))
    assert call("read_file", file_path="f.txt", offset=3, limit=2) == "4: line4\n5: line5"
    assert call("read_file", file_path="f.txt", offset=8) == "9: line9\n10: line10"
    assert call("read_file", file_path="f.txt", limit=1) == "1: line1"
    assert call("read_file", file_path="f.txt", limit=0) == ""
    assert call("read_file", file_path="f.txt", offset=10) == ""
    assert call("read_file", file_path="f.txt", offset=50, limit=5) == ""


def test_read_universal_newlines(call: Call, put: Put) -> None:
    put("f.txt", b"one\r\ntwo\rthree\n")
    assert call("read_file", file_path="f.txt") == "1: one\n2: two\n3: three"


def test_read_empty_file(call: Call, put: Put) -> None:
    put("empty.txt", "")
    assert call("read_file", file_path="empty.txt") == ""


def test_read_negative_offset(call: Call, put: Put) -> None:
    put("f.txt", "a\n")
    with call.fails(ValueError, match=r"^offset must be >= 0$"):
        call("read_file", file_path="f.txt", offset=-1)


def test_read_negative_limit(call: Call, put: Put) -> None:
    put("f.txt", "a\n")
    with call.fails(ValueError, match=r"^limit must be >= 0$"):
        call("read_file", file_path="f.txt", limit=-1)


def test_read_missing_file(call: Call) -> None:
    with call.fails(FileNotFoundError, match=r"^File not found: nope\.txt$"):
        call("read_file", file_path="nope.txt")
    with call.fails(FileNotFoundError, match=r"^File not found: no/dir/f\.txt$"):
        call("read_file", file_path="./no/dir/../dir/f.txt")


def test_a_fifo_is_not_a_file_and_never_blocks(call: Call, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    for name, args in (
        ("read_file", {}),
        ("edit_file", {"old_text": "a", "new_text": "b"}),
        ("write_file", {"content": "x", "append": True}),
        ("write_file", {"content": "x"}),
    ):
        with call.fails(ValueError, match=r"^Not a file: pipe"):
            call(name, file_path="pipe", **args)
    assert stat.S_ISFIFO((workspace / "pipe").lstat().st_mode)


def test_read_non_utf8_file(call: Call, put: Put) -> None:
    put("latin1.txt", "café".encode("latin-1"))
    with call.fails(UnicodeDecodeError):
        call("read_file", file_path="latin1.txt")


def test_read_directory_is_an_error(call: Call, workspace: Path) -> None:
    (workspace / "d").mkdir()
    with call.fails(IsADirectoryError):
        call("read_file", file_path="d")


def test_read_file_too_large(tools_with: ToolsWith, put: Put) -> None:
    put("big.txt", "x" * 11)
    put("ok.txt", "x" * 10)
    config = TooldConfig(limits=LimitsConfig(max_file_size=10))
    call = tools_with(config=config)
    assert call("read_file", file_path="ok.txt") == "1: " + "x" * 10
    with call.fails(ValueError, match=r"^File too large: 11 bytes \(max: 10\)"):
        call("read_file", file_path="big.txt")


def test_read_requires_file_path(call: Call) -> None:
    with call.fails(ToolArgumentError, match="file_path: Field required"):
        call("read_file")


def test_read_refuses_escape(call: Call, workspace: Path) -> None:
    (workspace.parent / "secret.txt").write_text("s")
    with call.fails(PermissionError, match=r"escapes workspace"):
        call("read_file", file_path="../secret.txt")


# write_file


def test_write_creates_parent_folders(call: Call, workspace: Path) -> None:
    assert call("write_file", file_path="a/b/c/d.txt", content="x") == (
        "Wrote 1 characters to a/b/c/d.txt"
    )
    assert (workspace / "a" / "b" / "c" / "d.txt").read_text() == "x"


def test_write_counts_characters_not_bytes(call: Call, workspace: Path) -> None:
    assert call("write_file", file_path="u.txt", content="日本語") == (
        "Wrote 3 characters to u.txt"
    )
    assert (workspace / "u.txt").read_bytes() == "日本語".encode()


def test_write_reports_normalised_relative_path(call: Call, workspace: Path) -> None:
    assert call("write_file", file_path="./x/../y.txt", content="ab") == (
        "Wrote 2 characters to y.txt"
    )
    assert (workspace / "y.txt").read_text() == "ab"


def test_write_overwrites_whole_file(call: Call, put: Put, workspace: Path) -> None:
    put("f.txt", "a much longer original text\n")
    assert call("write_file", file_path="f.txt", content="short") == ("Wrote 5 characters to f.txt")
    assert (workspace / "f.txt").read_text() == "short"


def test_write_empty_content(call: Call, workspace: Path) -> None:
    assert call("write_file", file_path="e.txt", content="") == "Wrote 0 characters to e.txt"
    assert (workspace / "e.txt").read_bytes() == b""


def test_write_is_atomic_replace(call: Call, put: Put, workspace: Path) -> None:
    target = put("f.txt", "old contents")
    os.chmod(target, 0o600)
    before = target.stat().st_ino
    with open(target, encoding="utf-8") as reader:
        call("write_file", file_path="f.txt", content="new contents")
        # A rename swapped in a new file: an open reader still sees the old one whole.
        assert reader.read() == "old contents"
    assert target.read_text() == "new contents"
    assert target.stat().st_ino != before
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in workspace.iterdir()) == ["f.txt"]


def test_write_keeps_newlines_verbatim(call: Call, workspace: Path) -> None:
    call("write_file", file_path="crlf.txt", content="a\r\nb\n")
    assert (workspace / "crlf.txt").read_bytes() == b"a\r\nb\n"


def test_append_adds_to_the_end(call: Call, put: Put, workspace: Path) -> None:
    put("log.txt", "one\n")
    assert call("write_file", file_path="log.txt", content="two\n", append=True) == (
        "Appended 4 characters to log.txt"
    )
    assert (workspace / "log.txt").read_text() == "one\ntwo\n"


def test_append_creates_file_and_parents(call: Call, workspace: Path) -> None:
    assert call("write_file", file_path="new/dir/log.txt", content="é", append=True) == (
        "Appended 1 characters to new/dir/log.txt"
    )
    assert (workspace / "new" / "dir" / "log.txt").read_bytes() == "é".encode()


def test_write_to_workspace_root_is_refused(call: Call, tmp_path: Path) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    for path in ("", "."):
        with call.fails(IsADirectoryError):
            call("write_file", file_path=path, content="x")
    # No temp file was staged next to the workspace.
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_write_to_directory_is_refused(call: Call, workspace: Path) -> None:
    (workspace / "d").mkdir()
    with call.fails(IsADirectoryError, match="Is a directory: d"):
        call("write_file", file_path="d", content="x")
    assert list((workspace / "d").iterdir()) == []


def test_write_through_symlinked_folder_is_refused(
    call: Call, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    with call.fails(PermissionError, match="Symlink detected in path chain"):
        call("write_file", file_path="link/f.txt", content="x")
    with call.fails(PermissionError, match="Symlink detected in path chain"):
        call("write_file", file_path="link/f.txt", content="x", append=True)
    assert list(outside.iterdir()) == []


def test_write_to_a_symlink_is_refused_and_the_target_kept(
    call: Call, workspace: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target.txt"
    target.write_text("keep")
    (workspace / "link.txt").symlink_to(target)
    for append in (False, True):
        with call.fails(PermissionError, match="Symlink detected in path chain"):
            call("write_file", file_path="link.txt", content="x", append=append)
    assert target.read_text() == "keep" and (workspace / "link.txt").is_symlink()


def test_an_append_to_a_hard_linked_file_is_refused(call: Call, put: Put, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    os.link(outside, put("dir/placeholder", "").parent / "hard.txt")
    with call.fails(PermissionError, match="2 hard links"):
        call("write_file", file_path="dir/hard.txt", content="x", append=True)
    assert outside.read_text() == "keep\n"


@pytest.mark.parametrize("fsync", [False, True])
def test_writes_are_atomic_with_or_without_fsync(
    tools_with: ToolsWith, workspace: Path, put: Put, fsync: bool
) -> None:
    target = put("f.txt", "old")
    os.chmod(target, 0o600)
    config = TooldConfig(files=FilesConfig(fsync=fsync))
    call = tools_with(config=config)
    assert call("write_file", file_path="f.txt", content="new") == "Wrote 3 characters to f.txt"
    assert call("edit_file", file_path="f.txt", old_text="new", new_text="newer") == (
        "Edited f.txt"
    )
    assert target.read_text() == "newer"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in workspace.iterdir()) == ["f.txt"]  # no temp file left


def test_write_below_a_file_names_the_problem(call: Call, put: Put) -> None:
    put("f.txt", "x")
    with call.fails(NotADirectoryError, match=r"^A parent of f\.txt/g\.txt is a file"):
        call("write_file", file_path="f.txt/g.txt", content="x")


def test_write_refuses_absolute_path(call: Call, tmp_path: Path) -> None:
    target = tmp_path / "abs.txt"
    with call.fails(PermissionError, match="Absolute paths are not allowed"):
        call("write_file", file_path=os.fspath(target), content="x")
    assert not target.exists()


# edit_file


def test_edit_replaces_first_occurrence_only(call: Call, put: Put, workspace: Path) -> None:
    put("f.txt", "aXbXcX")
    assert call("edit_file", file_path="f.txt", old_text="X", new_text="Y") == "Edited f.txt"
    assert (workspace / "f.txt").read_text() == "aYbXcX"


def test_edit_multiline_text(call: Call, put: Put, workspace: Path) -> None:
    put("src/m.py", "def f():\n    return 1\n")
    assert call(
        "edit_file", file_path="src/m.py", old_text="    return 1\n", new_text="    return 2\n"
    ) == ("Edited src/m.py")
    assert (workspace / "src" / "m.py").read_text() == "def f():\n    return 2\n"


def test_edit_missing_text_leaves_file_alone(call: Call, put: Put, workspace: Path) -> None:
    put("f.txt", "hello")
    with call.fails(ValueError, match=r"^old_text not found in file$"):
        call("edit_file", file_path="f.txt", old_text="bye", new_text="x")
    assert (workspace / "f.txt").read_text() == "hello"


def test_edit_is_case_and_whitespace_exact(call: Call, put: Put) -> None:
    put("f.txt", "Hello  world")
    for old in ("hello", "Hello world"):
        with call.fails(ValueError, match="old_text not found in file"):
            call("edit_file", file_path="f.txt", old_text=old, new_text="x")


def test_edit_empty_old_text_is_an_argument_error(call: Call, put: Put) -> None:
    put("f.txt", "hello")
    with call.fails(ToolArgumentError, match="old_text"):
        call("edit_file", file_path="f.txt", old_text="", new_text="x")


def test_edit_missing_file(call: Call) -> None:
    with call.fails(FileNotFoundError, match=r"^File not found: nope\.txt$"):
        call("edit_file", file_path="nope.txt", old_text="a", new_text="b")


def test_edit_keeps_crlf_and_mode(call: Call, put: Put) -> None:
    target = put("f.txt", b"one\r\ntwo\r\n")
    os.chmod(target, 0o640)
    call("edit_file", file_path="f.txt", old_text="two", new_text="2")
    assert target.read_bytes() == b"one\r\n2\r\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_edit_non_utf8_file(call: Call, put: Put) -> None:
    put("f.txt", b"caf\xe9")
    with call.fails(UnicodeDecodeError):
        call("edit_file", file_path="f.txt", old_text="caf", new_text="x")


def test_concurrent_edits_lose_nothing(call: Call, put: Put) -> None:
    target = put("log.txt", "END")

    async def many() -> None:
        edits = (
            call.run("edit_file", file_path="log.txt", old_text="END", new_text=f"{i}\nEND")
            for i in range(40)
        )
        assert not any(done.is_error for done in await asyncio.gather(*edits))

    asyncio.run(many())
    lines = target.read_text().split("\n")
    assert lines[-1] == "END"
    assert sorted(lines[:-1], key=int) == [str(i) for i in range(40)]
