"""The ``connect`` fixture: one test body, run over every front end.

As in the MCP SDK's tests/interaction, a test asks for ``connect`` and calls it with a
workspace; it gets a connected ``Session`` (tests/interaction/sessions.py) of the
transport this instance of the test runs on, and never names the transport. The
in-process transports are the fast loop; one spawned process per front end checks that
the same body holds through a real ``toold serve`` / ``toold mcp`` / ``toold acp``, and
is marked slow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agents.conftest import API_KEY, ModelServer
from tests.agents.conftest import model as model  # the scripted Messages API, for ACP
from tests.interaction.sessions import Session, lsp_in_process, lsp_spawned

Connect = Callable[[Path], Session]
"""Open a session on a workspace (configure toold.toml before calling it)."""

TRANSPORTS = [
    "lsp",
    "mcp",
    "acp",
    pytest.param("lsp-process", marks=pytest.mark.slow),
    pytest.param("mcp-process", marks=pytest.mark.slow),
    pytest.param("acp-process", marks=pytest.mark.slow),
]


@pytest.fixture(params=TRANSPORTS)
def connect(request: pytest.FixtureRequest) -> Iterator[Connect]:
    """A factory of sessions over this instance's transport; all closed after the test."""
    transport: str = request.param
    opened: list[Session] = []

    def open_session(workspace: Path) -> Session:
        if transport.startswith("acp"):
            from tests.interaction.acp_front import AcpClientSession

            model = request.getfixturevalue("model")
            assert isinstance(model, ModelServer)
            if transport == "acp":  # the agent runs here: its model is the scripted one
                monkeypatch = request.getfixturevalue("monkeypatch")
                monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
                monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
                monkeypatch.delenv("TOOLD_MODEL", raising=False)
            session: Session = AcpClientSession(transport, workspace, model)
        elif transport.startswith("mcp"):
            from tests.interaction.mcp_front import McpSession

            session = McpSession(transport, workspace)
        elif transport == "lsp":
            session = lsp_in_process(workspace)
        else:
            session = lsp_spawned(workspace)
        opened.append(session)
        return session

    yield open_session
    for session in reversed(opened):
        session.close()
