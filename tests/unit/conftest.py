"""Fixtures for unit tests: a real workspace on tmp_path and a way to call its tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.calls import Failure, failing, user_call
from toold.tools import BuiltinToolProvider, ToolOutcome, ToolRuntime, ToolSet

Put = Callable[[str, str | bytes], Path]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty, resolved workspace folder (with room for siblings next to it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws.resolve()


class Caller:
    """Calls the tools of one workspace as an agent's call runs them: ``ToolGateway.call``.

    ``caller(name, **args)`` answers the outcome's content (a failed call is an assertion
    error, except in ``fails``); ``caller.failed(name, **args)`` the content of a call that
    must fail; ``caller.outcome(name, **args)`` the whole outcome (``await caller.run(...)``
    in a running loop); ``with caller.fails(kind, match):`` stands for ``pytest.raises``
    around a call (tests/calls.py ``failing``).
    """

    def __init__(self, toolset: ToolSet) -> None:
        self.toolset = toolset
        self.outcomes: list[ToolOutcome] = []
        self.expecting = 0

    async def run(self, name: str, /, **args: Any) -> ToolOutcome:
        """Run ``name`` with ``args`` as the user, through the gateway (in a running loop)."""
        done = await user_call(self.toolset, name, args)
        self.outcomes.append(done)
        return done

    def outcome(self, name: str, /, **args: Any) -> ToolOutcome:
        """Run ``name`` with ``args`` as the user, through the gateway."""
        return asyncio.run(self.run(name, **args))

    def __call__(self, name: str, /, **args: Any) -> Any:
        done = self.outcome(name, **args)
        # A failed call outside ``fails`` is a test's mistake unless the test reads the
        # outcome itself (``outcome``): a result nobody checks must not hide a failure.
        assert not done.is_error or self.expecting, f"{name} failed: {done.content!r}"
        return done.content

    def failed(self, name: str, /, **args: Any) -> Any:
        """The content of a call that must fail (isError): a tool's own failure text."""
        done = self.outcome(name, **args)
        assert done.is_error, f"{name} did not fail: {done.content!r}"
        return done.content

    @contextmanager
    def fails(self, kind: type[BaseException], match: str | None = None) -> Iterator[Failure]:
        """The call made in the block fails with ``kind``, its message matching ``match``."""
        self.expecting += 1
        try:
            with failing(self.outcomes, kind, match) as found:
                yield found
        finally:
            self.expecting -= 1


Call = Caller
ToolsWith = Callable[..., Caller]


@pytest.fixture
def tools_with(workspace: Path) -> ToolsWith:
    """``tools_with(**runtime)``: a Caller over every builtin bound to ``workspace`` and
    the given ToolRuntime fields (config, todos, tasks, skills, background, ...)."""

    def _bind(**runtime: Any) -> Caller:
        bound = ToolRuntime(workspace=workspace, **runtime)
        return Caller(ToolSet(BuiltinToolProvider(bound).get_tools()))

    return _bind


@pytest.fixture
def call(tools_with: ToolsWith) -> Caller:
    """``call(name, **args)`` runs the tool bound to ``workspace`` through the gateway."""
    return tools_with()


@pytest.fixture
def put(workspace: Path) -> Put:
    """``put(rel, data)`` writes a file (text as UTF-8, or bytes) under the workspace."""

    def _put(rel: str, data: str | bytes) -> Path:
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            target.write_bytes(data)
        else:
            target.write_bytes(data.encode("utf-8"))
        return target

    return _put
