"""What a permission prompt shows of an edit (toold.tools.preview): capped diff in the
message, or the permissions/preview notification's files, validated by the wire model."""

from __future__ import annotations

from pathlib import Path

from toold.tools.base import FileEdit
from toold.tools.builtin.edits import MultiEditTool
from toold.tools.builtin.files import ReadFileTool, WriteFileTool
from toold.tools.preview import (
    FILE_MAX_BYTES,
    MESSAGE_DIFF_CHARS,
    capped,
    in_message,
    notification,
    preview_edits,
)
from toold.tools.runtime import ToolRuntime
from toold_protocol.models import PermissionsPreview


def test_capped_says_how_much_was_left_out() -> None:
    assert capped("abc", 3) == "abc"
    assert capped("abcdef", 4) == "abcd\n... (2 more characters)"


def test_the_message_gets_the_diff_capped(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\n" * 5000)
    tool = WriteFileTool(ToolRuntime(workspace=workspace))
    edits = preview_edits(tool, {"file_path": "a.txt", "content": ""})
    assert isinstance(edits, list)
    text = in_message(edits)
    body, marker = text.rsplit("\n", 1)
    assert len(body) == MESSAGE_DIFF_CHARS and marker.startswith("... (")
    assert text.startswith("--- a/a.txt\n+++ b/a.txt\n")


def test_a_change_that_cannot_be_computed_says_why(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    tool = MultiEditTool(ToolRuntime(workspace=workspace))
    args = {"file_path": "a.txt", "edits": [{"old_text": "zzz", "new_text": "y"}]}
    said = preview_edits(tool, args)
    assert isinstance(said, str) and said.startswith("(no preview: ValueError: edits[0]")
    assert preview_edits(ReadFileTool(ToolRuntime(workspace=workspace)), {}) is None
    assert preview_edits(None, {}) is None


def test_the_notification_keeps_nulls_and_leaves_out_large_or_binary_files() -> None:
    big = b"y" * (FILE_MAX_BYTES + 1)
    edits = [
        FileEdit("new.txt", None, b"hi\n"),
        FileEdit("gone.txt", b"bye\n", None),
        FileEdit("bin.dat", b"\xff\xfe", b"\x00"),
        FileEdit("big.txt", b"x\n", big),
    ]
    params = notification("apply_patch", "apply_patch always asks", edits)
    assert params["files"] == [
        {"path": "new.txt", "original": None, "modified": "hi\n"},
        {"path": "gone.txt", "original": "bye\n", "modified": None},
    ]
    assert "Binary file bin.dat differs" in params["diff"]
    assert params["diff"].endswith(" more characters)")  # a MiB of diff at most
    wire = PermissionsPreview.model_validate(params).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    assert wire["files"][0] == {"path": "new.txt", "original": None, "modified": "hi\n"}


def test_the_message_shows_control_and_bidi_characters_as_escapes(workspace: Path) -> None:
    """The agent writes the content: a carriage return, a terminal escape sequence or a
    right-to-left override must not hide or reorder what the user is asked to allow."""
    (workspace / "a.txt").write_text("safe\n")
    tool = WriteFileTool(ToolRuntime(workspace=workspace))
    sneaky = "safe\rrm -rf ~ \x1b[2K\x1b[1Ainnocent\u202e)(lave\u200b\u2028\n"
    edits = preview_edits(tool, {"file_path": "a.txt", "content": sneaky})
    assert isinstance(edits, list)
    text = in_message(edits)
    assert "+safe\\rrm -rf ~ \\x1b[2K\\x1b[1Ainnocent\\u202e)(lave\\u200b\\u2028\n" in text
    assert not any(c in text for c in "\r\x1b\u202e\u200b\u2028")
    huge = in_message("(no preview: ValueError: " + "\x1b" * 10_000 + ")")
    assert "\x1b" not in huge and len(huge) < MESSAGE_DIFF_CHARS + 100
