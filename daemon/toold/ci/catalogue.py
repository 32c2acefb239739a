"""The daemon's tool catalogue as the command line sees it: names, "did you mean", and
every step's arguments checked against its tool's JSON Schema before a script runs.

A string that is exactly one reference (``"${steps.a.content}"``) may stand for any
type: its value is only known when the step runs (the tool then coerces or refuses
it). A string with a reference inside other text is a string whatever it holds, so
only its type is checked.
"""

from __future__ import annotations

import difflib
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError

from toold.ci.script import _REFERENCE, Script, references, walk


class Catalogue:
    """``tools/list`` (native format) by name and alias."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self._tools: dict[str, dict[str, Any]] = {}
        for entry in tools:
            self._tools[entry["name"]] = entry
        for entry in tools:
            for alias in entry.get("aliases") or ():
                self._tools.setdefault(alias, entry)
        self.names = sorted(t["name"] for t in tools)

    def get(self, name: str) -> dict[str, Any] | None:
        """The tool for a name or alias, or None."""
        return self._tools.get(name)

    def suggestion(self, name: str) -> str:
        """``did you mean 'grep'? `` for the closest tool name, or ""."""
        close = difflib.get_close_matches(name, self.names, n=1)
        return f"did you mean {close[0]!r}? " if close else ""

    def unknown(self, name: str) -> str:
        """Why ``name`` is refused, with the closest tool name when there is one."""
        return f"unknown tool {name!r}; {self.suggestion(name)}see `toold tools`"

    def argument_problems(self, name: str, arguments: dict[str, Any], where: str) -> list[str]:
        """Each way ``arguments`` fail the tool's schema, located under ``where``."""
        entry = self.get(name)
        if entry is None:
            return []
        schema = entry.get("parameters") or {"type": "object"}
        problems = [
            f"{where}{_location(err.absolute_path)}: {_message(err)}"
            for err in Draft202012Validator(schema).iter_errors(arguments)
            if not _deferred(err, arguments)
        ]
        known = schema.get("properties")
        if isinstance(known, dict) and schema.get("additionalProperties") is not True:
            for key in arguments:
                if key not in known:
                    expected = ", ".join(sorted(known)) or "no arguments"
                    close = difflib.get_close_matches(key, sorted(known), n=1)
                    hint = f"did you mean {close[0]!r}? " if close else ""
                    problems.append(
                        f"{where}.{key}: unexpected argument; {hint}{name} takes: {expected}"
                    )
        return sorted(set(problems))


def check_steps(script: Script, catalogue: Catalogue) -> list[str]:
    """Unknown tools and arguments that fail their tool's schema, for every step."""
    problems: list[str] = []
    for path, step in walk(script.steps):
        if catalogue.get(step.tool) is None:
            problems.append(f"{path}.tool: {catalogue.unknown(step.tool)}")
        else:
            problems += catalogue.argument_problems(step.tool, step.arguments, f"{path}.arguments")
    return problems


def _location(path: Any) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


def _message(err: SchemaError) -> str:
    if err.validator == "required":
        return f"{err.message}; add it"
    if err.validator == "additionalProperties":
        return f"{err.message}; remove it"
    return err.message


def _deferred(err: SchemaError, arguments: dict[str, Any]) -> bool:
    """Whether the failing value holds a reference, so only the step's run can judge it."""
    value: Any = arguments
    for part in err.absolute_path:
        value = value[part]
    if not isinstance(value, str) or not any(True for _ in references(value)):
        return False
    # A whole-string reference may become any type; inside other text it stays a string.
    return _REFERENCE.fullmatch(value) is not None or err.validator != "type"
