"""Pattern matching that cannot stall the daemon, whatever pattern the model writes.

Python's ``re`` backtracks: ``(a*)*b`` against a line of 30 ``a`` runs for minutes, and
``*a*a*a*a*a*a*a*a*b`` as a glob against a long file name for hours. ``re`` holds the GIL
while it runs and cannot be interrupted, so one such call froze the whole daemon (every
session, every cancel). The searches therefore match with the ``regex`` package, which
is ``re``-compatible (``V0``), prunes most runaway backtracking, releases the GIL while
it matches (``concurrent``) and stops at a deadline: a pattern still too slow fails with
``PatternTooSlow`` naming the fix. ``re`` still compiles every pattern first, so what
is valid and the error for what is not stay Python's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, Protocol

SEARCH_BUDGET = 30.0
"""Seconds of matching one grep call (or one str_replace) may spend."""
GLOB_BUDGET = 1.0
"""Seconds one glob may spend on one path (a path takes microseconds)."""

_FLAGS = ("IGNORECASE", "MULTILINE", "DOTALL", "VERBOSE", "ASCII")
"""The ``re`` flags ``regex`` spells the same way (``regex`` is imported on first use:
nothing needs it until a search runs)."""


class Search(Protocol):
    """``re.Pattern.search`` of one pattern: the match at or after ``pos``, or None."""

    def __call__(self, text: str, pos: int = 0, /) -> Any | None: ...


class PatternTooSlow(Exception):
    """A pattern that backtracks past its time budget; the message names the fix."""


def compile_bounded(pattern: re.Pattern[str]) -> Any:
    """``pattern`` compiled by ``regex`` with the same flags (a ``regex.Pattern``)."""
    import regex

    flags = regex.V0
    for name in _FLAGS:
        if pattern.flags & getattr(re, name):
            flags |= getattr(regex, name)
    return regex.compile(pattern.pattern, flags)


class Deadline:
    """When the matching of one call must end; ``left`` is passed as ``timeout``."""

    def __init__(self, budget: float, what: str) -> None:
        self.budget = budget
        self.what = what
        self._end = time.monotonic() + budget

    def left(self) -> float:
        """Seconds left (a small positive number once spent: the next match times out)."""
        return max(self._end - time.monotonic(), 0.001)

    def exceeded(self, source: str) -> PatternTooSlow:
        """The error for ``source`` having spent the budget."""
        return PatternTooSlow(
            f"the {self.what} {source!r} took more than {self.budget:g} s to match "
            "(nested or adjacent repeats such as (a*)* or *a*a*a* backtrack without end); "
            "simplify it or search for a literal part of it"
        )


def bounded_search(pattern: re.Pattern[str], deadline: Deadline) -> Search:
    """``pattern.search(text, pos)`` within ``deadline``, the GIL released while it runs."""
    compiled = compile_bounded(pattern)
    search = compiled.search

    def run(text: str, pos: int = 0, /) -> Any | None:
        try:
            return search(text, pos, timeout=deadline.left(), concurrent=True)
        except TimeoutError:
            raise deadline.exceeded(pattern.pattern) from None

    return run


def bounded_subn(
    pattern: re.Pattern[str], repl: Callable[[Any], str], text: str, count: int, budget: float
) -> tuple[str, int]:
    """``pattern.subn(repl, text, count)`` within ``budget`` seconds, the GIL released;
    ``repl`` gets ``regex`` match objects (``expand`` takes ``re``'s templates, and a bad
    one raises ``re.error`` as under ``re``)."""
    import regex

    deadline = Deadline(budget, "pattern")
    try:
        result: tuple[str, int] = compile_bounded(pattern).subn(
            repl, text, count=count, timeout=deadline.left(), concurrent=True
        )
    except TimeoutError:
        raise deadline.exceeded(pattern.pattern) from None
    except regex.error as exc:
        raise re.error(str(exc)) from None
    return result
