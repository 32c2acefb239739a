"""Method names of wire contract v1 and the table binding them to their models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from toold_protocol import models, names

Direction = Literal["clientToServer", "serverToClient"]


@dataclass(frozen=True)
class MethodSpec:
    """One custom method: its name, params model and result model (None for notifications)."""

    name: str
    params: type[BaseModel]
    result: type[BaseModel] | None
    direction: Direction = "clientToServer"
    doc: str = ""

    @property
    def is_notification(self) -> bool:
        """True when the method expects no response."""
        return self.result is None


def _notification(name: str, params: type[BaseModel], doc: str) -> MethodSpec:
    return MethodSpec(name, params, None, direction="serverToClient", doc=doc)


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec(
            names.TOOLS_LIST,
            models.ToolsListParams,
            models.ToolsListResult,
            doc="List every tool's schema in the requested format.",
        ),
        MethodSpec(
            names.TOOLS_CALL,
            models.ToolsCallParams,
            models.ToolsCallResult,
            doc="Run one tool; failures of the tool itself come back as isError results.",
        ),
        MethodSpec(
            names.TODOS_LIST,
            models.EmptyParams,
            models.TodosListResult,
            doc="The session's TODO items.",
        ),
        MethodSpec(
            names.TASKS_LIST,
            models.TasksListParams,
            models.TasksListResult,
            doc="Persistent tasks from .tasks.json, each with its ready flag.",
        ),
        MethodSpec(
            names.SKILLS_LIST,
            models.EmptyParams,
            models.SkillsListResult,
            doc="Skills found in BAREAGENT_SKILLS_DIR, .toold/skills and toold's own.",
        ),
        MethodSpec(
            names.JOBS_LIST,
            models.EmptyParams,
            models.JobsListResult,
            doc="Background jobs, running and finished (finished ones survive restarts).",
        ),
        MethodSpec(
            names.JOBS_GET,
            models.JobIdParams,
            models.JobDetail,
            doc="One job with its output so far (capped).",
        ),
        MethodSpec(
            names.JOBS_CANCEL,
            models.JobIdParams,
            models.JobInfo,
            doc="Cancel a running job: its whole process group is killed.",
        ),
        MethodSpec(
            names.PERMISSIONS_SET_MODE,
            models.SetModeParams,
            models.SetModeResult,
            doc="Switch the permission mode for this daemon's life.",
        ),
        MethodSpec(
            names.AGENT_RUN,
            models.AgentRunParams,
            models.AgentRunResult,
            doc="Run the agent loop on a prompt; tool calls pass the permission guard.",
        ),
        MethodSpec(
            names.TEAM_REGISTER,
            models.TeamRegisterParams,
            models.Teammate,
            doc="Register (or replace) a teammate in .team.json.",
        ),
        MethodSpec(
            names.CHECKPOINTS_LIST,
            models.EmptyParams,
            models.CheckpointsListResult,
            doc="Every recorded file-changing tool call, oldest first.",
        ),
        MethodSpec(
            names.CHECKPOINTS_DIFF,
            models.CheckpointIdParams,
            models.CheckpointsDiffResult,
            doc="The unified diff from before a checkpoint's call (and every later one) to now.",
        ),
        MethodSpec(
            names.CHECKPOINTS_RESTORE,
            models.CheckpointsRestoreParams,
            models.CheckpointsRestoreResult,
            doc="Put files back as they were before a checkpoint (Conflict if changed since).",
        ),
        MethodSpec(
            names.DIAGNOSTICS_GET,
            models.DiagnosticsGetParams,
            models.DiagnosticsGetResult,
            doc="The language servers' current diagnostics of a file, a folder or the workspace.",
        ),
        _notification(
            names.TEAM_MESSAGE,
            models.TeamMessageNotification,
            "A teammate wrote to the user's agent (main).",
        ),
        _notification(names.TODOS_CHANGED, models.TodosChanged, "The TODO list changed."),
        _notification(names.TASKS_CHANGED, models.TasksChanged, "Tasks changed (here or on disk)."),
        _notification(names.SKILLS_CHANGED, models.SkillsChanged, "A skill folder changed."),
        _notification(names.JOBS_FINISHED, models.JobFinished, "A background job ended."),
        _notification(
            names.DIAGNOSTICS_CHANGED,
            models.DiagnosticsChanged,
            "A file's diagnostics changed after a tool call wrote it.",
        ),
        _notification(
            names.EXECUTION_EVENT,
            models.ExecutionEvent,
            "A tool run started, completed or failed (opt-in).",
        ),
        _notification(
            names.PERMISSIONS_PREVIEW,
            models.PermissionsPreview,
            "What the call of the permission prompt that follows would change (opt-in).",
        ),
    )
}
