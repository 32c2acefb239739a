"""Pydantic models for every custom message of wire contract v1.

Fields are camelCase on the wire; tool argument names inside ``arguments``
keep the spec's snake_case because models read them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

ToolFormat = Literal["native", "anthropic", "openai"]
Origin = Literal["agent", "user"]
ProgressToken = int | str


class WireModel(BaseModel):
    """Base of every wire message: camelCase aliases, snake_case attributes."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )


class JsonSchemaObject(BaseModel):
    """A JSON Schema of type object, as models receive it."""

    model_config = ConfigDict(extra="allow")

    type: Literal["object"] = "object"
    properties: dict[str, Any] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)


class NativeTool(WireModel):
    """A tool in toold's native format."""

    name: str
    """Canonical tool name."""
    description: str
    """What the tool does, written for a model."""
    parameters: JsonSchemaObject
    """JSON Schema of the tool's arguments."""
    deferred: bool = False
    """True for BareAgent's deferred tools (schema visible at once, runtime bound lazily)."""
    aliases: list[str] = Field(default_factory=list)
    """Other names that resolve to this tool."""
    parallel_safe: bool = True
    """Whether calls may run concurrently with other calls in one turn."""
    effect_tags: list[str] = Field(default_factory=list)
    """Side-effect labels such as ``filesystem:write``."""


class AnthropicTool(BaseModel):
    """A tool in the Anthropic Messages API format."""

    name: str
    description: str
    input_schema: JsonSchemaObject


class OpenAIFunction(BaseModel):
    """The ``function`` member of an OpenAI chat tool."""

    name: str
    description: str
    parameters: JsonSchemaObject


class OpenAITool(BaseModel):
    """A tool in the OpenAI chat-completions format."""

    type: Literal["function"] = "function"
    function: OpenAIFunction


class ToolsListParams(WireModel):
    """Params of ``tools/list``."""

    format: ToolFormat = "native"
    """Schema flavour: ``native`` (default), ``anthropic`` or ``openai``."""


class ToolsListResult(WireModel):
    """Result of ``tools/list``."""

    tools: list[NativeTool | AnthropicTool | OpenAITool]
    """Every tool of the catalogue, in the requested format."""


class ToolsCallParams(WireModel):
    """Params of ``tools/call``."""

    name: str = Field(min_length=1)
    """Tool name or alias."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments, checked against its schema."""
    origin: Origin = "agent"
    """Who decided the call: ``agent`` (a model) or ``user`` (a person)."""
    work_done_token: ProgressToken | None = None
    """When given, the daemon reports ``$/progress`` begin/report/end on this token."""


class ToolsCallResult(WireModel):
    """Result of ``tools/call``."""

    content: Any
    """The tool's return value as JSON: a string, a list or an object."""
    is_error: bool = False
    """True when the call failed: bad arguments, a handler exception, a refusal."""
    exit_code: int | None = None
    """Exit status of the command, for tools that run one (bash, background jobs)."""


class ServerInfo(WireModel):
    """``serverInfo`` in the initialize result."""

    name: Literal["toold"] = "toold"
    version: str


class InitializationOptions(WireModel):
    """``initializationOptions`` accepted by ``initialize`` (all optional)."""

    model_config = ConfigDict(extra="allow")

    workspace: str | None = None
    """Workspace root, overriding workspaceFolders/rootUri/rootPath."""
