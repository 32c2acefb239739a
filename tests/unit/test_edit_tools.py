"""multi_edit, apply_patch and dry runs: all or nothing, on a real workspace."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from toold.tools.base import ToolArgumentError
from toold.tools.builtin.edits import parse_patch
from toold.tools.builtin.files import WriteFileTool
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet

from .conftest import Call, Put

PATCH = """\
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
--- /dev/null
+++ b/sub/new.txt
@@ -0,0 +1,2 @@
+hello
+world
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
"""


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (to compare before and after)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# -- multi_edit ---------------------------------------------------------------------------


def test_multi_edit_applies_in_order(call: Call, put: Put, workspace: Path) -> None:
    put("m.py", "a = 1\nb = 2\nc = 3\n")
    edits = [
        {"old_text": "a = 1", "new_text": "a = 10"},
        {"old_text": "a = 10\nb", "new_text": "a = 10\nbb"},  # sees the edit before it
        {"old_text": "3", "new_text": "30"},
    ]
    assert call("multi_edit", file_path="m.py", edits=edits) == "Applied 3 edits to m.py"
    assert (workspace / "m.py").read_text() == "a = 10\nbb = 2\nc = 30\n"


def test_a_botched_multi_edit_changes_nothing(call: Call, put: Put, workspace: Path) -> None:
    put("m.py", "x = 1\nx = 1\ny = 2\n")
    before = tree(workspace)
    missing = [{"old_text": "y = 2", "new_text": "y = 3"}, {"old_text": "zzz", "new_text": ""}]
    with call.fails(ValueError, match=r"^edits\[1\]: old_text not found in m.py"):
        call("multi_edit", file_path="m.py", edits=missing)
    ambiguous = [{"old_text": "y", "new_text": "z"}, {"old_text": "x = 1", "new_text": "x = 2"}]
    with call.fails(ValueError, match=r"^edits\[1\]: old_text occurs 2 times in m.py"):
        call("multi_edit", file_path="m.py", edits=ambiguous)
    assert tree(workspace) == before
    every = [{"old_text": "x = 1", "new_text": "x = 2", "replace_all": True}]
    call("multi_edit", file_path="m.py", edits=every)
    assert (workspace / "m.py").read_text() == "x = 2\nx = 2\ny = 2\n"


def test_multi_edit_arguments_are_checked(call: Call, put: Put) -> None:
    put("m.py", "x")
    with call.fails(ToolArgumentError, match="edits"):
        call("multi_edit", file_path="m.py", edits=[])
    with call.fails(ToolArgumentError, match="old_text"):
        call("multi_edit", file_path="m.py", edits=[{"old_text": "", "new_text": "y"}])


# -- dry runs -----------------------------------------------------------------------------


def test_multi_edit_cannot_grow_a_file_past_the_size_limits(
    call: Call, put: Put, workspace: Path
) -> None:
    """replace_all edits compound (a→aa, 30 times, is a gigabyte of memory), and a dry run
    needs no approval: the size is checked before each replacement."""
    put("a.txt", "a")
    doubling = [{"old_text": "a", "new_text": "aa", "replace_all": True}] * 24
    for dry_run in (True, False):
        with call.fails(ValueError, match=r"edits\[20\]: a\.txt would grow to 2097152"):
            call("multi_edit", file_path="a.txt", edits=doubling, dry_run=dry_run)
    assert (workspace / "a.txt").read_text() == "a"
    many = [{"old_text": "a", "new_text": "a"}] * 1001
    with call.fails(ToolArgumentError, match="edits"):
        call("multi_edit", file_path="a.txt", edits=many, dry_run=True)


def test_every_previewing_tool_answers_a_diff_and_changes_nothing(
    call: Call, put: Put, workspace: Path
) -> None:
    put("a.txt", "one\ntwo\nthree\n")
    put("gone.txt", "bye\n")
    before = tree(workspace)
    diff = call("write_file", file_path="a.txt", content="new\n", dry_run=True)
    assert diff.startswith("--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1 @@\n-one\n")
    created = call("write_file", file_path="n.txt", content="x", dry_run=True)
    assert (
        created == "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"
    )
    edit = call("edit_file", file_path="a.txt", old_text="two", new_text="2", dry_run=True)
    assert "-two\n+2\n" in edit
    replaced = call("str_replace", path="a.txt", old="t(..)", new=r"T\1", regex=True, dry_run=True)
    assert "+Two\n+Three\n" in replaced
    multi = [{"old_text": "one", "new_text": "1"}]
    assert "+1\n" in call("multi_edit", file_path="a.txt", edits=multi, dry_run=True)
    patch = call("apply_patch", patch=PATCH, dry_run=True)
    assert "+++ b/sub/new.txt" in patch and "+++ /dev/null" in patch and "+TWO" in patch
    assert call("write_file", file_path="a.txt", content="one\ntwo\nthree\n", dry_run=True) == (
        "No changes."
    )
    assert tree(workspace) == before


def test_a_dry_run_never_reaches_a_run_that_ignores_it(workspace: Path, put: Put) -> None:
    """A subclass whose ``run`` knows nothing of dry runs (toold acp's editor-backed
    write_file is one) still changes nothing: Tool.call answers the dry run itself."""

    class Careless(WriteFileTool):
        def run(self, args: Any) -> str:
            (workspace / "a.txt").write_text("written anyway")
            return "wrote"

    put("a.txt", "one\n")
    tool = Careless(ToolRuntime(workspace=workspace))
    args = {"file_path": "a.txt", "content": "two\n", "dry_run": True}
    assert "+two" in asyncio.run(user_call(ToolSet([tool]), tool.name, args)).content
    assert (workspace / "a.txt").read_text() == "one\n"


# -- apply_patch ----------------------------------------------------------------------------


def test_apply_patch_creates_modifies_and_deletes(call: Call, put: Put, workspace: Path) -> None:
    put("a.txt", "one\ntwo\nthree\n")
    put("gone.txt", "bye\n")
    result = call("apply_patch", patch=PATCH)
    assert result == "Applied patch: modified a.txt, created sub/new.txt, deleted gone.txt"
    assert (workspace / "a.txt").read_text() == "one\nTWO\nthree\n"
    assert (workspace / "sub" / "new.txt").read_text() == "hello\nworld\n"
    assert not (workspace / "gone.txt").exists()


def test_a_hunk_that_does_not_apply_changes_no_file(call: Call, put: Put, workspace: Path) -> None:
    put("a.txt", "one\ntwo\nthree\n")
    put("gone.txt", "bye\n")
    put("src/x.py", "".join(f"line {i}\n" for i in range(1, 21)))
    bad = (
        PATCH
        + "--- a/src/x.py\n+++ b/src/x.py\n@@ -1,2 +1,2 @@\n-line 1\n+LINE 1\n line 2\n"
        + "@@ -10,4 +10,5 @@\n line 10\n line 11\n-line 99\n+x\n+y\n line 13\n"
    )
    before = tree(workspace)
    with call.fails(ValueError) as caught:
        call("apply_patch", patch=bad)
    assert str(caught.value).startswith(
        "b/src/x.py hunk 2 (@@ -10,4 +10,5 @@): removed line does not match line 12"
    )
    assert tree(workspace) == before


def test_context_is_checked_exactly_and_a_moved_hunk_is_pointed_at(call: Call, put: Put) -> None:
    put("x.txt", "a\nb\nc\nd\n")
    moved = "--- a/x.txt\n+++ b/x.txt\n@@ -1,2 +1,2 @@\n c\n-d\n+D\n"
    with call.fails(ValueError, match=r"hunk 1 .*line 1; its lines are found at line 3"):
        call("apply_patch", patch=moved)
    spaced = "--- a/x.txt\n+++ b/x.txt\n@@ -1,2 +1,2 @@\n a \n-b\n+B\n"
    with call.fails(ValueError, match="context does not match line 1"):
        call("apply_patch", patch=spaced)


def test_the_search_for_a_moved_hunk_is_bounded(
    call: Call, put: Put, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Looking for where a failed hunk's lines are costs lines x hunk size: a crafted
    hunk of 50,000 repeated lines took a minute, in a dry run nobody approves. Past
    HINT_BUDGET comparisons the error gives the general advice instead."""
    put("x.txt", "a\nb\nc\nd\n")
    moved = "--- a/x.txt\n+++ b/x.txt\n@@ -1,2 +1,2 @@\n c\n-d\n+D\n"
    monkeypatch.setattr("toold.tools.builtin.edits.HINT_BUDGET", 1)
    with call.fails(ValueError, match=r"line 1; read the file again and make the patch"):
        call("apply_patch", patch=moved, dry_run=True)


def test_newline_at_end_of_file_is_honoured(call: Call, put: Put, workspace: Path) -> None:
    put("n.txt", "a\nb")
    patch = "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
    call("apply_patch", patch=patch)
    assert (workspace / "n.txt").read_bytes() == b"a\nc\n"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("x\ny", "x\n"),  # the patch ends with the "No newline" marker of a removed line
        ("a\rb\nc\u2028d\x0ce\n", "a\rb\nC\u2028d\x0ce\n"),  # only \n ends a line
        ("keep\n" + "".join(f"{i % 97}\n" for i in range(5000)), "keep\n" + "new\n" * 4000),
    ],
)
def test_a_dry_runs_diff_applies_as_a_patch(
    call: Call, put: Put, workspace: Path, before: str, after: str
) -> None:
    """What a dry run (and a permission prompt) shows is a patch apply_patch takes back:
    lines split at \\n alone, and a middle past DIFF_MAX_LINES replaced whole (difflib
    took minutes on such files)."""
    put("f.txt", before)
    diff = call("write_file", file_path="f.txt", content=after, dry_run=True)
    call("apply_patch", patch=diff)
    assert (workspace / "f.txt").read_bytes() == after.encode()


def test_a_later_write_that_fails_puts_back_the_earlier_ones(
    call: Call, put: Put, workspace: Path
) -> None:
    put("a.txt", "one\ntwo\nthree\n")
    put("blocker", "a file, not a folder")
    patch = PATCH.split("--- a/gone.txt")[0].replace("sub/new.txt", "blocker/new.txt")
    before = tree(workspace)
    with call.fails(NotADirectoryError):
        call("apply_patch", patch=patch)
    assert tree(workspace) == before


@pytest.mark.parametrize(
    ("patch", "error"),
    [
        ("just some text\n", "no file changes found"),
        ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n+c\n", "cannot parse"),
        ("--- a/../out.txt\n+++ b/../out.txt\n@@ -0,0 +1 @@\n+x\n", "'..'"),
        ("--- /dev/null\n+++ /etc/passwd\n@@ -0,0 +1 @@\n+x\n", "plain relative path"),
        ("--- /dev/null\n+++ b/a/./b\n@@ -0,0 +1 @@\n+x\n", "'..'"),
        ("--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", "renames are not supported"),
        (
            "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n@@ -3 +3 @@\n-a\n+b\n",
            "names this file twice",
        ),
        (
            "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n"
            "@@ -0,0 +1 @@\n+/etc/passwd\n",
            "symlinks",
        ),
    ],
)
def test_bad_patches_are_refused_before_anything_runs(
    call: Call, workspace: Path, patch: str, error: str
) -> None:
    with call.fails(ToolArgumentError, match=error):
        call("apply_patch", patch=patch)
    assert tree(workspace) == {}


def test_a_patch_never_goes_through_a_symlinked_folder(
    call: Call, put: Put, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "t.txt").write_text("a\n")
    os.symlink(outside, workspace / "link")
    modify = "--- a/link/t.txt\n+++ b/link/t.txt\n@@ -1 +1 @@\n-a\n+b\n"
    with call.fails(PermissionError, match="Symlink"):
        call("apply_patch", patch=modify)
    create = "--- /dev/null\n+++ b/link/new.txt\n@@ -0,0 +1 @@\n+x\n"
    with call.fails(PermissionError, match="Symlink"):
        call("apply_patch", patch=create)
    assert sorted(os.listdir(outside)) == ["t.txt"] and (outside / "t.txt").read_text() == "a\n"


def test_a_created_file_must_not_exist_and_a_deleted_one_must_match(call: Call, put: Put) -> None:
    put("here.txt", "x\n")
    with call.fails(ValueError, match="creates it, but it already exists"):
        call("apply_patch", patch="--- /dev/null\n+++ b/here.txt\n@@ -0,0 +1 @@\n+y\n")
    with call.fails(ValueError, match="no such file"):
        call("apply_patch", patch="--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n")
    put("two.txt", "a\nb\n")
    with call.fails(ValueError, match="do not remove the whole file"):
        call("apply_patch", patch="--- a/two.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n")


def test_the_paths_a_patch_names() -> None:
    assert [f.path for f in parse_patch(PATCH)] == ["a.txt", "sub/new.txt", "gone.txt"]
    plain = "--- x.py\n+++ x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert [f.path for f in parse_patch(plain)] == ["x.py"]


def test_str_replace_cannot_grow_a_file_past_the_size_limits(
    call: Call, put: Put, workspace: Path
) -> None:
    """A one-character old and a long new, replaced everywhere, were a memory bomb that a
    dry run set off without approval; regex templates are counted as expanded."""
    put("a.txt", "a" * 1000)
    for args in (
        {"old": "a", "new": "x" * 10_000},
        {"old": "(a)", "new": "\\1" * 10_000, "regex": True},
    ):
        with call.fails(ValueError, match=r"a\.txt would grow to \d+ characters"):
            call("str_replace", path="a.txt", dry_run=True, **args)
    assert call("str_replace", path="a.txt", old="(a)", new="\\1b", regex=True, count=2) == (
        "Replaced 2 occurrences in a.txt"
    )
    assert (workspace / "a.txt").read_text() == "abab" + "a" * 998
