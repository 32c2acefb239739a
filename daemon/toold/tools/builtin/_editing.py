"""EditingTool: a file tool that computes every change first, then writes them all or none.

edit_file, str_replace, multi_edit and apply_patch plan their edits (``FileEdit``: the
bytes before and after) from the disk under the files' locks; ``dry_run: true`` answers
the plan's unified diff and writes nothing, otherwise every file is written through
WorkspaceTool's safe write (atomic, never through a symlink) and, when one write fails,
the files already written are put back as they were. (A dry run never gets here:
``Tool.call`` answers it from ``preview``.)
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from toold.sandbox.paths import DIR_FLAGS, open_in_workspace, workspace_relative
from toold.storage import path_lock
from toold.tools.base import FileEdit
from toold.tools.builtin._workspace import WorkspaceTool


class EditingTool(WorkspaceTool):
    """A previewing tool whose ``plan`` says what it changes; ``run`` applies the plan."""

    previews: ClassVar[bool] = True
    parallel_safe = False
    effect_tags = ("filesystem:write",)

    @abstractmethod
    def plan(self, args: Any) -> tuple[list[FileEdit], str]:
        """Every file's new content, computed from the disk now, and the result text once
        they are written; ValueError names what does not apply (nothing is written then)."""

    def lock_paths(self, args: Any) -> list[str]:
        """The files whose locks the plan and the writes hold (sorted, so never crossed)."""
        return sorted({workspace_relative(self.workspace, p) for p in self.named_paths_of(args)})

    def named_paths_of(self, args: Any) -> list[str]:
        """The paths a parsed ``args`` names (the ``file_path`` or ``path`` field)."""
        path = getattr(args, "file_path", None) or getattr(args, "path", None)
        return [path] if isinstance(path, str) else []

    @contextlib.contextmanager
    def _locked(self, args: Any) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for rel in self.lock_paths(args):
                stack.enter_context(path_lock(self.lexical_path(rel)))
            yield

    def preview(self, args: Any) -> list[FileEdit] | None:
        """The plan for validated ``args`` (what a permission prompt shows)."""
        parsed = self.parse_args(args)
        with self._locked(parsed):
            return self.plan(parsed)[0]

    def run(self, args: Any) -> str:
        """Plan under the files' locks, then write it all (a dry run is Tool.call's)."""
        with self._locked(args):
            planned, result = self.plan(args)
            self.apply([e for e in planned if e.before != e.after])
        return result

    # -- writing -------------------------------------------------------------------------
    def apply(self, edits: Sequence[FileEdit]) -> None:
        """Write every edit; when one fails, put back those already written, then raise."""
        written: list[FileEdit] = []
        try:
            for edit in edits:
                self._put(edit.path, edit.after)
                written.append(edit)
        except BaseException:
            for edit in reversed(written):
                with contextlib.suppress(OSError):
                    self._put(edit.path, edit.before)
            raise

    def _put(self, rel: str, data: bytes | None) -> None:
        if data is not None:
            self.write_bytes(rel, data, durable=self.config.files.fsync)
        else:
            self.delete(rel)

    def delete(self, rel: str) -> None:
        """Remove a regular file (never through a symlink; a folder is refused)."""
        parent, name = posixpath.split(workspace_relative(self.workspace, rel))
        dir_fd = open_in_workspace(self.workspace, parent or ".", DIR_FLAGS)
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            if not stat.S_ISREG(mode):
                raise ValueError(f"Not a regular file: {rel}; it was not deleted")
            os.unlink(name, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)

    @property
    def max_result(self) -> int:
        """The most characters an edit may make a file (the larger of limits.max_file_size
        and files.max_content_size): checked while replacing, since replacements compound
        and a dry run needs no approval."""
        return max(self.config.limits.max_file_size, self.config.files.max_content_size)

    def too_large(self, where: str, rel: str, size: int) -> ValueError:
        """The error for an edit that would make ``rel`` ``size`` characters."""
        return ValueError(
            f"{where}{rel} would grow to {size} characters, more than {self.max_result} "
            "(limits.max_file_size, files.max_content_size); nothing was changed"
        )

    def read_for_edit(self, path: str, fix: str) -> tuple[str, bytes]:
        """The file's workspace-relative path and bytes (limits.max_file_size applies)."""
        rel = workspace_relative(self.workspace, path)
        return rel, self.read_bytes(path, self.config.limits.max_file_size, fix)

    def read_optional(self, path: str) -> bytes | None:
        """The file's bytes, or None when there is no file."""
        try:
            return self.read_bytes(
                path, self.config.limits.max_file_size, "raise limits.max_file_size"
            )
        except FileNotFoundError:
            return None
