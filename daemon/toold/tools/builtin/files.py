"""read_file, write_file, edit_file: text files inside the workspace.

One tool per name serves BareAgent and Jianmu: the schema and result texts are
BareAgent's; Jianmu's ``path`` and ``encoding`` are accepted, and Jianmu's limits
(allowed extensions, content size, create_dirs) come from the ``files`` configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import Field, ModelWrapValidatorHandler, model_validator
from pydantic.json_schema import SkipJsonSchema

from toold.sandbox.paths import workspace_relative
from toold.search.grep import split_lines
from toold.storage import path_lock
from toold.tools.annotations import READS, WRITES_FILE, ToolAnnotations
from toold.tools.base import FileEdit, ToolArguments
from toold.tools.builtin._alternatives import validate_with_alternatives
from toold.tools.builtin._editing import EditingTool
from toold.tools.builtin._workspace import WorkspaceTool

_FILE_PATH = "Workspace-relative path of the file."
DRY_RUN = "Only return the unified diff of what would change; change nothing."


class PathArguments(ToolArguments):
    """Arguments naming a file as ``file_path`` (BareAgent) or ``path`` (Jianmu)."""

    file_path: str = Field(description=_FILE_PATH)

    @model_validator(mode="wrap")
    @classmethod
    def _jianmu_path(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        return validate_with_alternatives(data, handler, "file_path", ("path",))


class ReadFileArguments(PathArguments):
    offset: int = Field(0, description="0-based line to start from.")
    limit: int | None = Field(None, description="Maximum number of lines to return.")
    # Jianmu's argument; kept out of the schema, which stays the base tool's.
    encoding: SkipJsonSchema[str] = "utf-8"


class WriteFileArguments(PathArguments):
    content: str = Field(description="Text to write.")
    append: bool = Field(False, description="Append instead of overwriting.")
    dry_run: bool = Field(False, description=DRY_RUN)
    # Jianmu's argument; kept out of the schema, which stays the base tool's.
    encoding: SkipJsonSchema[str] = "utf-8"


class EditFileArguments(PathArguments):
    old_text: str = Field(min_length=1, description="Exact text to replace (first occurrence).")
    new_text: str = Field(description="Replacement text.")
    dry_run: bool = Field(False, description=DRY_RUN)


def decode_text(data: bytes, encoding: str) -> str:
    """``data`` decoded; a failure keeps UnicodeDecodeError and says how to fix it."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        reason = (
            f"{exc.reason}; Cannot decode file with {encoding} encoding: "
            "pass the file's encoding (e.g. encoding='latin-1')"
        )
        raise UnicodeDecodeError(exc.encoding, exc.object, exc.start, exc.end, reason) from None


class FileTool(WorkspaceTool):
    """read_file and write_file: Jianmu's limits from the ``files`` configuration."""

    def check_extension(self, path: Path) -> None:
        """Refuse extensions outside ``files.allowed_extensions`` (when that list is set)."""
        allowed = self.config.files.allowed_extensions
        if not allowed:
            return
        normal = sorted({e.lower() if e.startswith(".") else f".{e.lower()}" for e in allowed})
        ext = path.suffix.lower()
        if ext not in normal:
            raise ValueError(
                f"Extension not allowed: {ext or '(none)'} "
                f"(files.allowed_extensions: {', '.join(normal)})"
            )


class ReadFileTool(FileTool):
    name = "read_file"
    annotations = READS
    description = (
        "Read a UTF-8 text file with line numbers ('N: line', from 1). "
        "offset is the 0-based first line, limit the number of lines. "
        "Also accepts path for file_path, and encoding (default utf-8)."
    )
    Arguments = ReadFileArguments
    inline = True

    def read_paths(self, args: Any) -> list[str]:
        """The file it shows: an edit of it may follow (the stale-file guard)."""
        path = args.get("file_path") if isinstance(args, dict) else None
        return [path] if isinstance(path, str) else []

    def run(self, args: ReadFileArguments) -> str:
        """Numbered lines of the file."""
        offset, limit = args.offset, args.limit
        if offset < 0:
            raise ValueError("offset must be >= 0")
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        self.check_extension(Path(args.file_path))
        data = self.read_bytes(
            args.file_path,
            self.config.limits.max_file_size,
            "use grep or bash to look inside it, or raise limits.max_file_size in toold.toml",
        )
        lines = split_lines(decode_text(data, args.encoding))
        end = None if limit is None else offset + limit
        return "\n".join(
            f"{number}: {line}" for number, line in enumerate(lines[offset:end], start=offset + 1)
        )


class WriteFileTool(FileTool):
    name = "write_file"
    annotations = ToolAnnotations(
        idempotent=True, open_world=False, confirm="always", writes_path=True
    )
    description = (
        "Write a text file (creating parent folders), replacing it atomically; "
        "append=true adds to the end instead. "
        "Also accepts path for file_path, and encoding (default utf-8)."
    )
    Arguments = WriteFileArguments
    inline = True
    previews = True
    effect_tags = ("filesystem:write",)

    def _content(self, args: WriteFileArguments) -> bytes:
        self.check_extension(Path(args.file_path))
        files = self.config.files
        data = args.content.encode(args.encoding)
        if len(data) > files.max_content_size:
            raise ValueError(
                f"Content too large ({len(data)} bytes, max: {files.max_content_size}); "
                "write it in parts with append=true, or raise files.max_content_size"
            )
        return data

    def _plan(self, args: WriteFileArguments) -> list[FileEdit]:
        data = self._content(args)
        rel = workspace_relative(self.workspace, args.file_path)
        try:
            before: bytes | None = self.read_bytes(
                args.file_path, self.config.limits.max_file_size, "raise limits.max_file_size"
            )
        except FileNotFoundError:
            before = None
        after = (before or b"") + data if args.append else data
        return [FileEdit(rel, before, after)]

    def preview(self, args: Any) -> list[FileEdit] | None:
        """The file before and after the write."""
        parsed = self.parse_args(args)
        assert isinstance(parsed, WriteFileArguments)
        return self._plan(parsed)

    def run(self, args: WriteFileArguments) -> str:
        """Write or append, then say how much (a dry run is Tool.call's)."""
        data = self._content(args)
        files = self.config.files
        with path_lock(self.lexical_path(args.file_path)):
            rel = self.write_bytes(
                args.file_path,
                data,
                append=args.append,
                create_dirs=files.create_dirs,
                durable=files.fsync,
            )
        verb = "Appended" if args.append else "Wrote"
        return f"{verb} {len(args.content)} characters to {rel}"


class EditFileTool(EditingTool):
    name = "edit_file"
    annotations = WRITES_FILE
    description = "Replace the first occurrence of old_text with new_text in a file."
    Arguments = EditFileArguments
    inline = True

    def plan(self, args: EditFileArguments) -> tuple[list[FileEdit], str]:
        """Exact text replacement, first occurrence only."""
        rel, data = self.read_for_edit(
            args.file_path,
            "edit it with bash (e.g. sed), or raise limits.max_file_size in toold.toml",
        )
        text = decode_text(data, "utf-8")
        if args.old_text not in text:
            raise ValueError("old_text not found in file")
        updated = text.replace(args.old_text, args.new_text, 1).encode("utf-8")
        return [FileEdit(rel, data, updated)], f"Edited {rel}"


TOOLS = (ReadFileTool, WriteFileTool, EditFileTool)
