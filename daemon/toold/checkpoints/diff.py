"""Unified diffs of one file's two contents, as ``checkpoints/diff`` and the prompts show them."""

from __future__ import annotations

import difflib
from typing import Literal

DIFF_MAX_LINES = 2_000
"""Past this many differing lines on a side, a diff replaces the differing middle whole:
difflib's matching grows about cubically, and a crafted file of 10,000 lines took it
minutes (a permission prompt waits on it)."""


def unified_diff(path: str, before: bytes | None, after: bytes | None) -> str:
    """A git-style unified diff of one file (``/dev/null`` for a side with no file);
    only ``\\n`` ends a line, as in git (a lone ``\\r`` stays in its line)."""
    if before == after:
        return ""
    try:
        old = _lines(before.decode("utf-8") if before is not None else "")
        new = _lines(after.decode("utf-8") if after is not None else "")
    except UnicodeDecodeError:
        return f"Binary file {path} differs\n"
    out = [
        f"--- {f'a/{path}' if before is not None else '/dev/null'}\n",
        f"+++ {f'b/{path}' if after is not None else '/dev/null'}\n",
    ]
    for group in _Matcher(old, new).get_grouped_opcodes(3):
        first, last = group[0], group[-1]
        old_range = _range(first[1], last[2])
        out.append(f"@@ -{old_range} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + line for line in old[i1:i2]]
                continue
            out += ["-" + line for line in old[i1:i2]]
            out += ["+" + line for line in new[j1:j2]]
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out
    )


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _range(start: int, stop: int) -> str:
    """A hunk header's ``start,length`` (1-based; one line: no length; none: the line before)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if not length else start + 1},{length}"


Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


class _Matcher(difflib.SequenceMatcher[str]):
    """difflib's matching on the lines between the common head and tail, or, when that
    middle is longer than DIFF_MAX_LINES, the middle replaced whole."""

    def __init__(self, old: list[str], new: list[str]) -> None:
        super().__init__(None, old, new)
        head = 0
        while head < min(len(old), len(new)) and old[head] == new[head]:
            head += 1
        tail = 0
        while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
            tail += 1
        a, b = old[head : len(old) - tail], new[head : len(new) - tail]
        middle: list[Opcode]
        if max(len(a), len(b)) <= DIFF_MAX_LINES:
            middle = [
                (tag, i1 + head, i2 + head, j1 + head, j2 + head)
                for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes()
            ]
        else:
            middle = [("replace", head, head + len(a), head, head + len(b))]
        ends: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
        if tail:
            middle.append(("equal", len(old) - tail, len(old), len(new) - tail, len(new)))
        self._codes = ends + middle

    def get_opcodes(self) -> list[Opcode]:
        """The opcodes worked out above (a copy: grouping edits the first and last)."""
        return list(self._codes)
