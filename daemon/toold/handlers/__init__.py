"""Handlers of toold's custom methods, one module per area.

HANDLERS maps each method to ``module:function``; rpc.py imports a handler's
module on its first call, so the daemon answers ``initialize`` before loading
pydantic models and tools.
"""

from __future__ import annotations

from toold_protocol import names

HANDLERS: dict[str, str] = {
    names.TOOLS_LIST: "toold.handlers.tools:tools_list",
    names.TOOLS_CALL: "toold.handlers.tools:tools_call",
    names.TODOS_LIST: "toold.handlers.state:todos_list",
    names.TASKS_LIST: "toold.handlers.state:tasks_list",
    names.SKILLS_LIST: "toold.handlers.state:skills_list",
    names.JOBS_LIST: "toold.handlers.jobs:jobs_list",
    names.JOBS_GET: "toold.handlers.jobs:jobs_get",
    names.JOBS_CANCEL: "toold.handlers.jobs:jobs_cancel",
    names.PERMISSIONS_SET_MODE: "toold.handlers.agents:permissions_set_mode",
    names.AGENT_RUN: "toold.handlers.agents:agent_run",
    names.TEAM_REGISTER: "toold.handlers.agents:team_register",
    names.CHECKPOINTS_LIST: "toold.handlers.checkpoints:checkpoints_list",
    names.CHECKPOINTS_DIFF: "toold.handlers.checkpoints:checkpoints_diff",
    names.CHECKPOINTS_RESTORE: "toold.handlers.checkpoints:checkpoints_restore",
}
