"""Glob patterns with toold's semantics, compiled to regular expressions.

A pattern without ``/`` matches a file's name at any depth. A pattern with ``/``
is anchored at the search root, where ``**`` spans any number of folders,
including none: ``src/**/*.py`` matches ``src/a.py`` and ``src/x/y/c.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class GlobPattern:
    """A compiled glob; ``match`` takes a path relative to the search root."""

    source: str
    anchored: bool
    regex: re.Pattern[str]

    def match(self, rel_posix: str) -> bool:
        """True when the relative posix path matches."""
        target = rel_posix if self.anchored else rel_posix.rpartition("/")[2]
        return self.regex.fullmatch(target) is not None


@lru_cache(maxsize=256)
def compile_glob(pattern: str, *, case_sensitive: bool = True) -> GlobPattern:
    """Compile ``pattern`` (cached)."""
    cleaned = pattern.strip()
    while cleaned.startswith("./"):
        cleaned = cleaned[2:]
    anchored = "/" in cleaned
    flags = 0 if case_sensitive else re.IGNORECASE
    return GlobPattern(pattern, anchored, re.compile(_translate(cleaned), flags | re.DOTALL))
