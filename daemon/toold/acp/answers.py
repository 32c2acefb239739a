"""The answers every ``toold acp`` gives alike, through the engines or not: its
``initialize`` (v1, or v2 where negotiated), the errors for an auth method and an
unknown session, and a session's ``cwd`` as a folder (toold.acp.agent, toold.acp.front
and toold.acp.v2_server use them)."""

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
from toold.acp import v2
from toold.acp.history import RESOURCE_NOT_FOUND
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


def initialize_v2(version: str = __version__) -> v2.InitializeResponse:
    """ACP v2's answer: version 2, ``info``, and the session baseline with prompts that
    embed context and stdio and HTTP MCP servers (support markers are objects)."""
    return v2.InitializeResponse(
        protocol_version=v2.PROTOCOL_VERSION,
        info=v2.Implementation(name="toold", title="toold", version=version),
        capabilities=v2.AgentCapabilities(
            session=v2.SessionCapabilities(
                prompt=v2.PromptCapabilities(embedded_context=v2.Supported()),
                mcp=v2.McpCapabilities(stdio=v2.Supported(), http=v2.Supported()),
            )
        ),
        auth_methods=[],
    )


def negotiated(params: dict[str, object], allow_v2: bool) -> int:
    """The version a client's initialize gets: 2 when it asks for 2 or more and v2 is
    allowed (``toold acp --protocol 2``), else 1 (the client then decides to go on)."""
    asked = params.get("protocolVersion")
    if allow_v2 and isinstance(asked, int) and not isinstance(asked, bool) and asked >= 2:
        return v2.PROTOCOL_VERSION
    return PROTOCOL_VERSION


def initialize_answer(version: int) -> dict[str, object]:
    """The initialize result of a negotiated version, as JSON."""
    if version == v2.PROTOCOL_VERSION:
        return v2.dump(initialize_v2())
    return initialize_response().model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude_unset=True
    )


def no_auth_methods(method_id: str) -> RequestError:
    """authenticate's error: toold offers no auth methods, so none can be chosen."""
    return RequestError(
        codes.INVALID_PARAMS, f"methodId {method_id!r}: toold offers no auth methods"
    )


def unknown_session(session_id: str) -> RequestError:
    """The error for a sessionId this connection does not hold: ACP's resource not found
    (-32002), which the TypeScript SDK takes as success for an idempotent session/close."""
    return RequestError(
        RESOURCE_NOT_FOUND, f"sessionId {session_id!r} is unknown: create one with session/new"
    )
