"""The one seam between JSON-RPC and pydantic, and the typed shape of a custom method.

A ``Request`` ties one custom method's name, params model, result model and handler
together, so mypy checks the handler against its models; toold.handlers.table holds one
row per method (a test checks the rows against toold_protocol's contract). The
connection hands our custom methods' params over as raw JSON values; here they become
pydantic models, results go back as camelCase JSON, and a ValidationError becomes
InvalidParams naming each field. Handlers raise toold's domain errors (toold.errors);
here, and only here for this front end, they become a connection.ResponseError through
toold.errors' one table (code, message, data). A handler gets a ``Context`` (the
workspace, its session's editor, whether the client runs inside a tool call), never
the session itself. The table loads on the first custom request, so the daemon answers
``initialize`` before loading the protocol's models and the tools.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from toold.connection import ResponseError
from toold.errors import InvalidParams, TooldError, field_problems, wire_error
from toold.modes import SessionMode

if TYPE_CHECKING:
    from toold.editor import Editor
    from toold.gateway import ToolGateway
    from toold.workspace import WorkspaceState

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class Context:
    """What a custom method's handler may use, and nothing more."""

    workspace: WorkspaceState
    """The bound workspace the session serves (shared between sessions in an engine)."""
    editor: Editor
    """The session's editor: ``$/progress`` for a work-done token, prompts, messages."""
    modes: SessionMode = field(default_factory=SessionMode)
    """The session's own permission mode (permissions/setMode), over the shared guard."""
    from_tool: bool = False
    """The client runs inside one of the engine's tool calls (an agent's command): its
    calls are the agent's, and it may not loosen the shared guard."""

    @property
    def gateway(self) -> ToolGateway:
        """The workspace's gateway under this session's mode: what its calls go through."""
        return self.modes.gateway(self.workspace.gateway)


@dataclass(frozen=True)
class Request(Generic[P, R]):
    """One custom request: its name, params and result models, and its handler."""

    name: str
    params: type[P]
    result: type[R]
    handler: Callable[[Context, P], Awaitable[R]]

    async def __call__(self, context: Context, raw: Any) -> dict[str, Any]:
        """Validate ``raw`` params, run the handler, answer its result as wire JSON."""
        try:
            return dump(await self.handler(context, parse_params(self, raw)))
        except TooldError as exc:
            raise as_jsonrpc(exc) from None


class ParamsSpec(Protocol):
    """What ``parse_params`` needs of a method: its name and params model."""

    @property
    def name(self) -> str:
        """The method's wire name."""
        ...

    @property
    def params(self) -> type[BaseModel]:
        """The model its params validate against."""
        ...


def dump(model: BaseModel) -> dict[str, Any]:
    """A wire model as camelCase JSON, optional fields left out when unset."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_params(spec: ParamsSpec, raw: Any) -> Any:
    """Validate raw params against the method's model; InvalidParams names each bad field."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InvalidParams(f"{spec.name}: params must be an object, got {type(raw).__name__}")
    try:
        return spec.params.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(field_problems(exc, "params", show_input=False))
        raise InvalidParams(f"{spec.name}: invalid params: {problems}") from None


def as_jsonrpc(exc: TooldError) -> ResponseError:
    """A domain error as the error a request is answered with."""
    error = wire_error(exc)
    return ResponseError(error.message, error.code, error.data)
