"""toold's domain errors, the one table that turns them into JSON-RPC errors, and the
one formatter for pydantic validation errors.

Stores, the gateway and handlers raise these exceptions, which say what went wrong
(``UnknownJob``), never how a transport spells it. Each front end translates once:
the LSP-framed daemon in rpc.py, the MCP bridge (MCP is JSON-RPC too, so the codes are
the same), and ``toold run``, which meets these errors already on the wire. A handler
never imports a transport's exception types.

This module imports nothing of toold's but the wire contract, so any store may use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toold_protocol import errors as codes

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails


class TooldError(Exception):
    """A failure a front end answers as an error; its code comes from ``JSONRPC_CODES``."""

    @property
    def data(self) -> dict[str, Any] | None:
        """Structured detail for the error's ``data`` member (None: no ``data``)."""
        return None


class InvalidParams(TooldError, ValueError):
    """A request's params do not fit its method's model; the message names each field."""


class UnknownTool(TooldError, KeyError):
    """No tool (nor alias) of that name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"Unknown tool: {self.name}"


class UnknownJob(TooldError, KeyError):
    """No background job with that id (in this daemon's records)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id

    def __str__(self) -> str:
        return f"Unknown job: {self.job_id}"


class ForeignJob(TooldError, RuntimeError):
    """The job runs in another daemon on this workspace; only that daemon can cancel it."""


class TaskStoreError(TooldError, ValueError):
    """``.tasks.json`` cannot be used as it is; the message says how to fix it."""


class AgentUnavailable(TooldError):
    """agent/run without a model provider: no API key in the configured variable."""

    def __init__(self, api_key_env: str) -> None:
        super().__init__(
            f"Agent unavailable: provider is not configured: no API key in ${api_key_env}. "
            "Set it in the environment the editor starts toold with, or name the variable "
            "holding your key in toold.toml ([agent] api_key_env), then restart toold."
        )
        self.api_key_env = api_key_env

    @property
    def data(self) -> dict[str, Any] | None:
        """``{"apiKeyEnv": ...}``: the variable a client can offer to set."""
        return {"apiKeyEnv": self.api_key_env}


class UnknownCheckpoint(TooldError, KeyError):
    """No checkpoint with that id (never made, dropped to stay in bounds, or undone)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "Unknown checkpoint"


class CheckpointStoreError(TooldError, ValueError):
    """``.toold/checkpoints`` cannot be used as it is (damaged or forged); the message
    names the file and the fix. Nothing is read or written past it."""


class CheckpointConflict(TooldError):
    """Files changed outside toold since it last wrote them: restoring would lose that."""

    def __init__(self, message: str, paths: list[str]) -> None:
        super().__init__(message)
        self.paths = paths

    @property
    def data(self) -> dict[str, Any] | None:
        """``{"paths": [...]}``: the files changed outside toold."""
        return {"paths": self.paths}


class FileChangedError(TooldError):
    """An agent's edit of a file it has not read, or that changed since it read it."""


class InsideToolCall(TooldError):
    """A request the engine refuses from a client running inside one of its tool calls."""


JSONRPC_CODES: dict[type[TooldError], int] = {
    TooldError: codes.INTERNAL_ERROR,
    InvalidParams: codes.INVALID_PARAMS,
    UnknownTool: codes.INVALID_PARAMS,
    UnknownJob: codes.NOT_FOUND,
    ForeignJob: codes.INVALID_REQUEST,
    TaskStoreError: codes.INTERNAL_ERROR,
    AgentUnavailable: codes.INVALID_REQUEST,
    InsideToolCall: codes.INVALID_REQUEST,
    UnknownCheckpoint: codes.NOT_FOUND,
    CheckpointStoreError: codes.INTERNAL_ERROR,
    CheckpointConflict: codes.CONFLICT,
    FileChangedError: codes.CONFLICT,
}
"""Each domain error's JSON-RPC code; a subclass takes its nearest listed ancestor's."""


@dataclass(frozen=True)
class WireError:
    """A JSON-RPC error object: what every front end sends for a domain error."""

    code: int
    message: str
    data: dict[str, Any] | None = None


def wire_error(exc: TooldError) -> WireError:
    """The JSON-RPC error for ``exc``, looked up in ``JSONRPC_CODES``."""
    code = next(JSONRPC_CODES[c] for c in type(exc).__mro__ if c in JSONRPC_CODES)
    return WireError(code, str(exc), exc.data)


# -- pydantic validation errors ---------------------------------------------------------------


def describe(err: ErrorDetails, *, unexpected: str | None = None, show_input: bool = True) -> str:
    """What one pydantic error says is wrong: its message and the value given.

    ``unexpected`` replaces the message of an unknown field (say how to fix it there);
    ``show_input`` appends ``(got ...)`` (cut at 80 characters) to all but a missing field.
    """
    if unexpected is not None and err["type"] == "extra_forbidden":
        return unexpected
    if show_input and err["type"] != "missing" and "input" in err:
        return f"{err['msg']} (got {err['input']!r:.80})"
    return err["msg"]


def dotted(loc: Sequence[int | str]) -> str:
    """A pydantic location as ``a.b.0``."""
    return ".".join(str(part) for part in loc)


def field_problems(
    exc: ValidationError,
    root: str,
    *,
    unexpected: str | None = None,
    show_input: bool = True,
) -> list[str]:
    """``field: what is wrong`` for each error of ``exc``; ``root`` names the whole value."""
    return [
        f"{dotted(err['loc']) or root}: "
        + describe(err, unexpected=unexpected, show_input=show_input)
        for err in exc.errors(include_url=False)
    ]
