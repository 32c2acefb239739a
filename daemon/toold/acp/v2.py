"""ACP v2 (preview) as toold's own pydantic models: the shapes ``toold acp --protocol 2``
sends and reads.

The Python SDK (0.12) speaks v1 only, so the v2 surface is modelled here from the
published v2 schema (``schema/v2/schema.json``, 2.0.0-alpha.3): only what toold uses.
Outgoing models are dumped with ``exclude_unset`` (``dump``): v2 updates are upserts,
where an omitted field leaves the client's value unchanged and ``null`` clears it, so a
field toold did not set must stay off the wire. Incoming models allow unknown fields
(v2 is forward-compatible by convention).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

PROTOCOL_VERSION = 2

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
ToolCallStatus = Literal["pending", "in_progress", "completed", "failed", "cancelled"]


class Wire(BaseModel):
    """A v2 object: camelCase on the wire, ``_meta`` beside the fields."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    meta: dict[str, Any] | None = Field(default=None, alias="_meta")

    def model_post_init(self, context: Any, /) -> None:
        """Discriminators are always sent, though they have defaults (``dump`` leaves out
        what was not set)."""
        self.model_fields_set.update(DISCRIMINATORS & set(type(self).model_fields))


DISCRIMINATORS = {"type", "session_update", "format"}


def dump(model: BaseModel) -> dict[str, Any]:
    """A model as v2 JSON: aliases, and only the fields that were set (omitted =
    unchanged, an explicit None = cleared)."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


# -- initialize -----------------------------------------------------------------------
class Implementation(Wire):
    name: str
    title: str | None = None
    version: str


class Supported(Wire):
    """A v2 support marker: present (``{}``) means supported."""


class PromptCapabilities(Wire):
    image: Supported | None = None
    audio: Supported | None = None
    embedded_context: Supported | None = None


class McpCapabilities(Wire):
    stdio: Supported | None = None
    http: Supported | None = None


class SessionCapabilities(Wire):
    """Present at all: the baseline (new, list, resume, close, prompt, cancel, update)."""

    prompt: PromptCapabilities | None = None
    mcp: McpCapabilities | None = None


class AgentCapabilities(Wire):
    session: SessionCapabilities | None = None


class ClientInfo(Wire):
    """A client's ``info``, read leniently: toold needs only the name."""

    name: str
    title: str | None = None
    version: str | None = None


class InitializeRequest(Wire):
    protocol_version: int
    info: ClientInfo | None = None
    """Required by v2; read leniently (toold needs only the name)."""
    capabilities: dict[str, Any] = Field(default_factory=dict)


class InitializeResponse(Wire):
    protocol_version: int
    info: Implementation
    capabilities: AgentCapabilities
    auth_methods: list[dict[str, Any]]


# -- sessions -------------------------------------------------------------------------
class ConfigSelectOption(Wire):
    value: str
    name: str
    description: str | None = None


class ConfigOption(Wire):
    """A session config option of type ``select`` (toold's permission mode)."""

    config_id: str
    name: str
    description: str | None = None
    category: str | None = None
    type: Literal["select"] = "select"
    current_value: str
    options: list[ConfigSelectOption]


class McpServer(Wire):
    """``stdio`` (name, command, args, env) or ``http`` (name, url, headers)."""

    type: str
    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: list[dict[str, Any]] = Field(default_factory=list)
    url: str | None = None
    headers: list[dict[str, Any]] = Field(default_factory=list)


class NewSessionRequest(Wire):
    cwd: str
    additional_directories: list[str] = Field(default_factory=list)
    mcp_servers: list[McpServer] = Field(default_factory=list)


class NewSessionResponse(Wire):
    session_id: str
    config_options: list[ConfigOption]


class ReplayFrom(Wire):
    type: str


class ResumeSessionRequest(NewSessionRequest):
    session_id: str
    replay_from: ReplayFrom | None = None


class ResumeSessionResponse(Wire):
    config_options: list[ConfigOption]


class ListSessionsRequest(Wire):
    cwd: str | None = None
    cursor: str | None = None


class SessionInfo(Wire):
    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None


class ListSessionsResponse(Wire):
    sessions: list[SessionInfo]


class SessionRequest(Wire):
    """session/close and session/cancel: a session id."""

    session_id: str


class PromptRequest(Wire):
    session_id: str
    prompt: list[dict[str, Any]]


class SetConfigOptionRequest(Wire):
    session_id: str
    config_id: str
    type: str = "id"
    value: Any


class SetConfigOptionResponse(Wire):
    config_options: list[ConfigOption]


class Empty(Wire):
    """An answer with nothing in it (session/prompt's acknowledgement, session/close)."""


# -- content --------------------------------------------------------------------------
class TextContent(Wire):
    type: Literal["text"] = "text"
    text: str


class ContentItem(Wire):
    type: Literal["content"] = "content"
    content: TextContent


class DiffChange(Wire):
    operation: Literal["add", "delete", "modify"]
    path: str
    file_type: Literal["text"] | None = None


class DiffPatch(Wire):
    format: Literal["git_patch"] = "git_patch"
    text: str


class Diff(Wire):
    type: Literal["diff"] = "diff"
    changes: list[DiffChange]
    patch: DiffPatch | None = None


class TerminalRef(Wire):
    """Points at an agent-owned display terminal; its state comes in ``terminal_update``."""

    type: Literal["terminal"] = "terminal"
    terminal_id: str


ToolCallContent = Annotated[ContentItem | Diff | TerminalRef, Field(discriminator="type")]


class Location(Wire):
    path: str
    line: int | None = None


# -- session/update -------------------------------------------------------------------
class MessageChunk(Wire):
    session_update: Literal["user_message_chunk", "agent_message_chunk", "agent_thought_chunk"]
    message_id: str
    content: TextContent


class WholeMessage(Wire):
    session_update: Literal["user_message", "agent_message"]
    message_id: str
    content: list[dict[str, Any]] | None = None


class StateUpdate(Wire):
    session_update: Literal["state_update"] = "state_update"
    state: Literal["running", "idle", "requires_action"]
    stop_reason: StopReason | None = None


class ToolCall(Wire):
    """A tool call's fields, as a patch: only those set are sent."""

    tool_call_id: str
    title: str | None = None
    kind: str | None = None
    status: ToolCallStatus | None = None
    content: list[ToolCallContent] | None = None
    locations: list[Location] | None = None
    raw_input: Any = None
    raw_output: Any = None


class ToolCallUpdate(ToolCall):
    """An upsert: the first one for a ``toolCallId`` creates the call."""

    session_update: Literal["tool_call_update"] = "tool_call_update"


class TerminalOutput(Wire):
    data: str
    """Base64 of the whole output so far: a snapshot that replaces what the client holds."""


class ExitStatus(Wire):
    exit_code: int | None = None
    signal: str | None = None


class TerminalUpdate(Wire):
    session_update: Literal["terminal_update"] = "terminal_update"
    terminal_id: str
    command: str | None = None
    cwd: str | None = None
    output: TerminalOutput | None = None
    exit_status: ExitStatus | None = None


class TerminalOutputChunk(Wire):
    session_update: Literal["terminal_output_chunk"] = "terminal_output_chunk"
    terminal_id: str
    data: str
    """Base64 of bytes to append (each chunk decoded on its own)."""


class PlanEntry(Wire):
    content: str
    priority: str
    status: str


class PlanItems(Wire):
    type: Literal["items"] = "items"
    plan_id: str
    entries: list[PlanEntry]


class PlanUpdate(Wire):
    session_update: Literal["plan_update"] = "plan_update"
    plan: PlanItems


class CommandInput(Wire):
    type: Literal["text"] = "text"
    hint: str


class Command(Wire):
    name: str
    description: str
    input: CommandInput | None = None


class AvailableCommandsUpdate(Wire):
    session_update: Literal["available_commands_update"] = "available_commands_update"
    available_commands: list[Command]


class ConfigOptionUpdate(Wire):
    session_update: Literal["config_option_update"] = "config_option_update"
    config_options: list[ConfigOption]


class UsageUpdate(Wire):
    session_update: Literal["usage_update"] = "usage_update"
    used: int
    size: int


SessionUpdate = Annotated[
    MessageChunk
    | WholeMessage
    | StateUpdate
    | ToolCallUpdate
    | TerminalUpdate
    | TerminalOutputChunk
    | PlanUpdate
    | AvailableCommandsUpdate
    | ConfigOptionUpdate
    | UsageUpdate,
    Field(discriminator="session_update"),
]


class SessionNotification(Wire):
    """session/update's params."""

    session_id: str
    update: SessionUpdate


# -- session/request_permission -------------------------------------------------------
class PermissionOption(Wire):
    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class ToolCallSubject(Wire):
    type: Literal["tool_call"] = "tool_call"
    tool_call: ToolCall


class RequestPermissionRequest(Wire):
    session_id: str
    title: str
    description: str | None = None
    subject: ToolCallSubject | None = None
    options: list[PermissionOption]


class PermissionOutcome(Wire):
    outcome: str
    """``selected`` or ``cancelled``; anything else is never taken as approval."""
    option_id: str | None = None


class RequestPermissionResponse(Wire):
    outcome: PermissionOutcome
