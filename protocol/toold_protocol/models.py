"""Pydantic models for every custom message of wire contract v1.

Fields are camelCase on the wire; tool argument names inside ``arguments``
keep the spec's snake_case because models read them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)
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


class ToolAnnotations(WireModel):
    """What a tool does (MCP's ToolAnnotations hints) and how toold's guard treats it."""

    read_only_hint: bool = False
    """It changes nothing in its environment."""
    destructive_hint: bool = True
    """It may delete or overwrite (when not read-only)."""
    idempotent_hint: bool = False
    """Repeating a call with the same arguments changes nothing more."""
    open_world_hint: bool = True
    """It reaches beyond the workspace (the network, other processes)."""
    confirm: Literal["never", "ask", "always"] = "ask"
    """When an agent's call asks the user: never (plan mode included), as the permission
    mode and rules say, or always (even with an allow rule; bypass mode runs it)."""
    writes_path: bool = False
    """Its ``file_path``/``path`` argument names a file it writes."""
    runs_code: bool = False
    """Its arguments are code it runs."""


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
    annotations: ToolAnnotations = Field(default_factory=ToolAnnotations)
    """Behaviour and risk: MCP's hints (``readOnlyHint`` ...) and the guard's treatment."""


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
    decision: Literal["allowed", "denied_by_rule", "denied_by_user", "refused"] | None = None
    """How the call was decided, when not simply run: ``allowed`` (the user allowed it, now
    or by an earlier "Always allow"), ``denied_by_rule`` (a forbid or deny rule, plan mode,
    a hook, or nobody to ask), ``denied_by_user`` (the user said no, or did not answer),
    ``refused`` (invalid arguments, a stale file, an invalid configuration, a command not
    checked in time). Absent when the rules let it run without asking."""
    rule: str | None = None
    """The text of the rule behind ``decision`` (a forbid or deny rule, or the "Always
    allow" that let it run), when one was; absent with ``decision``."""
    job_id: str | None = None
    """The background job the call started (background_run): for jobs/get, jobs/cancel."""
    diagnostics: DiagnosticsDelta | None = None
    """For a file-changing call, the language servers' diagnostics it introduced or fixed
    (``[diagnostics]`` in toold.toml); absent when no server checks its files."""


class ServerInfo(WireModel):
    """``serverInfo`` in the initialize result."""

    name: Literal["toold"] = "toold"
    version: str


class InitializationOptions(WireModel):
    """``initializationOptions`` accepted by ``initialize`` (all optional)."""

    model_config = ConfigDict(extra="allow")

    workspace: str | None = None
    """Workspace root, overriding workspaceFolders/rootUri/rootPath."""
    config: dict[str, Any] | None = None
    """Configuration keys, as in toold.toml, overriding the file."""
    execution_events: bool = False
    """Send ``execution/event`` notifications for every tool run."""


# --- state: todos, tasks, skills ---------------------------------------------

TodoStatus = Literal["pending", "in_progress", "done"]
TaskStatus = Literal["pending", "in_progress", "done", "failed"]


class TodoItem(WireModel):
    """One item of the session's TODO list."""

    id: str
    """``t1``, ``t2``, ..."""
    task: str
    status: TodoStatus
    priority: str = "normal"


class Task(WireModel):
    """A persistent task from ``.tasks.json``."""

    id: str
    """Eight random alphanumerics."""
    title: str
    description: str = ""
    status: TaskStatus
    depends_on: list[str] = Field(default_factory=list)
    created_at: str
    """UTC ISO-8601."""
    updated_at: str
    ready: bool = False
    """Pending, with every dependency done."""


class Skill(WireModel):
    """A skill folder holding SKILL.md."""

    name: str
    description: str
    """First non-heading line of SKILL.md."""
    path: str
    """Absolute path of SKILL.md."""


class EmptyParams(WireModel):
    """Params of a method that takes none."""


class TodosListResult(WireModel):
    """Result of ``todos/list``."""

    todos: list[TodoItem]


class TodosChanged(WireModel):
    """``todos/changed``: the whole list after a change."""

    todos: list[TodoItem]


class TasksListParams(WireModel):
    """Params of ``tasks/list``."""

    status: TaskStatus | None = None
    """Only tasks with this status."""


class TasksListResult(WireModel):
    """Result of ``tasks/list``."""

    tasks: list[Task]


class TasksChanged(WireModel):
    """``tasks/changed``: every task after a change, made by toold or by anyone else."""

    tasks: list[Task]


class SkillsListResult(WireModel):
    """Result of ``skills/list``."""

    skills: list[Skill]


class SkillsChanged(WireModel):
    """``skills/changed``: the skills after a skill folder changed."""

    skills: list[Skill]


# --- background jobs --------------------------------------------------------

JobStatus = Literal["running", "done", "failed", "cancelled", "timed_out"]


class JobInfo(WireModel):
    """A background job's record."""

    job_id: str
    command: str
    status: JobStatus
    exit_code: int | None = None
    started_at: str
    finished_at: str | None = None
    result: str | None = None
    """Output of a job that succeeded."""
    error: str | None = None
    """What went wrong, for any other final status."""


class JobsListResult(WireModel):
    """Result of ``jobs/list``."""

    jobs: list[JobInfo]


class JobIdParams(WireModel):
    """Params naming one job."""

    job_id: str = Field(min_length=1)


class JobDetail(JobInfo):
    """Result of ``jobs/get``: the record plus output so far."""

    output: str = ""
    """Output so far (head and tail kept when long)."""


class JobFinished(WireModel):
    """``jobs/finished``: pushed when a background job ends."""

    job_id: str
    status: Literal["done", "failed", "cancelled", "timed_out"]
    command: str
    result: str | None = None
    error: str | None = None
    exit_code: int | None = None
    started_at: str
    finished_at: str


# --- execution events --------------------------------------------------------


class ExecutionEvent(WireModel):
    """``execution/event``: a tool run's lifecycle.

    Sent only to clients whose initializationOptions set ``executionEvents``.
    """

    event: Literal["execution.started", "execution.completed", "execution.failed"]
    tool: str
    runner: str
    """local, subprocess, bwrap or docker."""
    call_id: str
    duration_ms: float | None = None
    error: str | None = None


# --- permissions and agents ---------------------------------------------------

PermissionMode = Literal["default", "auto", "plan", "bypass"]


class SetModeParams(WireModel):
    """Params of ``permissions/setMode``."""

    mode: PermissionMode


class SetModeResult(WireModel):
    """Result of ``permissions/setMode``: the mode now in force."""

    mode: PermissionMode


class PreviewFile(WireModel):
    """One file a call would change, whole, for a diff editor."""

    path: str
    """Workspace-relative, ``/`` separated."""
    original: str | None
    """Its text now; null when the file does not exist yet."""
    modified: str | None
    """Its text after the call; null when the call deletes it."""

    @model_serializer(mode="wrap")
    def _nulls_kept(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # null is meaningful here (no file on that side): kept when None is dropped.
        data: dict[str, Any] = handler(self)
        data.setdefault("original", self.original)
        data.setdefault("modified", self.modified)
        return data


class PermissionsPreview(WireModel):
    """``permissions/preview``: what the call the next permission prompt asks about would
    change. Sent just before that ``window/showMessageRequest``, only to clients that set
    ``initialize.capabilities.experimental.toold.diffPreview``; others get the diff
    (capped) in the prompt's message."""

    tool: str
    reason: str
    """Why the guard asks (as in the prompt)."""
    diff: str
    """Unified diff (``a/``/``b/`` labels, ``/dev/null`` for a missing side)."""
    files: list[PreviewFile]
    """The changed text files up to 1 MiB each (larger or binary ones: only in ``diff``)."""


class AgentRunParams(WireModel):
    """Params of ``agent/run``."""

    prompt: str = Field(min_length=1)
    """The task for the agent."""
    agent_type: str | None = None
    """general-purpose (default), explore, plan or code-review."""
    work_done_token: ProgressToken | None = None
    """When given, each tool call is reported as ``$/progress``."""


class TokenUsage(WireModel):
    """Tokens a run used, as the Messages API reports them, summed over its responses."""

    input_tokens: int = 0
    """Input tokens read without the prompt cache."""
    output_tokens: int = 0
    """Output tokens."""
    cache_read_tokens: int = 0
    """Input tokens read from the prompt cache."""
    cache_write_tokens: int = 0
    """Input tokens written to the prompt cache."""
    total_tokens: int = 0
    """The four above, added."""


class AgentRunResult(WireModel):
    """Result of ``agent/run``."""

    text: str
    """The agent's final answer."""
    usage: TokenUsage | None = None
    """The run's tokens, its subagents' included."""


# --- team -------------------------------------------------------------------------


class TeamRegisterParams(WireModel):
    """Params of ``team/register``."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    """Teammate name: letters, digits, _ and -."""
    role: str = Field(min_length=1)
    system_prompt: str = ""
    model: str | None = None


class Teammate(WireModel):
    """A registered teammate."""

    name: str
    role: str
    system_prompt: str = ""
    provider_config: dict[str, Any] = Field(default_factory=dict)
    running: bool = False


class TeamMessage(WireModel):
    """One mailbox message."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        use_attribute_docstrings=True,
    )

    id: str
    from_: str = Field(alias="from")
    to: str
    content: str
    type: str
    """request, response, broadcast, shutdown, ..."""
    timestamp: str
    in_reply_to: str | None = None


class TeamMessageNotification(WireModel):
    """``team/message``: a message addressed to the user's agent (``main``)."""

    message: TeamMessage


class CheckpointInfo(WireModel):
    """One recorded tool call that changed files (``checkpoints/list``)."""

    id: str
    tool: str
    """The tool that made the change, or ``restore`` for a restore's own checkpoint."""
    origin: Origin
    time: str
    paths: list[str]
    """Workspace-relative files it changed."""
    undone: bool = False
    """A later restore went back before it."""
    restores: str | None = None
    """For a restore's own checkpoint: the checkpoint it went back before."""
    uncovered: str | None = None
    """For a shell call's checkpoint (bash, background_run, python_repl): what its undo does
    not cover (ignored paths, files over limits.max_file_size, the tree past
    checkpoints.max_entries); absent when it covers everything."""


class CheckpointsListResult(WireModel):
    """Result of ``checkpoints/list``: oldest first."""

    checkpoints: list[CheckpointInfo]


class CheckpointIdParams(WireModel):
    """Params naming one checkpoint."""

    id: str = Field(min_length=1)


class CheckpointsDiffResult(WireModel):
    """Result of ``checkpoints/diff``: from before that call (and every later one) to now."""

    diff: str
    """A unified diff (``a/`` and ``b/`` paths, ``/dev/null`` for a file that did not exist)."""


class CheckpointsRestoreParams(WireModel):
    """Params of ``checkpoints/restore``."""

    id: str | None = Field(None, min_length=1)
    """The checkpoint to go back before; the newest one an undo reaches when omitted."""
    force: bool = False
    """Restore even files changed outside toold since (their changes are lost)."""


class CheckpointsRestoreResult(WireModel):
    """Result of ``checkpoints/restore``: the files put back and the restore's own
    checkpoint (restore it to redo)."""

    restored: list[str]
    checkpoint: CheckpointInfo
    diagnostics: DiagnosticsDelta | None = None
    """What the restore did to the restored files' diagnostics, as ``tools/call``'s
    ``diagnostics`` (within ``diagnostics.wait_ms``); present only when there is
    something in it."""


class Diagnostic(WireModel):
    """One problem a language server found in a file."""

    path: str
    """The file, relative to the workspace root ("/"-separated)."""
    line: int
    """1-based line of the start."""
    column: int
    """1-based column of the start (UTF-16 code units, as LSP counts)."""
    severity: Literal["error", "warning", "information", "hint"]
    message: str
    source: str | None = None
    """What reported it (the server's name for itself, e.g. "Ruff")."""
    code: str | None = None
    """The rule or error code, e.g. "F401"."""


class DiagnosticsDelta(WireModel):
    """What a file-changing call did to its files' diagnostics (tools/call's
    ``diagnostics``): the new or changed ones listed, the ones already there counted."""

    new: list[Diagnostic] = Field(default_factory=list)
    """Diagnostics the call introduced (or changed: another message, code or severity)."""
    fixed: list[Diagnostic] = Field(default_factory=list)
    """Diagnostics that were there before the call and are gone."""
    unchanged: int = 0
    """Diagnostics that were there before the call and still are (not repeated)."""
    pending: list[str] = Field(default_factory=list)
    """Files whose servers did not answer within ``diagnostics.wait_ms`` (the next
    diagnostics/changed or diagnostics/get has them)."""
    missing: list[str] = Field(default_factory=list)
    """Language servers these files need that are not installed or do not start (each
    named once per workspace)."""


class DiagnosticsGetParams(WireModel):
    """Params of ``diagnostics/get``."""

    path: str | None = None
    """A file or folder (relative to the workspace, or absolute inside it); the whole
    workspace when omitted."""


class DiagnosticsGetResult(WireModel):
    """Result of ``diagnostics/get``: the current diagnostics, by file then position."""

    diagnostics: list[Diagnostic]
    pending: list[str] = Field(default_factory=list)
    """Files whose servers did not answer in time."""
    checked: int = 0
    """Files checked (a folder's are those its servers match, up to a cap)."""


class DiagnosticsChanged(WireModel):
    """``diagnostics/changed``: a file's diagnostics after a change toold saw."""

    path: str
    """The file, relative to the workspace root."""
    diagnostics: list[Diagnostic]
    """All of its diagnostics now (an empty list: none left)."""
