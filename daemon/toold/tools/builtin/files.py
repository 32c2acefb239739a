"""read_file, write_file, edit_file: text files inside the workspace."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

from toold.search.grep import split_lines
from toold.storage import atomic_write_text, path_lock
from toold.tools.builtin._workspace import WorkspaceTool


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadFileArguments(_Args):
    file_path: str = Field(description="Workspace-relative path of the file.")
    offset: int = Field(0, description="0-based line to start from.")
    limit: int | None = Field(None, description="Maximum number of lines to return.")


class WriteFileArguments(_Args):
    file_path: str = Field(description="Workspace-relative path of the file.")
    content: str = Field(description="Text to write.")
    append: bool = Field(False, description="Append instead of overwriting.")


class EditFileArguments(_Args):
    file_path: str = Field(description="Workspace-relative path of the file.")
    old_text: str = Field(min_length=1, description="Exact text to replace (first occurrence).")
    new_text: str = Field(description="Replacement text.")


class ReadFileTool(WorkspaceTool):
    name = "read_file"
    description = (
        "Read a UTF-8 text file with line numbers ('N: line', from 1). "
        "offset is the 0-based first line, limit the number of lines."
    )
    Arguments = ReadFileArguments

    def run(self, file_path: str, offset: int = 0, limit: int | None = None) -> str:
        """Numbered lines of the file."""
        if offset < 0:
            raise ValueError("offset must be >= 0")
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        path = self.resolve(file_path)
        max_size = self.config.limits.max_file_size
        size = path.stat().st_size
        if size > max_size:
            raise ValueError(
                f"File too large: {size} bytes (max: {max_size}); "
                "use grep or bash to look inside it, or raise limits.max_file_size in toold.toml"
            )
        lines = split_lines(path.read_text(encoding="utf-8"))
        end = None if limit is None else offset + limit
        return "\n".join(
            f"{number}: {line}" for number, line in enumerate(lines[offset:end], start=offset + 1)
        )


class WriteFileTool(WorkspaceTool):
    name = "write_file"
    description = (
        "Write a text file (creating parent folders), replacing it atomically; "
        "append=true adds to the end instead."
    )
    Arguments = WriteFileArguments
    effect_tags = ("filesystem:write",)

    def run(self, file_path: str, content: str, append: bool = False) -> str:
        """Write or append, then say how much."""
        path = self.resolve(file_path)
        rel = self.relative(path)
        if path.is_dir():
            # Checked first: the atomic write would stage its temp file in the parent,
            # which for the workspace root lies outside the workspace.
            raise IsADirectoryError(f"Is a directory: {rel}")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path_lock(path):
            if append:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "a", encoding="utf-8") as fh:
                    fh.write(content)
                return f"Appended {len(content)} characters to {rel}"
            atomic_write_text(path, content)
        return f"Wrote {len(content)} characters to {rel}"


class EditFileTool(WorkspaceTool):
    name = "edit_file"
    description = "Replace the first occurrence of old_text with new_text in a file."
    Arguments = EditFileArguments
    parallel_safe = False
    effect_tags = ("filesystem:write",)

    def run(self, file_path: str, old_text: str, new_text: str) -> str:
        """Exact text replacement, first occurrence only."""
        path = self.resolve(file_path)
        with path_lock(path):
            text = path.read_bytes().decode("utf-8")
            if old_text not in text:
                raise ValueError("old_text not found in file")
            atomic_write_text(path, text.replace(old_text, new_text, 1))
        return f"Edited {self.relative(path)}"


TOOLS = (ReadFileTool, WriteFileTool, EditFileTool)
