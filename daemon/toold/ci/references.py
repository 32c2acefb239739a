"""References in a script: ``${steps.<id>.content}`` and ``${steps.<id>.result.<path>}``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal, NamedTuple

REFERENCE_FORM = "${steps.<id>.content} or ${steps.<id>.result}"
_REFERENCE = re.compile(r"\$(\$?)\{steps\.([^{}]*)\}")
_REFERENCE_INNER = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_-]*)\.(content|result)((?:\.[^.]+)*)$")


class UnresolvedReference(LookupError):
    """A reference to a step that has not produced a result (yet)."""


class Reference(NamedTuple):
    """``${steps.<step>.<field>.<path...>}``: a value of an earlier step."""

    text: str
    step: str
    field: Literal["content", "result"]
    path: tuple[str, ...]
    """Keys (and list indexes) into the value: ``${steps.l.result.tasks.0.id}``."""


def _reference(found: re.Match[str]) -> Reference | None:
    inner = _REFERENCE_INNER.match(found.group(2))
    if inner is None:
        return None
    path = tuple(inner.group(3).split(".")[1:])
    field: Literal["content", "result"] = "content" if inner.group(2) == "content" else "result"
    return Reference(found.group(0), inner.group(1), field, path)


def references(text: str) -> Iterator[tuple[str, Reference | None]]:
    """Each ``${steps...}`` in ``text``: its text and what it names (None when malformed)."""
    for found in _REFERENCE.finditer(text):
        if found.group(1):  # $${steps...} is an escaped, literal ${steps...}
            continue
        yield found.group(0), _reference(found)


def substitute(value: Any, lookup: Callable[[Reference], Any]) -> Any:
    """``value`` with every reference in its strings replaced by ``lookup(reference)``.

    Non-string content is inserted as JSON; ``$${steps...}`` leaves a literal ``${steps...}``.
    """
    if isinstance(value, str):

        def replace(found: re.Match[str]) -> str:
            if found.group(1):
                return found.group(0)[1:]
            reference = _reference(found)
            if reference is None:
                raise UnresolvedReference(f"malformed reference {found.group(0)}")
            content = lookup(reference)
            return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)

        return _REFERENCE.sub(replace, value)
    if isinstance(value, dict):
        return {key: substitute(item, lookup) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, lookup) for item in value]
    return value
