"""read_file and write_file through the editor: ``fs/read_text_file`` and ``fs/write_text_file``.

Used when the client offers both and ``[acp] use_client_fs`` (default true) allows it:
the model then reads unsaved buffers, and the editor sees (and can undo) every write.
They are the builtins with another ``run``: the same name, arguments, annotations and
limits, so the guard judges them exactly as it judges the builtins. A path is checked
as the builtins check it: inside the workspace, and not through a link leading out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.interfaces import Client

from toold.agents.loop import current_tool_use
from toold.search.grep import split_lines
from toold.tools.builtin.files import (
    ReadFileArguments,
    ReadFileTool,
    WriteFileArguments,
    WriteFileTool,
)
from toold.tools.runtime import ToolRuntime


@dataclass
class EditorFiles:
    """One session's way to the editor's files, and the writes made through it."""

    conn: Client
    session_id: str
    root: Path
    writes: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    """Per tool call id: the file's text before and after a write (the call's diff)."""

    def checked(self, lexical: Path) -> Path:
        """``lexical`` when it stays in the workspace once links are followed."""
        real = lexical.resolve()
        try:
            real.relative_to(self.root)
        except ValueError:
            raise PermissionError(f"{lexical} leads outside the workspace") from None
        return lexical

    async def read(self, path: Path) -> str:
        """The editor's text of ``path`` (its unsaved buffer, if open)."""
        try:
            reply = await self.conn.read_text_file(session_id=self.session_id, path=str(path))
        except RequestError as exc:
            rel = path.relative_to(self.root)
            raise FileNotFoundError(f"{rel}: the editor could not read it ({exc})") from None
        return reply.content

    async def write(self, path: Path, text: str) -> None:
        """Hand ``text`` to the editor as the new content of ``path``."""
        await self.conn.write_text_file(session_id=self.session_id, path=str(path), content=text)


class EditorReadFile(ReadFileTool):
    """read_file answered by the editor."""

    sandboxable = False

    def __init__(self, runtime: ToolRuntime, files: EditorFiles) -> None:
        super().__init__(runtime)
        self.files = files

    async def run(self, args: ReadFileArguments) -> str:  # type: ignore[override]
        """Numbered lines, as the builtin answers."""
        if args.offset < 0:
            raise ValueError("offset must be >= 0")
        if args.limit is not None and args.limit < 0:
            raise ValueError("limit must be >= 0")
        self.check_extension(Path(args.file_path))
        path = self.files.checked(self.lexical_path(args.file_path))
        text = await self.files.read(path)
        limit = self.config.limits.max_file_size
        if len(text.encode("utf-8")) > limit:
            raise ValueError(
                f"File too large (over {limit} bytes): use grep or bash to look inside it, "
                "or raise limits.max_file_size in toold.toml"
            )
        lines = split_lines(text)
        end = None if args.limit is None else args.offset + args.limit
        return "\n".join(
            f"{number}: {line}"
            for number, line in enumerate(lines[args.offset : end], start=args.offset + 1)
        )


class EditorWriteFile(WriteFileTool):
    """write_file handed to the editor."""

    sandboxable = False

    def __init__(self, runtime: ToolRuntime, files: EditorFiles) -> None:
        super().__init__(runtime)
        self.files = files

    async def run(self, args: WriteFileArguments) -> str:  # type: ignore[override]
        """Write or append through the editor, then say how much."""
        self.check_extension(Path(args.file_path))
        limit = self.config.files.max_content_size
        size = len(args.content.encode("utf-8"))
        if size > limit:
            raise ValueError(
                f"Content too large ({size} bytes, max: {limit}); "
                "write it in parts with append=true, or raise files.max_content_size"
            )
        path = self.files.checked(self.lexical_path(args.file_path))
        try:
            before: str | None = await self.files.read(path)
        except FileNotFoundError:
            before = None
        text = (before or "") + args.content if args.append else args.content
        await self.files.write(path, text)
        call_id = current_tool_use.get()
        if call_id is not None:
            self.files.writes[call_id] = (before, text)
        verb = "Appended" if args.append else "Wrote"
        return f"{verb} {len(args.content)} characters to {path.relative_to(self.files.root)}"


def editor_tools(runtime: ToolRuntime, files: EditorFiles) -> list[Any]:
    """The tools that replace the builtins of the same names in the session's catalogue."""
    return [EditorReadFile(runtime, files), EditorWriteFile(runtime, files)]
