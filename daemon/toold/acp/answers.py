"""The answers every ``toold acp`` gives alike, through the engines or not: its
``initialize``, the errors for an auth method and an unknown session, and a session's
``cwd`` as a folder (toold.acp.agent and toold.acp.front use them)."""

from __future__ import annotations

from pathlib import Path

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    McpCapabilities,
    PromptCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
)

from toold import __version__
from toold_protocol import errors as codes


def workspace_folder(cwd: str) -> Path:
    """session/new's ``cwd`` as a folder; RequestError naming the field and the fix."""
    path = Path(cwd)
    if not path.is_absolute():
        raise RequestError(
            codes.INVALID_PARAMS, f"cwd {cwd!r} must be an absolute path (ACP requires one)"
        )
    if not path.is_dir():
        raise RequestError(
            codes.INVALID_PARAMS, f"cwd {cwd!r} is not an existing folder: open a folder"
        )
    return path.resolve()


def initialize_response() -> InitializeResponse:
    """Version 1, what toold's sessions support, and no auth methods (keys come from the
    environment or toold.toml)."""
    return InitializeResponse(
        protocol_version=PROTOCOL_VERSION,  # the one version toold speaks, whatever was asked
        agent_capabilities=AgentCapabilities(
            load_session=True,
            prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=True),
            mcp_capabilities=McpCapabilities(http=True, sse=False),
            session_capabilities=SessionCapabilities(
                list=SessionListCapabilities(),
                resume=SessionResumeCapabilities(),
                close=SessionCloseCapabilities(),
            ),
        ),
        auth_methods=[],
        agent_info=Implementation(name="toold", title="toold", version=__version__),
    )


def no_auth_methods(method_id: str) -> RequestError:
    """authenticate's error: toold offers no auth methods, so none can be chosen."""
    return RequestError(
        codes.INVALID_PARAMS, f"methodId {method_id!r}: toold offers no auth methods"
    )


def unknown_session(session_id: str) -> RequestError:
    """The error for a sessionId this connection does not hold."""
    return RequestError(
        codes.INVALID_PARAMS, f"sessionId {session_id!r} is unknown: create one with session/new"
    )
