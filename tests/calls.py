"""Tests run a tool the way an agent's call runs: through ``ToolGateway.call``.

``user_call`` builds a gateway over a tool set (and a runner, if given) whose guard
holds no rules, and calls it as the user (origin ``"user"``): the guard judges the call
and lets it through, and the tool runs through the one dispatch, the runner included.
An exception in the tool is the outcome's ``Error: <Class>: <message>`` text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from toold.gateway import ToolGateway
from toold.permissions.guard import PermissionGuard
from toold.sandbox.runner import ToolRunner
from toold.tools.base import ToolArgumentError
from toold.tools.context import CallContext
from toold.tools.toolset import ToolOutcome, ToolSet


def user_gateway(toolset: ToolSet, runner: ToolRunner | None = None) -> ToolGateway:
    """A gateway with a guard of no rules: the user's calls run, none is asked about."""
    return ToolGateway(toolset, PermissionGuard(), runner)


async def user_call(
    toolset: ToolSet,
    name: str,
    arguments: Any,
    *,
    runner: ToolRunner | None = None,
    progress: Callable[[str], None] | None = None,
) -> ToolOutcome:
    """Run one call through ``ToolGateway.call`` as the user."""
    context = CallContext(origin="user", progress=progress)
    return await user_gateway(toolset, runner).call(name, arguments, context)


class Failure:
    """What ``failing`` found: the failed call's exception class name and message."""

    def __init__(self) -> None:
        self.kind = ""
        self.message = ""

    @property
    def value(self) -> str:
        """The message, as ``pytest.raises(...).value`` would print it."""
        return self.message

    def __str__(self) -> str:
        return self.message


_CLASS = re.compile(r"Error: (\w+): (.*)\Z", re.DOTALL)


def _names(kind: type[BaseException]) -> set[str]:
    """The names of ``kind`` and of every subclass of it loaded now."""
    names, pending = {kind.__name__}, [kind]
    while pending:
        for sub in pending.pop().__subclasses__():
            names.add(sub.__name__)
            pending.append(sub)
    return names


def failure(outcome: ToolOutcome, kind: type[BaseException]) -> Failure:
    """The failure ``outcome`` reports, checked to be a ``kind`` (or a subclass of it).

    The dispatch writes a tool's exception as ``Error: <Class>: <message>``. Arguments the
    tool's schema refuses (ToolArgumentError) and files a call cannot name (ValueError) are
    ``Error: <message>``: those count as a ValueError's.
    """
    assert outcome.is_error, f"the call did not fail: {outcome.content!r}"
    text = outcome.content
    assert isinstance(text, str) and text.startswith("Error: "), text
    found = Failure()
    matched = _CLASS.match(text)
    if matched is not None and matched.group(1) in _names(BaseException):
        found.kind, found.message = matched.group(1), matched.group(2)
    else:
        found.kind, found.message = ToolArgumentError.__name__, text.removeprefix("Error: ")
        if not issubclass(ToolArgumentError, kind):
            found.kind = ValueError.__name__
    assert found.kind in _names(kind), f"expected {kind.__name__}, got {text!r}"
    return found


@contextmanager
def failing(
    outcomes: list[ToolOutcome], kind: type[BaseException], match: str | None = None
) -> Iterator[Failure]:
    """Like ``pytest.raises(kind, match=...)`` for the last call made in the block: its
    outcome (the last of ``outcomes`` then) is an error of ``kind`` whose message matches."""
    before = len(outcomes)
    found = Failure()
    yield found
    assert len(outcomes) > before, "no call was made"
    got = failure(outcomes[-1], kind)
    found.kind, found.message = got.kind, got.message
    if match is not None:
        assert re.search(match, found.message), f"{match!r} does not match {found.message!r}"
