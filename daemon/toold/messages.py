"""What a message body must be: strict JSON, UTF-8, a JSON-RPC 2.0 object.

``decode`` turns one frame's body into a checked message, or raises BadMessage with
the error answer it deserves (-32700 for bytes that are not JSON, -32600 for JSON
that is not a JSON-RPC message). Bodies must be strict JSON in UTF-8: no NaN or
Infinity (Python's extensions, which could not be echoed back), no lone UTF-16
surrogates, at most MAX_DEPTH levels of nesting; batches are refused. A malformed
*response* is not answered (answering an answer could loop): it is logged and dropped.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from toold_protocol import errors

log = logging.getLogger(__name__)

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays accepted in a message."""

_LONE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


class BadMessage(Exception):
    """A body that is not a message: the error response it gets."""

    def __init__(self, code: int, message: str, msg_id: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.msg_id = code, message, msg_id


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_not_json)


def decode(body: bytes) -> dict[str, Any] | None:
    """The checked message in ``body``; None for a malformed response (dropped)."""
    try:
        text = body.decode("utf-8")
        data = _DECODER.decode(text)
    except UnicodeDecodeError as exc:
        raise BadMessage(errors.PARSE_ERROR, f"Parse error: body is not UTF-8 ({exc})") from None
    except (ValueError, RecursionError) as exc:
        raise BadMessage(errors.PARSE_ERROR, f"Parse error: {exc}") from None
    if _LONE_SURROGATE.search(text) and _has_lone_surrogate(data):
        raise BadMessage(errors.PARSE_ERROR, "Parse error: a string holds a lone UTF-16 surrogate")
    if isinstance(data, list):
        raise BadMessage(errors.INVALID_REQUEST, "Batch messages are not supported")
    problem = _invalid_message(data)
    if problem is None and text.count("{") + text.count("[") > MAX_DEPTH and _too_deep(data):
        problem = f"Message nested deeper than {MAX_DEPTH} levels"
    if problem is None:
        message: dict[str, Any] = data
        return message
    if isinstance(data, dict) and "method" not in data and "id" in data:
        log.warning("dropping invalid message: %s", problem)
        return None
    msg_id = data.get("id") if isinstance(data, dict) else None
    raise BadMessage(errors.INVALID_REQUEST, problem, msg_id if _valid_id(msg_id) else None)


def _has_lone_surrogate(data: Any) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _too_deep(data: Any) -> bool:
    """Whether ``data`` nests containers deeper than MAX_DEPTH (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values() if isinstance(v, (dict, list)))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value if isinstance(v, (dict, list)))
    return False


def _valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _invalid_message(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "A message must be a JSON object"
    if data.get("jsonrpc") != "2.0":
        return 'Missing or wrong "jsonrpc" member: expected "2.0"'
    if "method" in data:
        if not isinstance(data["method"], str):
            return '"method" must be a string'
        if "id" in data and not _valid_id(data["id"]):
            return '"id" must be a string or an integer'
        return None
    if "id" not in data:
        return 'A message needs "method" (request or notification) or "id" (response)'
    return None
