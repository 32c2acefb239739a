"""Process checks shared by the unit and end-to-end tests."""

from __future__ import annotations


def process_gone(pid: int) -> bool:
    """True once ``pid`` has exited: a zombie counts as gone (its parent may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
