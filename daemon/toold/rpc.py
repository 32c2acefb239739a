"""The one seam between pygls and pydantic.

pygls hands our custom methods' params over as raw JSON values (see
TooldProtocol.structure_message); here they become pydantic models, results go
back as camelCase JSON, and a ValidationError becomes InvalidParams naming each
field. Every custom method is registered through ``register_methods``, driven by
toold_protocol.METHODS.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from pygls.exceptions import JsonRpcInvalidParams

from toold_protocol import METHODS, MethodSpec

if TYPE_CHECKING:
    from toold.server import TooldServer

MethodHandler = Callable[["TooldServer", Any], Awaitable[BaseModel | None]]


def dump(model: BaseModel) -> dict[str, Any]:
    """A wire model as camelCase JSON, optional fields left out when unset."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_params(spec: MethodSpec, raw: Any) -> BaseModel:
    """Validate raw params against the method's model; InvalidParams names each bad field."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise JsonRpcInvalidParams(
            f"{spec.name}: params must be an object, got {type(raw).__name__}"
        )
    try:
        return spec.params.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'params'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise JsonRpcInvalidParams(f"{spec.name}: invalid params: {problems}") from None


def register_methods(server: TooldServer, handlers: Mapping[str, MethodHandler]) -> None:
    """Register a handler for every client-to-server method of the contract."""
    for spec in METHODS.values():
        if spec.direction != "clientToServer":
            continue
        if spec.name not in handlers:
            raise LookupError(f"no handler for {spec.name}")
        server.feature(spec.name)(_adapt(server, spec, handlers[spec.name]))


def _adapt(server: TooldServer, spec: MethodSpec, handler: MethodHandler) -> Any:
    async def feature(params: Any) -> Any:
        result = await handler(server, parse_params(spec, params))
        return None if result is None else dump(result)

    feature.__name__ = spec.name.replace("/", "_")
    return feature


def notify(server: TooldServer, method: str, params: BaseModel) -> None:
    """Send one of the contract's notifications."""
    server.protocol.notify(method, dump(params))
