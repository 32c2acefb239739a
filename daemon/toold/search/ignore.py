""".gitignore, .ignore and .git/info/exclude, as the searches honour them.

Rules are git's (``pathspec``'s GitIgnoreSpec): each folder's ``.gitignore`` and then
``.ignore`` (ripgrep's, read after so it wins) apply to the paths below that folder; a
deeper folder's rules win over a shallower one's; ``.git/info/exclude`` sits below the
workspace root's own files. Only folders inside the workspace are read (a repository
root above it contributes nothing). A folder that is ignored is not entered, as in git:
a file in it cannot be re-included.

Ignore files are workspace content anyone can write: each is read from its folder's
descriptor without following a symlink, and only its first ``MAX_RULES_BYTES``; rules
match with RE2 (``google-re2``), in time linear in the path, whatever they say.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

IGNORE_FILES = (".gitignore", ".ignore")
EXCLUDE = (".git", "info", "exclude")
MAX_RULES_BYTES = 256 * 1024
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
Parts = tuple[str, ...]


def read_rules(dir_fd: int, names: Sequence[str]) -> list[str]:
    """The lines of the ignore file ``names`` (a path below ``dir_fd``); [] if unreadable."""
    fds = []
    try:
        fd = dir_fd
        for name in names[:-1]:
            fd = os.open(name, _FLAGS | os.O_DIRECTORY, dir_fd=fd)
            fds.append(fd)
        fd = os.open(names[-1], _FLAGS, dir_fd=fd)
        fds.append(fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        data = os.read(fd, MAX_RULES_BYTES)
    except OSError:
        return []
    finally:
        for opened in fds:
            os.close(opened)
    return data.decode("utf-8", errors="replace").splitlines()


class IgnoreRules:
    """The rules of the folders a walk has reached, by workspace-relative folder path."""

    def __init__(self) -> None:
        self._specs: dict[Parts, GitIgnoreSpec | None] = {}
        self._lifted: set[tuple[int, int]] = set()
        """(folder depth, pattern index) of patterns that ignore the start or a folder
        above it: a search started there explicitly is not emptied by them."""

    def lift(self, start: Parts) -> None:
        """Let a search that starts at ``start`` (workspace-relative) see inside it even
        when an ancestor's rules ignore it; the other rules still apply below it."""
        for depth in range(len(start)):
            spec = self._specs.get(start[:depth])
            if spec is None:
                continue
            for end in range(depth + 1, len(start) + 1):
                result = spec.check_file("/".join(start[depth:end]) + "/")
                if result.include and result.index is not None:
                    self._lifted.add((depth, result.index))

    def loaded(self, folder: Parts) -> bool:
        """Whether ``folder``'s rules were read already."""
        return folder in self._specs

    def load(self, folder: Parts, dir_fd: int) -> None:
        """Read the rules of ``folder`` (open as ``dir_fd``); the root also reads exclude."""
        from pathspec import GitIgnoreSpec  # with RE2: only once a search reads rules

        lines = read_rules(dir_fd, EXCLUDE) if not folder else []
        for name in IGNORE_FILES:
            lines += read_rules(dir_fd, (name,))
        # RE2: linear time, so a crafted rule such as *a*a*a*a*a*a*a*a*b cannot stall a walk.
        spec = GitIgnoreSpec.from_lines(lines, backend="re2") if any(lines) else None
        self._specs[folder] = spec

    def ignored(self, path: Parts, is_dir: bool) -> bool:
        """Whether the workspace-relative ``path`` is ignored by the rules read so far
        (its folders' rules, deepest first; a folder's own state is not looked at)."""
        for depth in range(len(path) - 1, -1, -1):
            spec = self._specs.get(path[:depth])
            if spec is None:
                continue
            rel = "/".join(path[depth:]) + ("/" if is_dir else "")
            result = spec.check_file(rel)
            if result.include is None or (depth, result.index) in self._lifted:
                continue
            return bool(result.include)
        return False
