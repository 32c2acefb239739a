"""The one way tests wait for state that sends no event (a process exiting, a file appearing).

Where there is an event (a notification, a response, a line on a pipe), wait for the
event instead; this polls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 10.0
POLL_S = 0.01


def wait_until(
    check: Callable[[], T], what: str | Callable[[], object], timeout: float = WAIT_S
) -> T:
    """Poll ``check()`` until it returns something truthy, and return that value.

    Fails (AssertionError) after ``timeout`` seconds, saying "timed out ... waiting for
    ``what``"; ``what`` may be a function, called only then, to describe the state seen.
    ``check`` gets one last call at the deadline, so a slow machine never fails a check
    that has just come true.
    """
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() >= deadline:
            if value := check():
                return value
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {described}")
        time.sleep(POLL_S)
    return value
