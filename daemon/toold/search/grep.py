"""Content search with Python ``re`` semantics, optionally pre-filtered by ripgrep.

For a literal pattern ripgrep lists the candidate files (a superset of the files
Python would match), and Python then finds the lines, so results keep ``re``
semantics and toold's line numbering whatever ripgrep does. A regex is prefiltered
the same way by the longest literal every match must contain (``class \\w+Error\\(``
needs ``Error(``), found in Python's own parse of it: ripgrep never interprets it.

ripgrep's answer is only a list of names: every line in a result comes from a file
toold opened itself, relative to its folder's descriptor without following a symlink
(search.walk), so a link swapped in while ripgrep runs is refused, never read.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from toold.search.bounded import SEARCH_BUDGET, Deadline, Search, bounded_search
from toold.search.patterns import GlobPattern
from toold.search.walk import SKIP_DIRS, FoundFile, Tree, walk_key

MAX_FILE_BYTES = 1_048_576
_REGEX_META = frozenset(".^$*+?{}[]\\|()")
# Constructs whose meaning differs between one line and a whole text.
_LINE_ONLY = re.compile(r"\\[AZ]|\(\?<?[=!]")


@dataclass(frozen=True)
class GrepQuery:
    """What to look for and where to stop."""

    regex: re.Pattern[str]
    include: GlobPattern | None = None
    max_matches: int = 1000
    max_file_bytes: int = MAX_FILE_BYTES
    skip_dirs: frozenset[str] = SKIP_DIRS
    include_hidden: bool = True

    @property
    def literal(self) -> str | None:
        """The pattern as a plain string when it has no regex syntax, else None."""
        source = self.regex.pattern
        flags = self.regex.flags & ~(re.UNICODE | re.IGNORECASE)
        if flags or not source or "\n" in source or _REGEX_META.intersection(source):
            return None
        return source

    @property
    def required_literal(self) -> str | None:
        """A string every match of a (case-sensitive) regex contains, or None."""
        return required_literal(self.regex)


MIN_REQUIRED = 3  # shorter literals filter too little to pay for a ripgrep run


@lru_cache(maxsize=256)  # bounded: a long-lived daemon sees endless patterns
def required_literal(regex: re.Pattern[str]) -> str | None:
    """The longest run of literal characters at the top level of ``regex``.

    Only top-level items count (never inside a branch, a group or an optional
    repeat), so every match contains the run; None for short runs, case-insensitive
    patterns and characters a line cannot hold.
    """
    if regex.flags & re.IGNORECASE:
        return None
    try:
        from re import _parser  # type: ignore[attr-defined]

        items = _parser.parse(regex.pattern, regex.flags & ~re.UNICODE)
    except Exception:
        return None
    best, run = "", []
    for op, value in [*items, (None, None)]:
        if op is _parser.LITERAL:
            run.append(chr(value))
            continue
        # Spaces are everywhere: of two runs, keep the one with more other characters.
        if len(run) - run.count(" ") > len(best) - best.count(" "):
            best = "".join(run)
        run = []
    if len(best) < MIN_REQUIRED or any(c in best for c in "\n\r\x00"):
        return None
    return best


def literal_pattern(text: str, flags: int = 0) -> re.Pattern[str]:
    """A regex matching ``text`` literally, left unescaped when it has no regex syntax
    so that GrepQuery.literal still recognises it (and ripgrep can prefilter)."""
    if _REGEX_META.intersection(text) or "\n" in text:
        return re.compile(re.escape(text), flags)
    return re.compile(text, flags)


@dataclass(frozen=True)
class LineMatch:
    """One matching line; ``path`` is the file's workspace-relative posix path."""

    path: str
    line_number: int
    text: str


def normalize_newlines(text: str) -> str:
    """CRLF and CR become LF (universal newlines)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def split_lines(text: str) -> list[str]:
    """Split on universal newlines, the numbering read_file uses too."""
    lines = normalize_newlines(text).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def whole_text_filter(regex: re.Pattern[str]) -> re.Pattern[str] | None:
    """A pattern that matches a text whenever ``regex`` matches one of its lines.

    Searching the whole text once lets files without a match skip line splitting.
    None when the pattern uses anchors or lookarounds that see across lines.
    """
    if _LINE_ONLY.search(regex.pattern):
        return None
    return re.compile(regex.pattern, regex.flags | re.MULTILINE)


@cache
def ripgrep_binary() -> str | None:
    """Path of ripgrep (from the pinned PyPI wheel or PATH), or None."""
    local = Path(sys.executable).with_name("rg")
    return os.fspath(local) if local.exists() else shutil.which("rg")


def _rg_candidates(root: Path, query: GrepQuery, literal: str) -> list[str] | None:
    """Paths below the folder ``root`` (in walk order) of files ripgrep finds ``literal`` in.

    Only a list of names: each is reopened through the walk (Tree.select) and matched
    by Python, so nothing ripgrep read (it may race a swapped link) reaches a result.
    """
    rg = ripgrep_binary()
    if rg is None:
        return None
    argv = [rg, "--files-with-matches", "--fixed-strings", "--no-ignore", "--hidden", "--text"]
    argv += ["--no-messages", "--no-config", "--null", "--max-filesize", str(query.max_file_bytes)]
    if query.regex.flags & re.IGNORECASE:
        argv.append("--ignore-case")
    for name in sorted(query.skip_dirs):
        argv += ["--glob", f"!{name}/"]
    argv += ["--", literal, os.fspath(root)]
    try:
        proc = subprocess.run(argv, capture_output=True, check=False, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode not in (0, 1):
        return None
    prefix = os.fspath(root).rstrip("/") + "/"
    found = []
    for raw in proc.stdout.split(b"\0"):
        name = os.fsdecode(raw)
        if not name.startswith(prefix):
            continue
        rel = name[len(prefix) :]
        parts = rel.split("/")
        if query.skip_dirs.intersection(parts[:-1]) or "" in parts or ".." in parts:
            continue
        if not query.include_hidden and any(p.startswith(".") for p in parts):
            continue
        found.append(rel)
    found.sort(key=walk_key)
    return found


def candidate_files(tree: Tree, query: GrepQuery) -> Iterator[FoundFile]:
    """Files worth reading below the walk's start, in walk order, each opened by the walk."""
    literal = query.literal or query.required_literal
    if literal is not None and tree.kind == "folder":
        found = _rg_candidates(tree.start, query, literal)
        if found is not None:
            return tree.select(found)
    return tree.files(skip_dirs=query.skip_dirs, include_hidden=query.include_hidden)


def grep_lines(tree: Tree, query: GrepQuery) -> Iterator[LineMatch]:
    """Yield matching lines below ``tree``'s start in sorted file order, at most max_matches.

    Every line comes from a file the walk opened itself (no symlink followed).
    """
    literal = query.literal if not query.regex.flags & re.IGNORECASE else None
    required = (literal or query.required_literal or "").encode()
    deadline = Deadline(SEARCH_BUDGET, "pattern")
    search = bounded_search(query.regex, deadline)
    text_filter = whole_text_filter(query.regex) if literal is None else None
    whole = bounded_search(text_filter, deadline) if text_filter is not None else None
    hits = _hit_finder(literal, whole, search)
    include = query.include
    found = 0
    for file in candidate_files(tree, query):
        # A file given as the search start is still filtered by ``include``, on its name.
        if include is not None and not include.match(file.rel):
            continue
        data = file.read(query.max_file_bytes)
        if data is None or required not in data:
            continue
        try:
            text = normalize_newlines(data.decode("utf-8"))
        except UnicodeDecodeError:
            continue
        if hits is not None:
            lines = _lines_with(text, *hits)
        else:
            lines = (
                (number, line)
                for number, line in enumerate(split_lines(text), start=1)
                if search(line)
            )
        for number, line in lines:
            yield LineMatch(file.path, number, line)
            found += 1
            if found >= query.max_matches:
                return


Finder = Callable[[str, int], int]
"""Where the next whole-text match starts in a text at or after an index (-1: none)."""


def _hit_finder(
    literal: str | None, whole: Search | None, search: Search
) -> tuple[Finder, Callable[[str], object]] | None:
    """How _lines_with finds and confirms lines; None where only line by line is exact.
    ``whole`` searches a whole text (whole_text_filter's pattern)."""
    if literal is not None:
        needle = literal

        def find_literal(text: str, pos: int) -> int:
            return text.find(needle, pos)

        # A literal holds no newline: it lies inside the (non-empty) line it starts in.
        return find_literal, bool
    if whole is not None:
        whole_search = whole

        def find_match(text: str, pos: int) -> int:
            match = whole_search(text, pos)
            return -1 if match is None else match.start()

        return find_match, search
    return None


def _lines_with(
    text: str, next_hit: Finder, confirm: Callable[[str], object]
) -> Iterator[tuple[int, str]]:
    """``(number, line)`` of the lines of ``text`` (newlines normalised) that ``confirm``.

    ``next_hit(text, pos)`` is where the next whole-text match starts at or after
    ``pos`` (-1: none). Every line holding a match holds the start of one, and the leftmost
    match from the start of a line begins in the first line from there that holds a
    match, so only lines where a hit starts are split out and each is confirmed on
    its own: the same lines as searching every line, without visiting the others.
    """
    if not text:
        return
    end, pos, number = len(text), 0, 1
    if text.endswith("\n"):
        end -= 1  # the empty piece after the last newline is not a line (split_lines)
    while pos <= end and (hit := next_hit(text, pos)) != -1 and hit <= end:
        start = text.rfind("\n", 0, hit) + 1
        stop = text.find("\n", hit)
        stop = len(text) if stop == -1 else stop
        number += text.count("\n", pos, start)
        line = text[start:stop]
        if confirm(line):
            yield number, line
        pos, number = stop + 1, number + 1


__all__ = ["GrepQuery", "LineMatch", "Tree", "grep_lines", "literal_pattern", "split_lines"]
