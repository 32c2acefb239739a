"""Text for a terminal or a prompt: how toold shows words it did not choose.

A file name, a key of toold.toml, a job's command or an agent's diff can hold an escape
sequence (colours, a window title, OSC 52 writing the clipboard), a carriage return or a
bidirectional override that would hide or reorder what the user reads. ``visible`` writes
each such character as its escape (``\\x1b``, ``\\u202e``) and keeps line breaks and tabs,
for a text of lines; ``one_line`` escapes every character that is not printable, those
too, for a name, an id or a path.
"""

from __future__ import annotations

import re

_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u206f\ufeff\ufff9-\ufffb]"
)
"""What must not reach a screen raw: controls but \\n and \\t, zero-width and other format
characters, line and paragraph separators, and bidi controls (as permissions/prompt
escapes them in a call's arguments)."""


def _escaped(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def visible(text: str) -> str:
    """``text`` with each control, format or bidi character written as its escape; line
    breaks and tabs kept."""
    return _HIDDEN.sub(_escaped, text)


def one_line(text: str) -> str:
    """``text`` with each unprintable character written as its escape, a line break too."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
