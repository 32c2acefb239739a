"""Method and wait steps: their names and params checked against the wire contract, and
how a ``match`` picks a notification.

A method step's ``params`` are validated by the method's own pydantic model (the code the
daemon runs) before anything runs; a value holding a reference is judged when the step
runs, as for tool arguments. A ``wait_for`` names a notification the daemon sends, and the
top-level keys of its ``match`` must be fields of that notification.

``match`` is a subset match on the notification's params: every key given must be there
with a matching value; objects inside are matched the same way (keys not given are
ignored, at any depth); arrays must have the same length, element by element matched;
other values must be equal as JSON values (``1`` equals ``1.0``; ``true`` never equals ``1``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from toold.ci.references import references
from toold.errors import describe
from toold_protocol import METHODS
from toold_protocol.names import CLIENT_REQUESTS, SERVER_NOTIFICATIONS

if TYPE_CHECKING:
    from toold.ci.script import Step

LSP_NOTIFICATIONS = ("window/showMessage", "window/logMessage", "$/progress")
"""LSP notifications the daemon sends that a script may also wait for."""


def check_methods(steps: Iterable[tuple[str, Step]]) -> list[str]:
    """Unknown methods and notifications, params that fail their model, match keys that
    are no field of the notification; for every ``(location, step)`` given."""
    problems: list[str] = []
    for path, step in steps:
        if step.method is not None:
            problems += method_problems(
                step.method, step.params, f"{path}.method", f"{path}.params"
            )
        elif step.wait_for is not None:
            problems += _wait_problems(step.wait_for, step.match, path)
    return problems


def method_problems(method: str, params: Any, where: str, params_where: str) -> list[str]:
    """Why a request of ``method`` with ``params`` cannot be sent (``where`` locates the
    method, ``params_where`` its params)."""
    if method not in CLIENT_REQUESTS:
        return [f"{where}: {unknown(method, 'method', CLIENT_REQUESTS)}"]
    return model_problems(METHODS[method].params, params, params_where)


def unknown(name: str, what: str, known: Iterable[str]) -> str:
    """``unknown method 'task/list'; did you mean 'tasks/list'? known: ...``."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown {what} {name!r}; {hint}one of: {', '.join(names)}"


def model_problems(
    model: type[BaseModel], value: Any, where: str, unexpected: str = "unknown field"
) -> list[str]:
    """Each way ``value`` fails ``model`` (wire names in messages), located under ``where``;
    a value holding a reference is left for the step's run (it may coerce, "5" for 5)."""
    if not isinstance(value, dict):
        return [f"{where}: must be an object (a table in TOML) (got {value!r:.80})"]
    try:
        model.model_validate(value)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            loc = list(err["loc"])
            if holds_reference(value, loc):
                continue
            fix = None
            if err["type"] == "extra_forbidden":
                fields = wire_fields(model)
                close = difflib.get_close_matches(str(loc[-1]), fields, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                fix = f"{unexpected}; {hint}expected one of: {', '.join(fields)}"
            problems.append(f"{where}{location_suffix(loc)}: {describe(err, unexpected=fix)}")
        return problems
    return []


def wire_fields(model: type[BaseModel]) -> list[str]:
    """The model's field names as they are on the wire (camelCase)."""
    return [info.alias or name for name, info in model.model_fields.items()]


def _wait_problems(name: str, match: dict[str, Any], path: str) -> list[str]:
    notifications = (*SERVER_NOTIFICATIONS, *LSP_NOTIFICATIONS)
    if name not in notifications:
        return [f"{path}.wait_for: {unknown(name, 'notification', notifications)}"]
    if name not in METHODS:
        return []
    fields = wire_fields(METHODS[name].params)
    problems = []
    for key in match:
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(
                f"{path}.match.{key}: {name} has no such field; {hint}fields: {', '.join(fields)}"
            )
    return problems


def matches(params: Any, wanted: Any) -> bool:
    """Whether ``params`` holds ``wanted`` (the subset match of the module docstring)."""
    if isinstance(wanted, dict):
        return isinstance(params, dict) and all(
            key in params and matches(params[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(params, list)
            and len(params) == len(wanted)
            and all(matches(got, value) for got, value in zip(params, wanted, strict=True))
        )
    if isinstance(wanted, bool) or isinstance(params, bool):
        return type(wanted) is type(params) and wanted == params
    return bool(params == wanted)


def location_suffix(path: Any) -> str:
    """``['a', 0, 'b']`` → ``.a[0].b``."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


def holds_reference(value: Any, path: list[Any]) -> bool:
    """Whether the value at ``path`` is a string holding a reference (judged at run time)."""
    for part in path:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(value, str) and any(True for _ in references(value))
