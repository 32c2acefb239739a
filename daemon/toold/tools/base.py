"""The Tool base class: both documents' contract in one place."""

from __future__ import annotations

import asyncio
import copy
import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from toold.checkpoints import unified_diff
from toold.errors import field_problems
from toold.tools.annotations import READS, ToolAnnotations

if TYPE_CHECKING:
    from toold.tools.runtime import ToolRuntime


@dataclass(frozen=True)
class FileEdit:
    """One file a call would change: its bytes before and after (None: no file)."""

    path: str
    """Workspace-relative."""
    before: bytes | None
    after: bytes | None

    def diff(self) -> str:
        """The git-style unified diff (``a/``/``b/`` labels, as checkpoints/diff)."""
        return unified_diff(self.path, self.before, self.after)


def diff_of(edits: Sequence[FileEdit]) -> str:
    """The unified diff of every file, in order."""
    return "".join(edit.diff() for edit in edits)


NO_CHANGES = "No changes."
"""A dry run's answer when the call would change nothing."""


class ToolArgumentError(ValueError):
    """Arguments that fail the tool's schema; the message names each bad field."""


class ToolArguments(BaseModel):
    """The base of every tool's arguments model: the one declaration of its arguments.

    A name the model does not declare is an error (a model's typo is never dropped
    silently), and a tool cannot change the arguments it was called with: what the
    guard judged is what runs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


def _clean_schema(node: Any) -> Any:
    """Strip pydantic's titles and collapse Optional[X] to X, for readable model schemas."""
    if isinstance(node, list):
        return [_clean_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            # Keys here are argument or model names, never schema keywords.
            out[key] = {name: _clean_schema(sub) for name, sub in value.items()}
        else:
            out[key] = _clean_schema(value)
    any_of = out.get("anyOf")
    if isinstance(any_of, list):
        non_null = [s for s in any_of if s != {"type": "null"}]
        if len(non_null) == 1 and len(non_null) < len(any_of):
            out.pop("anyOf")
            out = {**non_null[0], **out}
    return out


def schema_from_model(model: type[BaseModel]) -> dict[str, Any]:
    """An object JSON Schema ``{type, properties, required}`` from an arguments model."""
    raw = _clean_schema(model.model_json_schema())
    schema: dict[str, Any] = {
        "type": "object",
        "properties": raw.get("properties", {}),
        "required": raw.get("required", []),
    }
    if "$defs" in raw:
        schema["$defs"] = raw["$defs"]
    return schema


def format_validation_error(tool_name: str, exc: ValidationError) -> str:
    """One line per bad field, each saying what was wrong, for a model to correct itself."""
    problems = field_problems(exc, "arguments", unexpected="unexpected argument; remove it")
    return f"invalid arguments for {tool_name}: " + "; ".join(problems)


class _SchemaFromArguments:
    """``input_schema`` of a class with ``Arguments``, built once on first access.

    JSON Schemas of every tool cost tens of milliseconds at start-up, before the
    first call could be answered; the descriptor replaces itself with the schema.
    """

    def __get__(self, obj: object, owner: type[Tool]) -> dict[str, Any]:
        # The class that declared the model (a subclass without its own inherits it).
        declaring = next(k for k in owner.__mro__ if k.__dict__.get("input_schema") is self)
        schema = schema_from_model(declaring.__dict__["Arguments"])
        setattr(declaring, "input_schema", schema)  # noqa: B010
        return schema


class Tool(ABC):
    """A tool: a schema models read and a ``run`` that does the work.

    Subclasses either set ``Arguments`` (a ToolArguments model, the one declaration of
    the arguments): ``input_schema`` comes from it and ``run(self, args)`` receives the
    parsed model; or set ``input_schema`` by hand (Jianmu's style): ``run`` receives an
    object's fields as keyword arguments, anything else as one positional argument. A
    non-object input schema is exposed to models wrapped as one required property ``input``.
    """

    name: ClassVar[str] = "unnamed_tool"
    description: ClassVar[str] = "No description provided"
    input_schema: ClassVar[dict[str, Any]] = {"type": "string", "description": "Tool input string"}
    output_schema: ClassVar[dict[str, Any]] = {
        "type": "string",
        "description": "Tool output string",
    }
    parallel_safe: ClassVar[bool] = True
    effect_tags: ClassVar[tuple[str, ...]] = ()
    annotations: ClassVar[ToolAnnotations] = ToolAnnotations()
    """Behaviour and risk (MCP's hints) and how the guard treats the tool; the defaults
    (a tool that says nothing) may change things, and the guard asks about them."""
    deferred: ClassVar[bool] = False
    """One of BareAgent's deferred tools (schema listed at once, runtime bound late)."""
    sandboxable: ClassVar[bool] = True
    """False for tools that need the daemon's own state; they ignore the runner."""
    Arguments: ClassVar[type[BaseModel] | None] = None
    """The arguments model (a ToolArguments); None with a hand-written ``input_schema``."""
    previews: ClassVar[bool] = False
    """It takes ``dry_run`` (true: answer the unified diff, change nothing) and ``preview``
    says what a call would change; a dry run is judged as a read-only call."""

    def __init__(self, runtime: ToolRuntime | None = None) -> None:
        self.runtime = runtime

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("Arguments") is not None:
            # Built on first use: a call needs only the model, tools/list the schema.
            setattr(cls, "input_schema", _SchemaFromArguments())  # noqa: B010

    @abstractmethod
    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Do the work (given the parsed ``Arguments``, if declared); sync ones run on a thread."""

    def parameters(self) -> dict[str, Any]:
        """The input schema as an object schema (a deep copy, safe to mutate)."""
        schema = copy.deepcopy(self.input_schema)
        if schema.get("type") == "object":
            schema.setdefault("properties", {})
            schema.setdefault("required", [])
            return schema
        return {"type": "object", "properties": {"input": schema}, "required": ["input"]}

    def validate_args(self, args: Any) -> Any:
        """Check ``args`` against the schema; returns what ``call`` receives.

        With an ``Arguments`` model: a dict of every field's parsed value (aliases
        folded, defaults filled): what the guard judges, JSON-able for a sandbox.
        """
        if self.Arguments is None:
            if self.input_schema.get("type") != "object" and isinstance(args, Mapping):
                # Exposed to models as one property, ``input`` (see ``parameters``).
                extra = sorted(str(key) for key in args if key != "input")
                if extra:
                    kind = self.input_schema.get("type", "value")
                    raise ToolArgumentError(
                        f"invalid arguments for {self.name}: {', '.join(extra)}: unexpected "
                        f'argument; give the {kind} as input, e.g. {{"input": ...}}'
                    )
                return args.get("input", args)
            return args
        parsed = self.parse_args(args)
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    def parse_args(self, args: Any) -> BaseModel:
        """``args`` parsed by the ``Arguments`` model; ToolArgumentError names each bad field."""
        model = self.Arguments
        if model is None:
            raise TypeError(f"{self.name} declares no Arguments model")
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise ToolArgumentError(
                f"invalid arguments for {self.name}: expected an object, got {type(args).__name__}"
            )
        try:
            return model.model_validate(dict(args))
        except ValidationError as exc:
            raise ToolArgumentError(format_validation_error(self.name, exc)) from None

    async def call(self, call_args: Any) -> Any:
        """Run with arguments ``validate_args`` returned, in this process.

        Called by the one dispatch (toold.dispatch, below ``ToolGateway.call``), by a
        sandbox in its own process, and by the seeds' faces (toold.compat). A declared
        ``Arguments`` model parses them again (a sandbox sends them as JSON; parsing a
        validated dict costs microseconds) and ``run`` gets the model. Sync ``run`` goes
        to a worker thread unless ``runs_inline`` says otherwise.
        """
        if self.is_dry_run(call_args):
            # Answered here, before ``run``: a dry run never reaches code that writes, even
            # in a subclass whose ``run`` knows nothing of dry runs.
            if self.runs_inline(call_args):
                return self.dry_run(call_args)
            return await asyncio.to_thread(self.dry_run, call_args)
        if self.Arguments is not None:
            call_args = self.parse_args(call_args)
            call = partial(self.run, call_args)
        elif isinstance(call_args, Mapping):
            call = partial(self.run, **call_args)
        else:
            call = partial(self.run, call_args)
        if inspect.iscoroutinefunction(self.run):
            return await call()
        if self.runs_inline(call_args):
            return call()
        return await asyncio.to_thread(call)

    def is_dry_run(self, args: Any) -> bool:
        """Whether validated ``args`` ask a previewing tool for a dry run (exactly ``True``)."""
        return self.previews and isinstance(args, Mapping) and args.get("dry_run") is True

    def call_annotations(self, args: Any) -> ToolAnnotations:
        """The annotations this call is judged by: a dry run only reads."""
        return READS if self.is_dry_run(args) else self.annotations

    def named_paths(self, args: Any) -> list[str]:
        """The workspace files the validated ``args`` name for writing: the ``file_path`` or
        ``path`` argument of a tool that writes one (``annotations.writes_path``)."""
        if not self.annotations.writes_path or not isinstance(args, Mapping):
            return []
        path = args.get("file_path", args.get("path"))
        return [path] if isinstance(path, str) and path else []

    def written_paths(self, args: Any) -> list[str]:
        """The files this call writes, as its arguments name them: none for a dry run, and
        none the gateway can name for a tool like bash (its effects are not recorded)."""
        return [] if self.is_dry_run(args) else self.named_paths(args)

    def read_paths(self, args: Any) -> list[str]:
        """The files whose content this call shows the agent whole (read_file's file)."""
        return []

    def preview(self, args: Any) -> list[FileEdit] | None:
        """What the call would change, from the disk now (None: this tool cannot tell)."""
        return None

    def dry_run(self, args: Any) -> str:
        """A dry run's answer: the unified diff of ``preview``, or NO_CHANGES."""
        edits = self.preview(args)
        if edits is None:
            raise TypeError(f"{self.name} says it previews but gives no preview")
        return diff_of([e for e in edits if e.before != e.after]) or NO_CHANGES

    def runs_inline(self, args: Any) -> bool:
        """Whether a sync ``run(args)`` may run on the event loop, not a worker thread.

        Only for work bounded to well under a millisecond: the thread hop costs more
        than that (0.1-0.2 ms per call on a small VM). Everything else runs on a thread,
        so a slow call never holds up the connection.
        """
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
