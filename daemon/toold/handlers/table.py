"""The custom requests: one row per method, tying its name, models and handler.

mypy checks each handler against its row's params and result models; a unit test
checks the rows against toold_protocol's contract (names and models), so the daemon
and its clients cannot drift apart.
"""

from __future__ import annotations

from toold.handlers import agents, checkpoints, diagnostics, jobs, state, tools
from toold.rpc import Request
from toold_protocol import models as m
from toold_protocol import names

REQUESTS = (
    Request(names.TOOLS_LIST, m.ToolsListParams, m.ToolsListResult, tools.tools_list),
    Request(names.TOOLS_CALL, m.ToolsCallParams, m.ToolsCallResult, tools.tools_call),
    Request(names.TODOS_LIST, m.EmptyParams, m.TodosListResult, state.todos_list),
    Request(names.TASKS_LIST, m.TasksListParams, m.TasksListResult, state.tasks_list),
    Request(names.SKILLS_LIST, m.EmptyParams, m.SkillsListResult, state.skills_list),
    Request(names.JOBS_LIST, m.EmptyParams, m.JobsListResult, jobs.jobs_list),
    Request(names.JOBS_GET, m.JobIdParams, m.JobDetail, jobs.jobs_get),
    Request(names.JOBS_CANCEL, m.JobIdParams, m.JobInfo, jobs.jobs_cancel),
    Request(
        names.PERMISSIONS_SET_MODE, m.SetModeParams, m.SetModeResult, agents.permissions_set_mode
    ),
    Request(names.AGENT_RUN, m.AgentRunParams, m.AgentRunResult, agents.agent_run),
    Request(names.TEAM_REGISTER, m.TeamRegisterParams, m.Teammate, agents.team_register),
    Request(
        names.CHECKPOINTS_LIST,
        m.EmptyParams,
        m.CheckpointsListResult,
        checkpoints.checkpoints_list,
    ),
    Request(
        names.CHECKPOINTS_DIFF,
        m.CheckpointIdParams,
        m.CheckpointsDiffResult,
        checkpoints.checkpoints_diff,
    ),
    Request(
        names.CHECKPOINTS_RESTORE,
        m.CheckpointsRestoreParams,
        m.CheckpointsRestoreResult,
        checkpoints.checkpoints_restore,
    ),
    Request(
        names.DIAGNOSTICS_GET,
        m.DiagnosticsGetParams,
        m.DiagnosticsGetResult,
        diagnostics.diagnostics_get,
    ),
)
"""Every request a client may send, with its handler."""
