"""CI scripts: the models, loading from JSON or TOML, and ``${steps.<id>.content}`` references.

A step calls a tool (``tool``), sends any request of the wire contract (``method``), or
waits for a notification (``wait_for``). Everything here is checked before anything
runs; a problem names where it is (``steps[1].fallback[0].tool``) and how to fix it.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toold.ci.methods import check_methods
from toold.ci.references import REFERENCE_FORM, references
from toold.errors import describe

ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]*$"
KINDS = ("tool", "method", "wait_for")
"""The keys that say what a step does; a step has exactly one."""
_KIND_KEYS = {"tool": ("arguments",), "method": ("params",), "wait_for": ("match", "timeout")}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_attribute_docstrings=True)


class Expect(_Strict):
    """What a step's result must look like; every given check must hold."""

    is_error: bool | None = Field(None, alias="isError")
    """Whether the call must fail (isError, or a non-zero exitCode); by default it must not."""
    contains: str | None = None
    """Text the content must contain (a non-string content is compared as JSON)."""
    equals: Any = None
    """The exact content (any JSON value); checked only when given."""

    @property
    def checks_equals(self) -> bool:
        """Whether ``equals`` was given (``null`` is a value to compare with)."""
        return "equals" in self.model_fields_set


class Step(_Strict):
    """One step: a tool call, a request of the wire contract, or a wait for a notification."""

    id: str | None = Field(None, pattern=ID_PATTERN)
    """Name for reports and for ${steps.<id>.content} / ${steps.<id>.result} in later steps."""
    tool: str | None = Field(None, min_length=1)
    """Tool name or alias, as `toold tools` lists them."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments; strings may contain references."""
    method: str | None = Field(None, min_length=1)
    """A request of the wire contract, e.g. ``tasks/list`` (its result is the step's value)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """The method's params; strings may contain references."""
    wait_for: str | None = Field(None, min_length=1)
    """A notification to wait for, e.g. ``jobs/finished`` (its params are the step's value)."""
    match: dict[str, Any] = Field(default_factory=dict)
    """What the notification's params must hold (a subset match); strings may hold references."""
    timeout: float = Field(60.0, gt=0)
    """Seconds a ``wait_for`` step waits before it fails."""
    expect: Expect | None = None
    """Checks on the result; without them the call must simply succeed."""
    continue_on_error: bool = False
    """Run the next steps even when this one fails (the run still fails)."""
    fallback: list[Step] = Field(default_factory=list)
    """Steps run in sequence when this step fails; if they all pass the step is rescued."""

    @property
    def kind(self) -> Literal["tool", "method", "wait_for"]:
        """What the step does."""
        if self.method is not None:
            return "method"
        if self.wait_for is not None:
            return "wait_for"
        return "tool"

    @property
    def action(self) -> str:
        """The tool, the method, or ``wait_for <notification>``: for reports."""
        if self.method is not None:
            return self.method
        if self.wait_for is not None:
            return f"wait_for {self.wait_for}"
        return self.tool or ""


class Script(_Strict):
    """A CI script: steps run in sequence through one daemon."""

    steps: list[Step] = Field(min_length=1)


class ScriptError(ValueError):
    """The script cannot run; ``problems`` says where and how to fix each."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"invalid script {source}:\n{lines}")


def load_script(source: str) -> Script:
    """Read and check a script: a .json or .toml path, or ``-`` for JSON on stdin."""
    data = _parse(source)
    found = _kind_problems(data)
    try:
        script = Script.model_validate(data)
    except ValidationError as exc:
        found += [(1, tuple(err["loc"]), _describe(err)) for err in exc.errors(include_url=False)]
    if found:
        # In script order: a step's own problems (what it does first), then its fallback's.
        found.sort(key=lambda item: (_step_of(item[1]), item[0]))
        raise ScriptError(source, [problem for _, _, problem in found])
    problems = check_script(script) + check_methods(walk(script.steps))
    if problems:
        raise ScriptError(source, sorted(problems, key=_step_order))
    return script


_STEP_PATH = re.compile(r"steps((?:\[\d+\](?:\.fallback)?)*)")


def _step_order(problem: str) -> list[int]:
    """``steps[1].fallback[0].tool: ...`` → ``[1, 0]``: problems sort in script order."""
    found = _STEP_PATH.match(problem)
    return [int(i) for i in re.findall(r"\d+", found.group(1))] if found else []


def _step_of(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """``('steps', 1, 'fallback', 0, 'tool')`` → ``('steps', 1, 'fallback', 0)``."""
    end = 0
    while (
        end + 1 < len(loc) and loc[end] in ("steps", "fallback") and isinstance(loc[end + 1], int)
    ):
        end += 2
    return loc[:end]


def _kind_problems(data: Any) -> list[tuple[int, tuple[Any, ...], str]]:
    """Steps that do not say what they do once: none or several of tool, method, wait_for,
    or keys of another kind of step (``params`` on a tool step)."""
    found: list[tuple[int, tuple[Any, ...], str]] = []

    def visit(steps: Any, prefix: tuple[Any, ...]) -> None:
        if not isinstance(steps, list):
            return
        for i, step in enumerate(steps):
            if not isinstance(step, dict):
                continue
            loc = (*prefix, i)
            where = location(loc)
            kinds = [kind for kind in KINDS if kind in step]
            if not kinds:
                found.append((0, loc, f"{where}: {_NO_KIND}"))
            elif len(kinds) > 1:
                found.append((0, loc, f"{where}: give one of {', '.join(kinds)}, not both"))
            for kind, keys in _KIND_KEYS.items():
                for key in keys:
                    if key in step and len(kinds) == 1 and kind not in step:
                        own = " and ".join(_KIND_KEYS[kinds[0]])
                        found.append(
                            (
                                0,
                                loc,
                                f"{where}.{key}: only a {kind} step takes {key}; "
                                f"a {kinds[0]} step takes {own}",
                            )
                        )
            visit(step.get("fallback"), (*loc, "fallback"))

    if isinstance(data, dict):
        visit(data.get("steps"), ("steps",))
    return found


_NO_KIND = (
    'a step needs one of tool, method or wait_for: e.g. "tool": "read_file" (see `toold '
    'tools`), "method": "tasks/list" or "wait_for": "jobs/finished"'
)


def _parse(source: str) -> Any:
    if source == "-":
        return _parse_json(source, sys.stdin.read())
    path = Path(source)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise ScriptError(source, ["unknown script format: name it *.json or *.toml"])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScriptError(source, [f"cannot read it: {exc}"]) from None
    if suffix == ".json":
        return _parse_json(source, text)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScriptError(source, [f"not valid TOML: {exc}"]) from None


def _parse_json(source: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScriptError(source, [f"not valid JSON: {exc}"]) from None


# -- validation messages --------------------------------------------------------------------

_KEYS = {
    "script": ["steps"],
    "step": [
        "id",
        "tool",
        "arguments",
        "method",
        "params",
        "wait_for",
        "match",
        "timeout",
        "expect",
        "continue_on_error",
        "fallback",
    ],
    "expect": ["isError", "contains", "equals"],
}
_EXAMPLES = {
    "steps": 'e.g. "steps": [{"tool": "grep", "arguments": {"pattern": "TODO"}}]',
    "tool": 'the tool to call, e.g. "tool": "read_file" (see `toold tools`)',
}


def location(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """``('steps', 1, 'tool')`` → ``steps[1].tool``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "script"


def _describe(err: Any) -> str:
    loc = tuple(err["loc"])
    where, kind = location(loc), err["type"]
    field = loc[-1] if loc else ""
    if kind == "missing":
        return f"{where}: required; add it, {_EXAMPLES.get(str(field), 'see the script format')}"
    if kind == "extra_forbidden":
        section = "script" if len(loc) == 1 else "expect" if loc[-2:-1] == ("expect",) else "step"
        allowed = _KEYS[section]
        close = difflib.get_close_matches(str(field), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"{where}: unknown key; {hint}expected one of: {', '.join(allowed)}"
    if kind == "string_pattern_mismatch":
        return f"{where}: {err['input']!r} is not a valid id; use letters, digits, _ and -"
    if kind in ("dict_type", "model_type"):
        return f"{where}: must be an object (a table in TOML) (got {err['input']!r:.80})"
    if kind == "too_short" and field == "steps":
        return f"{where}: a script needs at least one step; {_EXAMPLES['steps']}"
    return f"{where}: {describe(err)}"


def walk(steps: list[Step], prefix: str = "steps") -> Iterator[tuple[str, Step]]:
    """Every step with its location, in run order (a step, then its fallback)."""
    for i, step in enumerate(steps):
        path = f"{prefix}[{i}]"
        yield path, step
        yield from walk(step.fallback, f"{path}.fallback")


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")


def step_strings(step: Step, path: str) -> Iterator[tuple[str, str]]:
    """Every string a step's references may appear in, with its location."""
    yield from _strings(step.arguments, f"{path}.arguments")
    yield from _strings(step.params, f"{path}.params")
    yield from _strings(step.match, f"{path}.match")
    if step.expect is not None:
        if step.expect.contains is not None:
            yield f"{path}.expect.contains", step.expect.contains
        if step.expect.checks_equals:
            yield from _strings(step.expect.equals, f"{path}.expect.equals")


def check_script(script: Script) -> list[str]:
    """Duplicate ids and references that no earlier step can satisfy."""
    defined: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for path, step in walk(script.steps):
        if step.id is not None:
            defined.setdefault(step.id, path)
            kinds.setdefault(step.id, step.kind)
    problems: list[str] = []
    earlier: list[str] = []
    for path, step in walk(script.steps):
        for where, text in step_strings(step, path):
            for ref, named in references(text):
                ref_id = named.step if named is not None else None
                if named is None or ref_id is None:
                    problems.append(f"{where}: malformed reference {ref}; write {REFERENCE_FORM}")
                elif named.field == "content" and kinds.get(ref_id, "tool") != "tool":
                    problems.append(
                        f"{where}: {ref}: step {ref_id!r} is a {kinds[ref_id]} step, "
                        f"its value is ${{steps.{ref_id}.result}}"
                    )
                elif ref_id not in earlier:
                    why = (
                        f"step {ref_id!r} ({defined[ref_id]}) does not run before it"
                        if ref_id in defined
                        else f"no step has the id {ref_id!r}"
                    )
                    known = f" (ids usable here: {', '.join(earlier)})" if earlier else ""
                    problems.append(f"{where}: unknown reference {ref}: {why}{known}")
        if step.id is None:
            continue
        if defined[step.id] != path:
            problems.append(
                f"{path}.id: {step.id!r} is already the id of {defined[step.id]}; "
                "ids must be unique"
            )
        elif step.id not in earlier:
            earlier.append(step.id)
    return problems
