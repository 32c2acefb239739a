"""Glob patterns with toold's semantics, compiled to regular expressions.

A pattern without ``/`` matches a file's name at any depth. A pattern with ``/``
is anchored at the search root, where ``**`` spans any number of folders,
including none: ``src/**/*.py`` matches ``src/a.py`` and ``src/x/y/c.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from toold.search.bounded import GLOB_BUDGET, Deadline, compile_bounded


def _set_end(pattern: str, start: int) -> int:
    """Index of the ``]`` closing the set opened at ``start``, or -1 (then ``[`` is literal).

    As in fnmatch, a ``]`` right after ``[`` or ``[!`` belongs to the set.
    """
    j = start + 1
    if pattern[j : j + 1] == "!":
        j += 1
    if pattern[j : j + 1] == "]":
        j += 1
    return pattern.find("]", j)


def _translate_set(body: str) -> str:
    """A bracket expression's body (between ``[`` and ``]``) as a regex that never matches ``/``.

    Characters are escaped one by one, so ``[``, ``&&``, ``~~``, ``||`` and ``\\`` stay literal;
    ``a-z`` stays a range, reversed ranges match nothing, ``!`` first negates.
    """
    negate = body.startswith("!")
    if negate:
        body = body[1:]
    items: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            low, high = body[k], body[k + 2]
            if low <= high:
                items.append(f"{re.escape(low)}-{re.escape(high)}")
            k += 3
        else:
            items.append(re.escape(body[k]))
            k += 1
    if not items:
        return "[^/]" if negate else "(?!)"
    return f"[^/{''.join(items)}]" if negate else f"(?!/)[{''.join(items)}]"


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
            end = _set_end(pattern, i)
            if end == -1:
                out.append(re.escape(c))
                i += 1
                continue
            out.append(_translate_set(pattern[i + 1 : end]))
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
    matcher: Any = field(compare=False, repr=False)
    """``regex`` compiled by the ``regex`` package (search.bounded: never stalls)."""

    def match(self, rel_posix: str) -> bool:
        """True when the relative posix path matches; PatternTooSlow past GLOB_BUDGET."""
        target = rel_posix if self.anchored else rel_posix.rpartition("/")[2]
        try:
            found = self.matcher.fullmatch(target, timeout=GLOB_BUDGET, concurrent=True)
        except TimeoutError:
            raise Deadline(GLOB_BUDGET, "glob").exceeded(self.source) from None
        return found is not None


@lru_cache(maxsize=256)
def compile_glob(pattern: str, *, case_sensitive: bool = True) -> GlobPattern:
    """Compile ``pattern`` (cached)."""
    cleaned = pattern.strip()
    while cleaned.startswith("./"):
        cleaned = cleaned[2:]
    anchored = "/" in cleaned
    flags = 0 if case_sensitive else re.IGNORECASE
    regex = re.compile(_translate(cleaned), flags | re.DOTALL)
    return GlobPattern(pattern, anchored, regex, compile_bounded(regex))
