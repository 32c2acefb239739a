"""bind(): a workspace put together from its folder: configuration, stores, runner, tools.

Called on a worker thread by toold.opening.open_workspace, the one way every front end
opens a workspace. The configuration to start with comes from ``first_config``: an
invalid one never means the defaults (its strictest reading applies, behind a shut
gate: toold.config_gate). The WorkspaceState it returns holds what was bound.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from toold.checkpoints import KEY_NAME, CheckpointStore
from toold.config import TooldConfig
from toold.config_gate import GatedGuard
from toold.config_loading import ConfigError, load_config, strictest
from toold.diagnostics import step as diagnostics_step
from toold.gateway import ToolGateway
from toold.hooks import Hooks
from toold.jobs.manager import BackgroundManager
from toold.permissions.rules import parse_rules
from toold.planning.skills import SkillLoader
from toold.planning.tasks import TASKS_FILE, TaskManager
from toold.planning.todos import TodoManager
from toold.refusals import hold_refused
from toold.sandbox.runners import make_runner
from toold.team.manager import TeamManager
from toold.tools.builtin._login_shell import LoginEnvironment
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet
from toold.user_state import secret_key
from toold.workspace import (
    STATE_DIR,
    Asker,
    Confirm,
    Push,
    Report,
    WorkspaceState,
    make_agents,
    make_guard,
)
from toold_protocol import names


def make_checkpoints(config: TooldConfig, root: Path) -> CheckpointStore:
    """The workspace's checkpoint store, in ``.toold/checkpoints``."""
    store = CheckpointStore(
        root, root / STATE_DIR / "checkpoints", 0, 0, key=lambda: secret_key(KEY_NAME)
    )
    store.configure(config.checkpoints, config.limits.max_file_size)
    return store


def bind(
    root: Path,
    overrides: dict[str, Any] | None,
    push: Push,
    on_config_error: Callable[[str], None],
    execution_events: bool = False,
    ask: Asker | None = None,
    warn: Report | None = None,
    confirm: Confirm | None = None,
) -> WorkspaceState:
    """Load the configuration, open the stores and bind every tool to them.

    ``on_config_error`` shows why the configuration was refused (agents' calls are then
    refused until it is fixed: see GatedGuard); ``warn`` shows warnings (a runner that
    cannot work here); ``confirm`` asks about loosening reloads.
    """
    root = root.resolve()
    config, guard = first_config(root, overrides, ask)
    config, refused = hold_refused(root, config, overrides)
    if refused is not None and guard.gate.problem is None:  # its loosening stays held
        guard = make_guard(config, root, ask)
    state_dir = root / STATE_DIR

    def emit_event(event: dict[str, Any]) -> None:
        if state.execution_events:
            push(names.EXECUTION_EVENT, event)

    todos = TodoManager(
        state_dir / "todos.json",
        lock_path=state_dir / "todos.lock",
        on_change=lambda items: push(names.TODOS_CHANGED, {"todos": items}),
    )
    tasks = TaskManager(
        root / TASKS_FILE,
        lock_path=state_dir / "tasks.lock",
        backup_path=state_dir / "tasks.json.bak",
        on_change=lambda snapshot: push(names.TASKS_CHANGED, {"tasks": snapshot}),
    )
    skills = SkillLoader(root)
    jobs = BackgroundManager(
        state_dir / "jobs",
        execute=lambda *a: state.run_job_command(*a),
        on_finished=lambda job: push(names.JOBS_FINISHED, job),
        max_finished=config.limits.max_finished_jobs,
        max_running=config.limits.max_running_jobs,
        max_running_per_session=config.limits.max_running_jobs_per_session,
    )
    runtime = ToolRuntime(
        workspace=root,
        config=config,
        todos=todos,
        tasks=tasks,
        skills=skills,
        background=jobs,
        # Captured at the first bash call that runs in it (toold.tools.builtin._login_shell).
        login_environment=LoginEnvironment(root),
    )
    toolset = ToolSet(BuiltinToolProvider(runtime).get_tools())
    runner = make_runner(config, root, emit_event, guard.audit)
    state = WorkspaceState(
        root=root,
        config=config,
        runtime=runtime,
        toolset=toolset,
        runner=runner,
        todos=todos,
        tasks=tasks,
        skills=skills,
        jobs=jobs,
        push=push,
        guard=guard,
        gateway=ToolGateway(
            toolset,
            guard,
            runner,
            hooks=Hooks(root, config.hooks),
            checkpoints=make_checkpoints(config, root),
        ),
        execution_events=execution_events,
        overrides=overrides,
        warn=warn,
        confirm=confirm,
        gate=guard.gate,
    )
    state.watcher.notice = state.notice
    # Agents and the team run tools through the state's gateway: they come last.
    state.team = runtime.team = TeamManager(
        root,
        state_dir,
        agents=None,
        push=lambda message: push(names.TEAM_MESSAGE, {"message": message}),
        watcher=state.watcher,
    )
    state.set_agents(make_agents(state))
    diagnostics_step.wire(
        runtime,
        runner,
        lambda change: push(
            names.DIAGNOSTICS_CHANGED, change.model_dump(mode="json", by_alias=True)
        ),
    )
    tasks.load()
    if state.config_problem is not None:
        on_config_error(state.config_problem)
    if refused is not None:
        state.kept_out = refused
        state._warn(refused)
    state.warn_runner_problem()
    return state


def first_config(
    root: Path, overrides: dict[str, Any] | None, ask: Asker | None
) -> tuple[TooldConfig, GatedGuard]:
    """The configuration and guard to start with; the guard's gate says why it is invalid.

    Invalid never means the defaults: the strictest reading applies (toold.config_loading.strictest:
    the sandbox and the refusing rules it names, each valid by itself) and the guard's
    gate is shut, refusing every agent's call until a valid configuration is applied.
    """
    try:
        config = load_config(root, overrides)
    except ConfigError as exc:
        problem, config = str(exc), strictest(exc.data)
    else:
        try:
            return config, make_guard(config, root, ask)
        except ValueError as exc:  # a rule that does not parse
            problem = f"the configuration is invalid ({exc})"
            config = strictest(config.model_dump())
    guard = make_guard(_parsable_rules(config), root, ask)
    guard.gate.problem = problem
    return config, guard


def _parsable_rules(config: TooldConfig) -> TooldConfig:
    """``config`` with only the refusing rules that parse each by itself."""

    def parses(rule: str) -> bool:
        try:
            parse_rules([rule])
        except ValueError:
            return False
        return True

    perms = config.permissions
    kept = {
        key: [rule for rule in getattr(perms, key) if parses(rule)]
        for key in ("deny", "forbid")
        if hasattr(perms, key)
    }
    return config.model_copy(update={"permissions": perms.model_copy(update=kept)})
