"""Content search with Python ``re`` semantics, optionally pre-filtered by ripgrep.

For a literal pattern ripgrep lists the candidate files (a superset of the files
Python would match), and Python then finds the lines, so results keep ``re``
semantics and toold's line numbering whatever ripgrep does. A regex is prefiltered
the same way by the longest literal every match must contain (``class \\w+Error\\(``
needs ``Error(``), found in Python's own parse of it: ripgrep never interprets it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from toold.search.patterns import GlobPattern
from toold.search.walk import SKIP_DIRS, walk_files, walk_key

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
    """One matching line; ``path`` is the absolute file path."""

    path: Path
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


def _rg_candidates(root: Path, query: GrepQuery, literal: str) -> list[tuple[Path, str]] | None:
    rg = ripgrep_binary()
    if rg is None or root.is_file():
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
    prefix = len(os.fspath(root).rstrip("/")) + 1
    found = []
    for raw in proc.stdout.split(b"\0"):
        if not raw:
            continue
        name = os.fsdecode(raw)
        rel = name[prefix:]
        parts = rel.split("/")
        # rg never follows links, but double-check what walk_files would have refused.
        if query.skip_dirs.intersection(parts[:-1]) or os.path.islink(name):
            continue
        if not query.include_hidden and any(p.startswith(".") for p in parts):
            continue
        found.append((Path(name), rel))
    found.sort(key=lambda item: walk_key(item[1]))
    return found


def candidate_files(root: Path, query: GrepQuery) -> Iterable[tuple[Path, str]]:
    """``(path, root-relative posix path)`` of files worth reading, in walk order."""
    literal = query.literal or query.required_literal
    if literal is not None:
        found = _rg_candidates(root, query, literal)
        if found is not None:
            return found
    walked = walk_files(root, skip_dirs=query.skip_dirs, include_hidden=query.include_hidden)
    if root.is_file():
        # A file given as the search root is still filtered by ``include``, on its name.
        return ((path, path.name) for path in walked)
    prefix = len(os.fspath(root).rstrip("/")) + 1
    return ((path, os.fspath(path)[prefix:]) for path in walked)


def grep_lines(root: Path, query: GrepQuery) -> Iterator[LineMatch]:
    """Yield matching lines under ``root`` in sorted file order, at most max_matches."""
    literal = query.literal if not query.regex.flags & re.IGNORECASE else None
    required = (literal or query.required_literal or "").encode()
    search = query.regex.search
    text_filter = whole_text_filter(query.regex) if literal is None else None
    include = query.include
    found = 0
    for path, rel in candidate_files(root, query):
        if include is not None and not include.match(rel):
            continue
        try:
            if path.stat().st_size > query.max_file_bytes:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if required not in data:
            continue
        try:
            text = normalize_newlines(data.decode("utf-8"))
        except UnicodeDecodeError:
            continue
        if text_filter is not None and text_filter.search(text) is None:
            continue
        for number, line in enumerate(split_lines(text), start=1):
            if (literal in line) if literal is not None else search(line):
                yield LineMatch(path, number, line)
                found += 1
                if found >= query.max_matches:
                    return


__all__ = ["GrepQuery", "LineMatch", "grep_lines", "literal_pattern", "split_lines"]
