"""multi_edit and apply_patch: several changes at once, applied all or nothing.

multi_edit makes several exact replacements in one file, in order, in memory; the file is
written once, only when every replacement applied. apply_patch takes a unified diff over
one or more files.

The patch is parsed with ``unidiff`` when the arguments are validated, so a patch that
cannot be parsed fails before the guard sees it and never applies in part. Every file's
new content is computed first, each hunk's context and removed lines checked exactly at
the line its header names; only then is anything written (and, if a later write fails,
the files already written are put back). Paths take git's ``a/``/``b/`` prefixes and
``/dev/null`` for a created or deleted file; each must be a plain relative path inside
the workspace (no ``..``, not absolute, never through a symlink).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator
from unidiff import Hunk, PatchedFile, PatchSet, UnidiffParseError
from unidiff.constants import (
    LINE_TYPE_ADDED,
    LINE_TYPE_CONTEXT,
    LINE_TYPE_EMPTY,
    LINE_TYPE_NO_NEWLINE,
    LINE_TYPE_REMOVED,
)

from toold.tools.annotations import WRITES_FILE
from toold.tools.base import FileEdit, ToolArguments
from toold.tools.builtin._editing import EditingTool
from toold.tools.builtin.files import DRY_RUN, PathArguments, decode_text

DEV_NULL = "/dev/null"
HINT_BUDGET = 2_000_000
"""Most line comparisons spent looking for where a failed hunk's lines are instead."""


@dataclass(frozen=True)
class FilePatch:
    """One file of a patch: its path, whether it is created or deleted, and its hunks."""

    path: str
    label: str
    """How the patch names it (``b/src/x.py``), for error messages."""
    created: bool
    deleted: bool
    hunks: list[Hunk]


def _side(name: str | None, prefix: str) -> str | None:
    if name is None or name == DEV_NULL:
        return None
    return name[len(prefix) :] if name.startswith(prefix) else name


def _checked_path(path: str, label: str) -> str:
    """A plain relative path: no ``..``, not absolute, no NUL or backslash tricks."""
    if not path or path.startswith(('"', "/", "~")) or "\x00" in path or "\\" in path:
        raise ValueError(f"{label}: not a plain relative path inside the workspace")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{label}: '.', '..' and empty path components are not allowed")
    return posixpath.normpath(path)


def _file_patch(patched: PatchedFile) -> FilePatch:
    source = _side(patched.source_file, "a/")
    target = _side(patched.target_file, "b/")
    label = patched.target_file if target is not None else patched.source_file
    if patched.is_binary_file:
        raise ValueError(f"{label}: binary patches are not supported")
    if patched.is_symlink or patched.is_submodule:
        raise ValueError(f"{label}: symlinks and submodules cannot be patched")
    if source is None and target is None:
        raise ValueError(f"{label}: both sides are /dev/null")
    if source is not None and target is not None and source != target:
        raise ValueError(
            f"{label}: renames are not supported; delete {source} and create {target} instead"
        )
    path = _checked_path(target if target is not None else source or "", label)
    if not len(patched):
        raise ValueError(f"{label}: no hunks (mode changes alone are not supported)")
    return FilePatch(path, label, source is None, target is None, list(patched))


def parse_patch(text: str) -> list[FilePatch]:
    """The files of a unified diff; ValueError when it cannot be parsed or names no file,
    names a file twice, or a path that is not a plain workspace path."""
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise ValueError(f"cannot parse the patch: {exc}") from None
    if not len(patch):
        raise ValueError("no file changes found: expected a unified diff (--- a/x, +++ b/x, @@)")
    _refuse_stray_lines(text, patch)
    files = [_file_patch(patched) for patched in patch]
    seen: set[str] = set()
    for file in files:
        if file.path in seen:
            raise ValueError(f"{file.label}: the patch names this file twice; merge its hunks")
        seen.add(file.path)
    return files


def _refuse_stray_lines(text: str, patch: PatchSet) -> None:
    """A body line outside every hunk means a header miscounted its lines: unidiff would
    drop it silently, so the patch is refused rather than applied in part."""
    consumed = {line.diff_line_no for file in patch for hunk in file for line in hunk}
    for number, line in enumerate(text.split("\n"), start=1):  # as unidiff counts lines
        if number in consumed or line.startswith(("--- ", "+++ ")):
            continue
        if line.startswith("\\") and number - 1 in consumed:
            continue  # a hunk's closing "No newline at end of file": unidiff leaves it unnumbered
        if line[:1] in ("+", "-", " ", "\\"):
            raise ValueError(
                f"cannot parse the patch: line {number} ({line[:40]!r}) lies outside every "
                "hunk; check that each @@ header counts its lines"
            )


def split_keep_newlines(text: str) -> list[str]:
    """Lines with their ``\\n`` (only ``\\n`` ends a line, as in a diff)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def _sides(hunk: Hunk) -> tuple[list[tuple[str, str]], str]:
    """The hunk's lines as (type, text), with "No newline at end of file" applied."""
    lines: list[tuple[str, str]] = []
    for line in hunk:
        kind = line.line_type
        if kind == LINE_TYPE_NO_NEWLINE:
            if lines:
                prev_kind, prev = lines[-1]
                lines[-1] = (prev_kind, prev[:-1] if prev.endswith("\n") else prev)
            continue
        if kind == LINE_TYPE_EMPTY:
            kind = LINE_TYPE_CONTEXT
        lines.append((kind, line.value))
    old = f"-{hunk.source_start},{hunk.source_length}"
    header = f"@@ {old} +{hunk.target_start},{hunk.target_length} @@"
    return lines, header


def apply_hunks(file: FilePatch, original: str) -> str:
    """The file's text after every hunk; ValueError names the hunk and line that differ."""
    lines = split_keep_newlines(original)
    out: list[str] = []
    cursor = 0
    for number, hunk in enumerate(file.hunks, start=1):
        body, header = _sides(hunk)
        where = f"{file.label} hunk {number} ({header})"
        start = hunk.source_start if hunk.source_length == 0 else hunk.source_start - 1
        if start < cursor:
            raise ValueError(f"{where}: overlaps or comes before the hunk above it")
        if start > len(lines):
            raise ValueError(f"{where}: starts past the end of the file ({len(lines)} lines)")
        out += lines[cursor:start]
        position = start
        for kind, text in body:
            if kind == LINE_TYPE_ADDED:
                out.append(text)
                continue
            if kind not in (LINE_TYPE_CONTEXT, LINE_TYPE_REMOVED):
                continue
            if position >= len(lines):
                raise ValueError(
                    f"{where}: context does not match line {position + 1} "
                    f"(the file has {len(lines)} lines)"
                )
            if lines[position] != text:
                what = "context" if kind == LINE_TYPE_CONTEXT else "removed line"
                raise ValueError(
                    f"{where}: {what} does not match line {position + 1}"
                    f"{_found_elsewhere(lines, body)}"
                )
            if kind == LINE_TYPE_CONTEXT:
                out.append(text)
            position += 1
        cursor = position
    return "".join(out + lines[cursor:])


def _found_elsewhere(lines: list[str], body: list[tuple[str, str]]) -> str:
    """A hint when the hunk's old lines occur at exactly one other place."""
    old = [text for kind, text in body if kind != LINE_TYPE_ADDED]
    if not old:
        return ""
    first, size = old[0], len(old)
    candidates = [i for i in range(len(lines) - size + 1) if lines[i] == first]
    # Bounded: a crafted hunk of 50,000 repeated lines took a minute (an unapproved dry run).
    if len(candidates) * size > HINT_BUDGET:
        return "; read the file again and make the patch from its current text"
    starts = [i for i in candidates if lines[i : i + size] == old]
    if len(starts) == 1:
        return f"; its lines are found at line {starts[0] + 1}: fix the hunk header"
    return "; read the file again and make the patch from its current text"


MAX_EDITS = 1_000
"""Most replacements in one multi_edit (each scans the whole text, on the event loop)."""


class Edit(ToolArguments):
    old_text: str = Field(min_length=1, description="Exact text to replace.")
    new_text: str = Field(description="Replacement text.")
    replace_all: bool = Field(
        False, description="Replace every occurrence (else old_text must occur exactly once)."
    )


class MultiEditArguments(PathArguments):
    edits: list[Edit] = Field(
        min_length=1,
        max_length=MAX_EDITS,
        description="Replacements, applied in order, each to the previous result.",
    )
    dry_run: bool = Field(False, description=DRY_RUN)


class MultiEditTool(EditingTool):
    name = "multi_edit"
    annotations = WRITES_FILE
    description = (
        "Several exact replacements in one file, applied in order (each to the result of "
        "the previous), all or nothing: if any old_text is missing, or occurs more than once "
        "without replace_all, nothing changes and the error names that edit (edits[i])."
    )
    Arguments = MultiEditArguments
    inline = True

    def plan(self, args: MultiEditArguments) -> tuple[list[FileEdit], str]:
        """Every replacement on the text in memory; the first that cannot apply is named."""
        rel, data = self.read_for_edit(
            args.file_path, "edit it with bash, or raise limits.max_file_size in toold.toml"
        )
        text = decode_text(data, "utf-8")
        # Checked before each replacement: replace_all edits compound (a→aa, 30 times, is a
        # gigabyte), and a dry run needs no approval.
        for i, edit in enumerate(args.edits):
            found = text.count(edit.old_text)
            if not found:
                raise ValueError(
                    f"edits[{i}]: old_text not found in {rel} (after the edits before it); "
                    "nothing was changed"
                )
            if found > 1 and not edit.replace_all:
                raise ValueError(
                    f"edits[{i}]: old_text occurs {found} times in {rel}; add surrounding "
                    "text to make it unique, or set replace_all; nothing was changed"
                )
            size = len(text) + found * (len(edit.new_text) - len(edit.old_text))
            if size > self.max_result:
                raise self.too_large(f"edits[{i}]: ", rel, size)
            text = text.replace(edit.old_text, edit.new_text)
        count = len(args.edits)
        result = f"Applied {count} edit{'s' if count != 1 else ''} to {rel}"
        return [FileEdit(rel, data, text.encode("utf-8"))], result


class ApplyPatchArguments(ToolArguments):
    patch: str = Field(
        min_length=1,
        description=(
            "A unified diff (git style: --- a/path, +++ b/path, /dev/null for a created or "
            "deleted file; @@ hunks with exact context lines)."
        ),
    )
    dry_run: bool = Field(False, description=DRY_RUN)

    @field_validator("patch")
    @classmethod
    def _parses(cls, value: str) -> str:
        parse_patch(value)
        return value


class ApplyPatchTool(EditingTool):
    name = "apply_patch"
    annotations = WRITES_FILE
    description = (
        "Apply a unified diff to one or more files (modify, create with --- /dev/null, delete "
        "with +++ /dev/null), all or nothing: each hunk's context must match the file exactly "
        "at the line its header names, or nothing changes and the error names the file and hunk."
    )
    Arguments = ApplyPatchArguments

    def named_paths(self, args: Any) -> list[str]:
        """Every file the patch creates, modifies or deletes."""
        patch = args.get("patch") if isinstance(args, dict) else getattr(args, "patch", None)
        if not isinstance(patch, str):
            return []
        return [file.path for file in parse_patch(patch)]

    def named_paths_of(self, args: Any) -> list[str]:
        """The files whose locks the call holds."""
        return self.named_paths(args)

    def plan(self, args: ApplyPatchArguments) -> tuple[list[FileEdit], str]:
        """Every file's new content; the first hunk that does not apply is named."""
        edits = []
        verbs = []
        for file in parse_patch(args.patch):
            before = self.read_optional(file.path)
            if file.created and before is not None:
                raise ValueError(f"{file.label}: the patch creates it, but it already exists")
            if not file.created and before is None:
                raise ValueError(f"{file.label}: no such file to patch")
            original = "" if before is None else decode_text(before, "utf-8")
            text = apply_hunks(file, original)
            if file.deleted:
                if text:
                    raise ValueError(
                        f"{file.label}: the patch deletes it, but its hunks do not remove "
                        "the whole file"
                    )
                after = None
                verbs.append(f"deleted {file.path}")
            else:
                after = text.encode("utf-8")
                verbs.append(f"{'created' if file.created else 'modified'} {file.path}")
            edits.append(FileEdit(file.path, before, after))
        return edits, "Applied patch: " + ", ".join(verbs)


TOOLS = (MultiEditTool, ApplyPatchTool)
