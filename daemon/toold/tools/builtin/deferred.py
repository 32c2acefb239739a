"""BareAgent's twelve deferred tools.

Their schemas are visible from the start; each handler works once its manager is
bound into the runtime (todos, tasks, skills, background, team, agents) and
otherwise answers with the spec's "unavailable" text.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from toold.tools.annotations import READS, SHELL, ToolAnnotations
from toold.tools.base import Tool, ToolArguments
from toold.tools.builtin.shell import ShellCommand
from toold.tools.context import current_call, failed


class DeferredTool(Tool):
    """A tool whose runtime is bound late; ``manager`` names the runtime field it needs."""

    deferred = True
    sandboxable = False
    manager: str = ""
    unavailable: str = "{name} unavailable."

    def _manager(self) -> Any:
        return getattr(self.runtime, self.manager, None) if self.runtime is not None else None

    def _unavailable(self, **fields: Any) -> str:
        return failed(self.unavailable.format(name=self.name, **fields))


class TodoWriteArguments(ToolArguments):
    action: str = Field(description="'add' a TODO or 'update' one.")
    task: str | None = Field(None, description="Text of the TODO (action=add).")
    priority: str | None = Field(None, description="Priority label (action=add), e.g. 'high'.")
    task_id: str | None = Field(None, description="TODO id such as 't1' (action=update).")
    status: str | None = Field(
        None, description="New status (action=update): pending, in_progress or done."
    )


class TodoWriteTool(DeferredTool):
    name = "todo_write"
    annotations = ToolAnnotations(destructive=False, open_world=False, confirm="never")
    description = "Add or update an item of this session's TODO list."
    Arguments = TodoWriteArguments
    manager = "todos"
    unavailable = "TODO manager unavailable."

    def run(self, args: TodoWriteArguments) -> Any:
        """Delegate to the bound TodoManager."""
        todos = self._manager()
        return todos.write(**dict(args)) if todos is not None else self._unavailable()


class TodoReadTool(DeferredTool):
    name = "todo_read"
    annotations = READS
    description = "List this session's TODO items."
    Arguments = ToolArguments
    manager = "todos"
    unavailable = "TODO manager unavailable."

    def run(self, args: ToolArguments) -> Any:
        """Delegate to the bound TodoManager."""
        todos = self._manager()
        return todos.read() if todos is not None else self._unavailable()


class SubagentArguments(ToolArguments):
    task: str = Field(description="A self-contained task for the subagent.")
    agent_type: str | None = Field(
        None, description="general-purpose (default), explore, plan or code-review."
    )
    run_in_background: bool = Field(False, description="Run through the background job system.")


class SubagentTool(DeferredTool):
    name = "subagent"
    annotations = ToolAnnotations()
    description = (
        "Delegate a self-contained task to a subagent with a fresh context and a "
        "tool set filtered by its type; returns its final text."
    )
    Arguments = SubagentArguments
    manager = "agents"
    unavailable = "Subagent unavailable: provider is not configured."
    parallel_safe = False

    async def run(self, args: SubagentArguments) -> Any:
        """Delegate to the bound subagent runner."""
        provider = self._manager()
        if provider is None:
            return self._unavailable()
        return await provider.run_subagent(**dict(args))


class LoadSkillArguments(ToolArguments):
    skill_name: str = Field(description="Name of the skill folder holding SKILL.md.")


class LoadSkillTool(DeferredTool):
    name = "load_skill"
    annotations = READS
    description = "Load a skill's SKILL.md by name."
    Arguments = LoadSkillArguments
    manager = "skills"
    unavailable = "Skill loader unavailable."

    def run(self, args: LoadSkillArguments) -> Any:
        """Delegate to the bound SkillLoader."""
        skills = self._manager()
        return skills.load(args.skill_name) if skills is not None else self._unavailable()


class TaskCreateArguments(ToolArguments):
    title: str = Field(description="Short title of the task.")
    description: str = Field("", description="Longer description.")
    depends_on: list[str] = Field(
        default_factory=list, description="Ids of tasks that must be done first."
    )


class TaskListArguments(ToolArguments):
    status: str | None = Field(
        None, description="Only tasks with this status: pending, in_progress, done, failed."
    )


class TaskGetArguments(ToolArguments):
    task_id: str = Field(description="Task id.")


class TaskUpdateArguments(ToolArguments):
    task_id: str = Field(description="Task id.")
    status: str | None = Field(None, description="pending, in_progress, done or failed.")
    title: str | None = Field(None, description="New title.")


TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "status": {"type": "string"},
        "depends_on": {"type": "array", "items": {"type": "string"}},
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
    },
    "required": ["id", "title", "status"],
}
"""A task as the task tools return it (and .tasks.json holds it)."""
TASKS_SCHEMA: dict[str, Any] = {"type": "array", "items": TASK_SCHEMA}
TEAMMATES_SCHEMA: dict[str, Any] = {"type": "array", "items": {"type": "object"}}


class _TaskTool(DeferredTool):
    manager = "tasks"
    output_schema = TASK_SCHEMA
    unavailable = "Task manager unavailable."
    method = ""

    def run(self, args: ToolArguments) -> Any:
        """Delegate to the bound TaskManager method of the same name."""
        tasks = self._manager()
        if tasks is None:
            return self._unavailable()
        return getattr(tasks, self.method)(**dict(args))


class TaskCreateTool(_TaskTool):
    name = "task_create"
    annotations = ToolAnnotations(destructive=False, open_world=False, confirm="always")
    description = "Create a persistent task in .tasks.json; returns the task."
    Arguments = TaskCreateArguments
    method = "create"
    parallel_safe = False
    effect_tags = ("filesystem:write",)


class TaskListTool(_TaskTool):
    name = "task_list"
    annotations = READS
    description = "List persistent tasks, optionally only those with one status."
    Arguments = TaskListArguments
    method = "list"
    output_schema = TASKS_SCHEMA


class TaskGetTool(_TaskTool):
    name = "task_get"
    annotations = READS
    description = "Read one persistent task by id."
    Arguments = TaskGetArguments
    method = "get"


class TaskUpdateTool(_TaskTool):
    name = "task_update"
    annotations = ToolAnnotations(
        destructive=False, idempotent=True, open_world=False, confirm="always"
    )
    description = "Update a persistent task's status and/or title."
    Arguments = TaskUpdateArguments
    method = "update"
    parallel_safe = False
    effect_tags = ("filesystem:write",)


class BackgroundRunArguments(ToolArguments):
    command: ShellCommand = Field(description="Shell command to run in the background.")
    timeout: int = Field(30, ge=1, description="Seconds before the job is killed.")
    task_id: str | None = Field(None, description="Job id to use; random when omitted.")
    idle_timeout: float | None = Field(
        None,
        gt=0,
        description="Seconds without output before the job is killed (output restarts the "
        "count; timeout stays the hard cap). Default: limits.idle_timeout.",
    )


class BackgroundRunTool(DeferredTool):
    name = "background_run"
    annotations = SHELL
    description = (
        "Run a shell command in the background; its result arrives later as a notification."
    )
    Arguments = BackgroundRunArguments
    manager = "background"
    unavailable = "Background manager unavailable."
    effect_tags = ("shell:execute",)

    async def run(self, args: BackgroundRunArguments) -> Any:
        """Submit to the bound BackgroundManager; the job's id goes in the call's meta
        (``job_id``), where the gateway reads it into the outcome."""
        background = self._manager()
        if background is None:
            return self._unavailable()
        job_id = await background.start_command(**dict(args))
        call = current_call.get()
        if call is not None:
            call.meta["job_id"] = job_id
        return background.SUBMITTED.format(job_id=job_id)


class TeamSpawnArguments(ToolArguments):
    name: str = Field(description="Registered teammate to start.")


class TeamSendArguments(ToolArguments):
    to_agent: str = Field(description="Teammate to message.")
    content: str = Field(description="Message text.")


class TeamSpawnTool(DeferredTool):
    name = "team_spawn"
    annotations = ToolAnnotations(destructive=False, agents="lead")
    description = "Start a registered teammate as a background agent."
    Arguments = TeamSpawnArguments
    manager = "team"
    unavailable = "Team spawning unavailable for {teammate}."

    async def run(self, args: TeamSpawnArguments) -> Any:
        """Delegate to the bound team handlers."""
        team = self._manager()
        if team is None:
            return self._unavailable(teammate=args.name)
        return await team.spawn(args.name)


class TeamSendTool(DeferredTool):
    name = "team_send"
    annotations = ToolAnnotations(destructive=False, open_world=False, agents="team")
    description = "Send a message to a teammate's mailbox and wait for the reply."
    Arguments = TeamSendArguments
    manager = "team"
    unavailable = "Team messaging unavailable for {teammate}."

    async def run(self, args: TeamSendArguments) -> Any:
        """Delegate to the bound team handlers."""
        team = self._manager()
        if team is None:
            return self._unavailable(teammate=args.to_agent)
        return await team.send(args.to_agent, args.content)


class TeamListTool(DeferredTool):
    name = "team_list"
    annotations = READS
    description = "List registered teammates and whether each is running."
    Arguments = ToolArguments
    manager = "team"
    output_schema = TEAMMATES_SCHEMA

    def run(self, args: ToolArguments) -> Any:
        """Delegate to the bound team handlers; [] without them."""
        team = self._manager()
        return team.list() if team is not None else []


class TeamRegisterArguments(ToolArguments):
    name: str = Field(description="Teammate name: letters, digits, _ and -.")
    role: str = Field(description="What the teammate does, e.g. 'reviewer'.")
    system_prompt: str = Field("", description="Extra instructions for the teammate.")
    model: str | None = Field(None, description="Model to use instead of the default.")


class TeamRegisterTool(DeferredTool):
    name = "team_register"
    annotations = ToolAnnotations(
        destructive=False, idempotent=True, open_world=False, agents="lead"
    )
    description = "Register (or replace) a teammate in .team.json so team_spawn can start it."
    Arguments = TeamRegisterArguments
    deferred = False  # toold's own addition, not one of BareAgent's twelve
    manager = "team"
    unavailable = "Team registration unavailable for {teammate}."
    effect_tags = ("filesystem:write",)

    def run(self, args: TeamRegisterArguments) -> Any:
        """Delegate to the bound team handlers."""
        team = self._manager()
        if team is None:
            return self._unavailable(teammate=args.name)
        return team.register(args.name, args.role, args.system_prompt, args.model)


TOOLS = (
    TodoWriteTool,
    TodoReadTool,
    SubagentTool,
    LoadSkillTool,
    TaskCreateTool,
    TaskListTool,
    TaskGetTool,
    TaskUpdateTool,
    BackgroundRunTool,
    TeamSpawnTool,
    TeamSendTool,
    TeamListTool,
    TeamRegisterTool,
)
