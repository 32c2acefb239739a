"""The daemon's tool catalogue as the command line sees it: names, "did you mean", and
every step's arguments checked before a script runs.

Arguments are checked by the tool's own argument model when it has one (the code the
daemon runs, which also takes Jianmu's names such as ``path`` for ``file_path``), else
against the JSON Schema ``tools/list`` gives. A value holding a reference
(``"${steps.a.content}"``) is left for the step's run: it is known only after
substitution, and the tool may coerce it (``"5"`` for an integer).
"""

from __future__ import annotations

import difflib
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError

from toold.ci.methods import holds_reference, location_suffix, model_problems
from toold.ci.script import Script, walk
from toold.tools.registry import BuiltinToolProvider


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
        """Each way ``arguments`` fail the tool's own argument model (what the daemon
        runs; it also knows Jianmu's alternative names), else its JSON Schema; located
        under ``where``. A value holding a reference is left for the step's run."""
        entry = self.get(name)
        if entry is None:
            return []
        tool_class = BuiltinToolProvider.get_tool_class(entry["name"])
        model = getattr(tool_class, "Arguments", None)
        if model is not None:
            return model_problems(model, arguments, where, "unexpected argument")
        schema = entry.get("parameters") or {"type": "object"}
        return sorted(
            f"{where}{location_suffix(err.absolute_path)}: {_schema_message(err)}"
            for err in Draft202012Validator(schema).iter_errors(arguments)
            if not holds_reference(arguments, list(err.absolute_path))
        )


def check_steps(script: Script, catalogue: Catalogue) -> list[str]:
    """Unknown tools and arguments that fail their tool's schema, for every step."""
    problems: list[str] = []
    for path, step in walk(script.steps):
        if step.tool is None:
            continue  # a method or wait step: see toold.ci.methods
        if catalogue.get(step.tool) is None:
            problems.append(f"{path}.tool: {catalogue.unknown(step.tool)}")
        else:
            problems += catalogue.argument_problems(step.tool, step.arguments, f"{path}.arguments")
    return problems


def _schema_message(err: SchemaError) -> str:
    if err.validator == "required":
        return f"{err.message}; add it"
    return err.message
