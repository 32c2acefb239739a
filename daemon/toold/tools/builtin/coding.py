"""Jianmu's coding tools: list_dir, glob_search, grep_search, file_info, str_replace.

The searches run on the same engine as glob and grep (toold.search), so they skip the
same folders, match patterns the same way and reach files only through the walk from
directory descriptors (search.walk): no symlink is ever followed, even one swapped in
mid-call.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

from pydantic import Field

from toold.sandbox.paths import DIR_FLAGS, open_in_workspace, workspace_relative
from toold.search.bounded import SEARCH_BUDGET, bounded_subn
from toold.search.grep import GrepQuery, grep_lines, literal_pattern
from toold.search.patterns import compile_glob
from toold.search.walk import Tree, lstat_in_workspace
from toold.tools.annotations import READS, SEARCHES, WRITES_FILE
from toold.tools.base import FileEdit, ToolArguments
from toold.tools.builtin._editing import EditingTool
from toold.tools.builtin._workspace import WorkspaceTool
from toold.tools.builtin.files import decode_text
from toold.tools.builtin.search import INCLUDE_IGNORED

MAX_LIST_ENTRIES = 1000
MAX_LINE_CHARS = 500


class ListDirArguments(ToolArguments):
    path: str = Field(".", description="Workspace-relative folder to list.")


class GlobSearchArguments(ToolArguments):
    pattern: str = Field(
        description=(
            "Glob pattern. Without '/' it matches file names at any depth ('*.py'); "
            "with '/' it is anchored at path, '**' spanning folders ('src/**/*.py')."
        )
    )
    path: str = Field(".", description="Workspace-relative folder to search from.")
    include_hidden: bool = Field(False, description="Also match files and folders named '.*'.")
    limit: int = Field(200, ge=1, description="Most paths to return.")
    include_ignored: bool = Field(False, description=INCLUDE_IGNORED)


class GrepSearchArguments(ToolArguments):
    query: str = Field(min_length=1, description="Text to look for (a Python regex if regex).")
    regex: bool = Field(False, description="Treat query as a Python regular expression.")
    case_sensitive: bool = Field(True, description="Match case exactly.")
    glob: str | None = Field(None, description="Only files matching this glob, e.g. '*.py'.")
    path: str = Field(".", description="Workspace-relative folder (or file) to search.")
    limit: int = Field(200, ge=1, description="Most matching lines to return.")
    include_ignored: bool = Field(False, description=INCLUDE_IGNORED)


class FileInfoArguments(ToolArguments):
    path: str = Field(description="Workspace-relative path of a file or folder.")


class StrReplaceArguments(ToolArguments):
    path: str = Field(description="Workspace-relative path of the file to change.")
    old: str = Field(min_length=1, description="Text to replace (a Python regex if regex).")
    new: str = Field(description="Replacement text (may use \\1 or \\g<name> if regex).")
    regex: bool = Field(False, description="Treat old as a Python regular expression.")
    count: int = Field(0, ge=0, description="Most replacements to make; 0 replaces all.")
    dry_run: bool = Field(
        False, description="Only return the unified diff of what would change; change nothing."
    )


def human_size(size: int) -> str:
    """Bytes as B, KB or MB (binary multiples, one decimal above bytes)."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"Invalid regex pattern: {exc}") from None


# A folder file this small holds a few hundred entries at most (ext4: 4 KiB per block).
INLINE_FOLDER_BYTES = 16 * 1024


class ListDirTool(WorkspaceTool):
    name = "list_dir"
    annotations = SEARCHES
    description = (
        "List a folder: one line per entry, sorted by name, as 'TYPE  SIZE  NAME' where TYPE "
        "is FILE or DIR and SIZE is in B, KB or MB ('-' for folders). At most 1000 entries."
    )
    Arguments = ListDirArguments
    inline = True

    def runs_inline(self, args: Any) -> bool:
        """As for every file tool, and only for a small folder (its entries are sorted)."""
        if not super().runs_inline(args):
            return False
        try:
            folder = self.lexical_path(getattr(args, "path", "."))
            return os.lstat(folder).st_size <= INLINE_FOLDER_BYTES
        except (OSError, ValueError):
            return True  # the call itself fails at once, and says why

    def run(self, args: ListDirArguments) -> str:
        """The folder's table."""
        rel = workspace_relative(self.workspace, args.path)
        try:
            fd = open_in_workspace(self.workspace, args.path, DIR_FLAGS)  # never through a link
        except NotADirectoryError:
            raise NotADirectoryError(f"Not a directory: {rel}") from None
        except FileNotFoundError:
            raise FileNotFoundError(f"Directory not found: {rel}") from None
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=attrgetter("name"))
            if not entries:
                return "(empty directory)"
            lines = []
            for entry in entries[:MAX_LIST_ENTRIES]:
                try:
                    if entry.is_dir(follow_symlinks=False):  # from the listing: no system call
                        lines.append(f"DIR   {'-':>9}  {entry.name}")
                    else:  # lstat relative to the folder's descriptor
                        size = entry.stat(follow_symlinks=False).st_size
                        lines.append(f"FILE  {human_size(size):>9}  {entry.name}")
                except OSError:
                    continue
        finally:
            os.close(fd)
        if len(entries) > MAX_LIST_ENTRIES:
            more = len(entries) - MAX_LIST_ENTRIES
            lines.append(f"... ({more} more entries; list a sub-folder or use glob_search)")
        return "\n".join(lines)


class GlobSearchTool(WorkspaceTool):
    name = "glob_search"
    annotations = SEARCHES
    description = (
        "Find files by glob pattern; returns sorted workspace-relative paths, one per line, "
        "or 'No files matched.' Hidden files are skipped unless include_hidden. Past limit, "
        "a last line says how many more matched."
    )
    Arguments = GlobSearchArguments

    def run(self, args: GlobSearchArguments) -> str:
        """Matching paths, one per line."""
        matcher = compile_glob(args.pattern)
        with _tree(self, args.path, self.ignores(args)) as tree:
            files = tree.files(include_hidden=args.include_hidden)
            found = [f.path for f in files if matcher.match(f.rel)]
        if not found:
            return "No files matched."
        found.sort()
        limit = args.limit
        lines = found[:limit]
        if len(found) > limit:
            lines.append(
                f"... (truncated: {len(found) - limit} more of {len(found)} matches; "
                "narrow the pattern or path, or raise limit)"
            )
        return "\n".join(lines)


class GrepSearchTool(WorkspaceTool):
    name = "grep_search"
    annotations = SEARCHES
    description = (
        "Search file contents for query (plain text, or a Python regex if regex); returns "
        "'path:line:text' lines in file order, or 'No matches found.' Lines are cut at 500 "
        "characters. Skips files over 1 MB and non-UTF-8 files. Past limit, a last line "
        "says the output was truncated."
    )
    Arguments = GrepSearchArguments

    def run(self, args: GrepSearchArguments) -> str:
        """Matching lines, one per line."""
        flags = 0 if args.case_sensitive else re.IGNORECASE
        query, limit = args.query, args.limit
        pattern = _compile(query, flags) if args.regex else literal_pattern(query, flags)
        search = GrepQuery(
            regex=pattern,
            include=compile_glob(args.glob) if args.glob else None,
            max_matches=limit + 1,
        )
        lines = []
        with _tree(self, args.path, self.ignores(args)) as tree:
            for match in grep_lines(tree, search):
                text = match.text
                if len(text) > MAX_LINE_CHARS:
                    cut = len(text) - MAX_LINE_CHARS
                    text = f"{text[:MAX_LINE_CHARS]}... [{cut} more characters]"
                lines.append(f"{match.path}:{match.line_number}:{text}")
        if not lines:
            return "No matches found."
        if len(lines) > limit:
            lines[limit:] = [
                f"... (truncated at {limit} matches; narrow query, glob or path, or raise limit)"
            ]
        return "\n".join(lines)


FILE_INFO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "type": {"type": "string", "enum": ["file", "directory", "other"]},
        "size": {"type": "integer"},
        "modified": {"type": "string"},
        "extension": {"type": "string"},
    },
    "required": ["path", "type", "size", "modified", "extension"],
}


class FileInfoTool(WorkspaceTool):
    name = "file_info"
    annotations = READS
    description = (
        "Metadata of a file or folder: an object {path, type ('file' or 'directory'), size "
        "(bytes), modified (ISO 8601, UTC), extension ('.py', or '' for none)}."
    )
    Arguments = FileInfoArguments
    inline = True
    output_schema = FILE_INFO_SCHEMA

    def run(self, args: FileInfoArguments) -> dict[str, Any]:
        """The entry's metadata."""
        rel = workspace_relative(self.workspace, args.path)
        info = lstat_in_workspace(self.workspace, args.path)  # a symlink is refused
        is_dir = stat.S_ISDIR(info.st_mode)
        kind = "directory" if is_dir else "file" if stat.S_ISREG(info.st_mode) else "other"
        modified = datetime.fromtimestamp(info.st_mtime, tz=UTC)
        return {
            "path": rel,
            "type": kind,
            "size": info.st_size,
            "modified": modified.isoformat(timespec="seconds"),
            "extension": "" if is_dir else posixpath.splitext(posixpath.basename(rel))[1],
        }


def _tree(tool: WorkspaceTool, path: str, respect_ignores: bool) -> Tree:
    """The walk's start for glob_search and grep_search: a missing path is an error."""
    try:
        return Tree(tool.workspace, path, respect_ignores=respect_ignores)
    except (FileNotFoundError, NotADirectoryError):
        rel = workspace_relative(tool.workspace, path)
        raise FileNotFoundError(f"Path not found: {rel}") from None


class StrReplaceTool(EditingTool):
    name = "str_replace"
    annotations = WRITES_FILE
    description = (
        "Replace text in a file: every occurrence of old (count=0) or the first count, "
        "literally or as a Python regex (regex=true; new may use \\1). The file is rewritten "
        "atomically. Returns 'Replaced N occurrence(s) in path'; nothing matched is an error."
    )
    Arguments = StrReplaceArguments

    def plan(self, args: StrReplaceArguments) -> tuple[list[FileEdit], str]:
        """The file with the replacements made; nothing matched is a ValueError."""
        new, regex = args.new, args.regex
        pattern = _compile(args.old) if regex else literal_pattern(args.old)

        rel, data = self.read_for_edit(
            args.path, "use bash instead, or raise limits.max_file_size in toold.toml"
        )
        text = decode_text(data, "utf-8")
        size = len(text)

        def bounded(match: Any) -> str:
            # A literal replacement is literal: no backslash processing in new. The size is
            # counted as it goes: a short old and a long new make a memory bomb unasked
            # (a dry run needs no approval).
            nonlocal size
            piece = match.expand(new) if regex else new
            size += len(piece) - (match.end() - match.start())
            if size > self.max_result:
                raise self.too_large("", rel, size)
            return piece

        try:
            # Bounded: a backtracking regex must not freeze the daemon (this runs for the
            # permission prompt's diff too, before anyone approved the call).
            updated, replaced = bounded_subn(pattern, bounded, text, args.count, SEARCH_BUDGET)
        except (re.error, IndexError) as exc:
            raise ValueError(f"Invalid replacement {new!r}: {exc}") from None
        if not replaced:
            how = "the regex" if regex else "old (exact text, including whitespace)"
            raise ValueError(f"No match in {rel}: {how} was not found; nothing replaced")
        result = f"Replaced {replaced} occurrence{'s' if replaced != 1 else ''} in {rel}"
        return [FileEdit(rel, data, updated.encode("utf-8"))], result


TOOLS = (ListDirTool, GlobSearchTool, GrepSearchTool, FileInfoTool, StrReplaceTool)
