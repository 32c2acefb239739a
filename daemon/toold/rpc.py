"""The one seam between pygls and pydantic.

pygls hands our custom methods' params over as raw JSON values (see
TooldProtocol.structure_message); here they become pydantic models, results go
back as camelCase JSON, and a ValidationError becomes InvalidParams naming each
field. Handlers raise toold's domain errors (toold.errors); here, and only here for
this front end, they become pygls's JsonRpcException through toold.errors' one
table (code, message, data). Every custom method is registered through
``register_methods``, driven by toold_protocol's method table; models and handlers
load on a method's first call. Nothing here knows the server's class: a handler
gets whatever object the methods were registered on.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError
from pygls.exceptions import JsonRpcException

import toold_protocol
from toold.errors import InvalidParams, TooldError, field_problems, wire_error
from toold_protocol.names import CLIENT_REQUESTS

if TYPE_CHECKING:
    from pydantic import BaseModel

    from toold_protocol import MethodSpec

MethodHandler = Callable[[Any, Any], Awaitable["BaseModel | None"]]
"""``handler(server, params)``: the server the methods are registered on, a params model."""


class FeatureHost(Protocol):
    """What ``register_methods`` needs of a server: pygls's registration and readiness."""

    def feature(self, feature_name: str) -> Callable[[Any], Any]:
        """pygls's decorator registering a method's handler."""
        ...

    async def ready(self) -> None:
        """Wait until requests may be served (the workspace is bound)."""
        ...


def dump(model: BaseModel) -> dict[str, Any]:
    """A wire model as camelCase JSON, optional fields left out when unset."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_params(spec: MethodSpec, raw: Any) -> BaseModel:
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


def as_jsonrpc(exc: TooldError) -> JsonRpcException:
    """A domain error as the exception pygls answers a request with."""
    error = wire_error(exc)
    return JsonRpcException(error.message, code=error.code, data=error.data)


@cache
def _resolve(method: str, target: str) -> tuple[MethodSpec, MethodHandler]:
    module, _, func = target.partition(":")
    return toold_protocol.METHODS[method], getattr(importlib.import_module(module), func)


def register_methods(server: FeatureHost, handlers: Mapping[str, str]) -> None:
    """Register a handler (``module:function``) for every client request of the contract."""
    for method in CLIENT_REQUESTS:
        if method not in handlers:
            raise LookupError(f"no handler for {method}")
        server.feature(method)(_adapt(server, method, handlers[method]))


def _adapt(server: FeatureHost, method: str, target: str) -> Any:
    async def feature(params: Any) -> Any:
        await server.ready()
        spec, handler = _resolve(method, target)
        try:
            result = await handler(server, parse_params(spec, params))
        except TooldError as exc:
            raise as_jsonrpc(exc) from None
        return None if result is None else dump(result)

    feature.__name__ = method.replace("/", "_")
    return feature
