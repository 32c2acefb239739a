"""Method names of wire contract v1, importable without pydantic (the daemon's fast path)."""

from __future__ import annotations

TOOLS_LIST = "tools/list"
TOOLS_CALL = "tools/call"
TODOS_LIST = "todos/list"
TASKS_LIST = "tasks/list"
SKILLS_LIST = "skills/list"
JOBS_LIST = "jobs/list"
JOBS_GET = "jobs/get"
JOBS_CANCEL = "jobs/cancel"
PERMISSIONS_SET_MODE = "permissions/setMode"
AGENT_RUN = "agent/run"
TEAM_REGISTER = "team/register"
TEAM_MESSAGE = "team/message"
CHECKPOINTS_LIST = "checkpoints/list"
CHECKPOINTS_DIFF = "checkpoints/diff"
CHECKPOINTS_RESTORE = "checkpoints/restore"
DIAGNOSTICS_GET = "diagnostics/get"

TODOS_CHANGED = "todos/changed"
TASKS_CHANGED = "tasks/changed"
SKILLS_CHANGED = "skills/changed"
JOBS_FINISHED = "jobs/finished"
EXECUTION_EVENT = "execution/event"
PERMISSIONS_PREVIEW = "permissions/preview"
DIAGNOSTICS_CHANGED = "diagnostics/changed"

CLIENT_REQUESTS: tuple[str, ...] = (
    TOOLS_LIST,
    TOOLS_CALL,
    TODOS_LIST,
    TASKS_LIST,
    SKILLS_LIST,
    JOBS_LIST,
    JOBS_GET,
    JOBS_CANCEL,
    PERMISSIONS_SET_MODE,
    AGENT_RUN,
    TEAM_REGISTER,
    CHECKPOINTS_LIST,
    CHECKPOINTS_DIFF,
    CHECKPOINTS_RESTORE,
    DIAGNOSTICS_GET,
)
"""Requests a client sends to the daemon."""

SERVER_NOTIFICATIONS: tuple[str, ...] = (
    TODOS_CHANGED,
    TASKS_CHANGED,
    SKILLS_CHANGED,
    JOBS_FINISHED,
    EXECUTION_EVENT,
    TEAM_MESSAGE,
    PERMISSIONS_PREVIEW,
    DIAGNOSTICS_CHANGED,
)
"""Notifications the daemon pushes to the client."""

ALL_METHODS: frozenset[str] = frozenset(CLIENT_REQUESTS + SERVER_NOTIFICATIONS)
