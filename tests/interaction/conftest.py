"""The ``connect`` fixture: one test body, run over every front end.

As in the MCP SDK's tests/interaction, a test asks for ``connect`` and calls it with a
workspace; it gets a connected ``Session`` (tests/interaction/sessions.py) of the
transport this instance of the test runs on, and never names the transport. The
in-process transports are the fast loop; one spawned process per front end checks that
the same body holds through a real ``toold serve`` / ``toold mcp`` / ``toold acp``, and
is marked slow.

What only the LSP front end has (tools/list's formats, calls as the user, todos, tasks,
jobs, skills and checkpoints methods, pushed notifications, a permission prompt the
client answers, malformed frames) is asked through ``lsp``: in-process daemons
(lsp_front.py) that speak raw wire JSON, and ``client``/``local_client``/``raw_client``
built on it, named as tests/e2e named its spawned ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.agents.conftest import API_KEY, ModelServer
from tests.agents.conftest import model as model  # the scripted Messages API, for ACP
from tests.interaction.lsp_front import InProcessDaemon
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

WITH_JOBS = [t for t in TRANSPORTS if "acp" not in str(getattr(t, "values", [t])[0])]
"""The transports whose front end shows a job by id (sessions.JobReader): ACP has none;
a test asks for them with ``@pytest.mark.parametrize("connect", WITH_JOBS, indirect=True)``."""


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


class OpenLsp(Protocol):
    """Start an in-process daemon on a workspace; initialize it unless told not to."""

    def __call__(
        self,
        workspace: Path | None,
        *,
        initialize: bool = True,
        max_message_bytes: int | None = None,
        **params: Any,
    ) -> InProcessDaemon:
        """``params`` go into initialize (rootUri defaults to the workspace's)."""
        ...


LOCAL_RUNNER = {"config": {"execution": {"tool_runner": "local"}}}
"""For tests that read the host pids of what a command starts ($$, $!): inside the
default bwrap sandbox's PID namespace they are not the host's."""


@pytest.fixture
def lsp() -> Iterator[OpenLsp]:
    """A factory of in-process LSP daemons; each must end with status 0 unless the test
    closed it itself."""
    opened: list[InProcessDaemon] = []

    def open_lsp(
        workspace: Path | None,
        *,
        initialize: bool = True,
        max_message_bytes: int | None = None,
        **params: Any,
    ) -> InProcessDaemon:
        daemon = InProcessDaemon(workspace, max_message_bytes=max_message_bytes)
        opened.append(daemon)
        if initialize:
            if workspace is not None:
                params.setdefault("rootUri", workspace.as_uri())
            daemon.initialize(**params)
        return daemon

    yield open_lsp
    statuses = {id(d): d.close() for d in reversed(opened) if not d.closed}
    assert all(status == 0 for status in statuses.values()), statuses


@pytest.fixture
def client(lsp: OpenLsp, workspace: Path) -> InProcessDaemon:
    """An initialized in-process daemon on ``workspace``."""
    return lsp(workspace)


@pytest.fixture
def local_client(lsp: OpenLsp, workspace: Path) -> InProcessDaemon:
    """An initialized in-process daemon on the local runner (see LOCAL_RUNNER)."""
    return lsp(workspace, initializationOptions=LOCAL_RUNNER)


@pytest.fixture
def raw_client(lsp: OpenLsp, workspace: Path) -> InProcessDaemon:
    """An in-process daemon that has not been initialized yet."""
    return lsp(workspace, initialize=False)
