"""WorkspaceState: everything one workspace binds (configuration, stores, runner, tools).

Bound by toold.assembly.bind, on a worker thread of toold.opening.open_workspace, the one
way every front end opens a workspace. The state reloads its configuration (loosening
changes held for the user's answer, the gate of toold.config_gate shut while it is
invalid), runs background jobs' commands and releases it all (``aclose``); make_guard
and make_agents build the parts a reload replaces.
Nothing here imports pygls: changes leave through the ``push`` callback.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toold.agents.provider import AnthropicProvider
from toold.agents.system import AgentSystem
from toold.config import TooldConfig
from toold.config_gate import MENDING, REFUSED, ConfigGate, GatedGuard, Held, gated
from toold.config_loading import ConfigError, load_config
from toold.diagnostics import step as diagnostics_step
from toold.dispatch import run_judged
from toold.gateway import ToolGateway
from toold.jobs.manager import BackgroundManager
from toold.jobs.records import Outcome
from toold.permissions.audit import AuditLog
from toold.permissions.guard import CannotAsk, PermissionGuard
from toold.permissions.loosening import chosen_keys, hold_back
from toold.planning.skills import SkillLoader
from toold.planning.tasks import TaskManager
from toold.planning.todos import TodoManager
from toold.refusals import forget_refusal, remember_refusal
from toold.sandbox.runner import Sandbox, ToolRunner
from toold.sandbox.runners import make_sandbox
from toold.team.manager import TeamManager
from toold.tools.builtin._login_shell import LoginEnvironment
from toold.tools.context import CallContext
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet
from toold.watching import WatchHub

log = logging.getLogger(__name__)

STATE_DIR = ".toold"

Asker = Callable[[str, Any, str], Awaitable[Any]]
"""Ask the user about a call (tool, arguments, reason) → "allow" | "always" | "deny" | None."""

Push = Callable[[str, dict[str, Any]], None]
"""Send a notification: method name and params (validated by the server against the contract)."""

Report = Callable[[str], None]
"""Show the user a message (the server's window/showMessage)."""

Confirm = Callable[[str, list[str], float], Awaitable[str | None]]
"""Ask the user (message, action titles, timeout in seconds) → the chosen title, or None."""

APPLY, KEEP = "Apply", "Keep current"
HOW_TO_APPLY = (
    "to apply them, save toold.toml again and answer Apply, switch the mode from the editor "
    "(permissions/setMode), or send the settings from the editor (didChangeConfiguration); "
    "a restart keeps them out too (toold remembers what you refused)"
)


@dataclass
class WorkspaceState:
    """The bound workspace."""

    root: Path
    config: TooldConfig
    runtime: ToolRuntime
    toolset: ToolSet
    runner: ToolRunner
    todos: TodoManager
    tasks: TaskManager
    skills: SkillLoader
    jobs: BackgroundManager
    push: Push
    guard: PermissionGuard
    gateway: ToolGateway
    """toolset + guard + runner: the one way every front end runs a tool."""
    agents: AgentSystem | None = None
    team: TeamManager | None = None
    execution_events: bool = False
    overrides: dict[str, Any] | None = None
    """initializationOptions.config or the last didChangeConfiguration: kept over file edits."""
    watching: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once outside changes are watched (see toold.watch)."""
    watcher: WatchHub = field(default_factory=WatchHub)
    """The one inotify instance (or polling) every watch of the workspace shares."""
    notices: list[str] = field(default_factory=list)
    """Warnings about the shared workspace (the watchers polling): told to every session
    now (``warn``) and to each that attaches later."""
    warn: Report | None = None
    """Show the user a warning; without it warnings are only logged."""
    confirm: Confirm | None = None
    """Ask the user to confirm loosening changes; None when the editor cannot ask."""
    held: Held | None = None
    """Loosening changes of the last reload, waiting for the user's answer."""
    gate: ConfigGate = field(default_factory=ConfigGate)
    """Shut (agents' calls refused) while the configuration toold started with is invalid."""
    kept_out: str | None = None
    """The loosening of toold.toml kept out at start because the user refused it before:
    told to each session that attaches, until the user applies it."""
    _generation: int = 0
    _settling: asyncio.Task[None] | None = field(default=None, repr=False)
    _asked: Held | None = field(default=None, repr=False)
    """The held changes the open question is about (the latest reload asking it)."""
    _reloading: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def state_dir(self) -> Path:
        """toold's own folder inside the workspace."""
        return self.root / STATE_DIR

    @property
    def config_problem(self) -> str | None:
        """What to tell each session that attaches while the configuration is invalid."""
        problem = self.gate.problem
        return None if problem is None else f"{problem}; {REFUSED} ({MENDING})"

    def reload_config(
        self, overrides: dict[str, Any] | None = None, *, from_file: bool = False
    ) -> str | None:
        """Re-read toold.toml (+ overrides); on error keep the last good config and say why.

        Changes that loosen a protection (toold.permissions.loosening) are held in
        ``held`` unless ``overrides`` (the editor's settings, a user action) set them
        themselves; ``from_file`` reloads set none. Everything else applies now.
        Runs on a worker thread (a new sandbox may take seconds to probe); one at a time.
        """
        return self._reload(overrides, from_file)[0]

    def _reload(
        self, overrides: dict[str, Any] | None, from_file: bool, joining: bool = False
    ) -> tuple[str | None, Held | None]:
        with self._reloading:
            self._generation += 1
            self.held = None
            try:
                config = load_config(self.root, overrides)
                chosen = frozenset() if from_file else chosen_keys(overrides)
                applied, changes = hold_back(self.config, self.guard.mode, config, chosen)
            except (ConfigError, ValueError) as exc:
                if joining:
                    # An editor's first settings on a workspace already bound (the engine):
                    # invalid ones shut agents out as they would have at start, never
                    # leaving the configuration they meant to change in force unnoticed.
                    self.gate.problem = str(exc)
                return self._not_applied(str(exc)), None
            if changes:
                self.held = Held(config, tuple(changes), overrides, self._generation)
                log.warning("%s: held until the user confirms", self.held.summary)
            return self._apply_config(applied, overrides), self.held

    def apply_held(self, held: Held) -> str | None:
        """Apply changes the user confirmed, unless a later reload made them moot."""
        with self._reloading:
            if held.generation != self._generation:
                return f"{held.summary}: not applied, toold.toml changed again since"
            self.held = None
            return self._apply_config(held.config, held.overrides)

    async def reload(
        self,
        overrides: dict[str, Any] | None = None,
        *,
        from_file: bool = False,
        joining: bool = False,
    ) -> str | None:
        """reload_config off the loop; held changes are then asked about in the background.
        ``joining``: a session's initial settings, which fail closed as a start's would."""
        problem, held = await asyncio.to_thread(self._reload, overrides, from_file, joining)
        if held is not None:
            asking = self._settling is not None and not self._settling.done()
            if asking and self._asked is not None and self._asked.asks_the_same(held):
                # One save often comes as two file events: the question on screen already
                # names these changes; its answer applies this (latest) reload.
                self._asked = held
                return problem
            if self._settling is not None:
                self._settling.cancel()  # its question is moot: this reload superseded it
            self._asked = held
            self._settling = asyncio.ensure_future(self._settle())
        return problem

    def drop_held(self) -> None:
        """Stop asking about held changes (the daemon is stopping); they stay unapplied."""
        if self._settling is not None:
            self._settling.cancel()
            self._settling = None

    async def _settle(self) -> None:
        """Ask the user about the held changes: Apply applies them, anything else keeps them out."""
        held = self._asked
        assert held is not None
        timeout = self.config.permissions.ask_timeout
        try:
            if self.confirm is None:
                raise CannotAsk("the configuration's change")
            answer = await self.confirm(f"{held.summary}. Apply?", [APPLY, KEEP], timeout)
        except CannotAsk:  # no editor here can ask (the engine's sessions included)
            self._warn(
                f"{held.summary}. Not applied: this editor cannot ask to confirm "
                "changes that loosen toold's protections; to apply them, switch the mode "
                "(permissions/setMode), send the settings (didChangeConfiguration), or "
                "restart toold (it reads toold.toml as it is at start)"
            )
            return
        held = self._asked or held  # a reload asking the same question may have come since
        if answer == APPLY:
            problem = await asyncio.to_thread(self.apply_held, held)
            if problem is None:
                await asyncio.to_thread(forget_refusal, self.root)
                self.kept_out = None
            self._warn(problem or f"{held.summary}. Applied, as you confirmed")
            return
        await asyncio.to_thread(remember_refusal, self.root, self.config)
        why = "no answer" if answer is None else "kept the current configuration"
        self._warn(f"{held.summary}. Not applied ({why}); {HOW_TO_APPLY}")

    def _not_applied(self, problem: str) -> str:
        """What a reload that failed says: the previous configuration stays, and while the
        one toold started with is invalid, agents' calls stay refused (for this reason now)."""
        if self.gate.problem is None:
            return f"{problem}; keeping the previous configuration"
        self.gate.problem = problem
        return f"{problem}; {REFUSED} ({MENDING})"

    def notice(self, message: str) -> None:
        """Warn every session of a lasting condition, once, and each later one on attaching."""
        if message not in self.notices:
            self.notices.append(message)
            self._warn(message)

    def set_agents(self, agents: AgentSystem | None) -> None:
        """The agent system (None without an API key), wherever agents are started from:
        agent/run, the subagent tool (the runtime) and the team's teammates."""
        self.agents = self.runtime.agents = agents
        if self.team is not None:
            self.team.agents = agents

    def _warn(self, message: str) -> None:
        if self.warn is not None:
            self.warn(message)
        else:
            log.warning("%s", message)

    def _apply_config(self, config: TooldConfig, overrides: dict[str, Any] | None) -> str | None:
        try:
            guard = make_guard(config, self.root, self.guard.ask)
        except ValueError as exc:
            return self._not_applied(str(exc))
        sandbox: Sandbox | None = None
        if config.execution != self.config.execution:
            try:
                sandbox = make_sandbox(config, self.root, self.guard.audit)
            except Exception as exc:
                return self._not_applied(f"execution: {exc}")
        if config.permissions.mode != self.config.permissions.mode:
            # The workspace's mode; a session's own (toold.modes) stays as it chose.
            self.guard.mode = guard.mode
        # New lists, each swapped whole (a judgement on the loop never sees one half
        # done); a session's own guard (toold.modes) is rebuilt when it sees them.
        self.guard.allow, self.guard.deny, self.guard.forbid = guard.allow, guard.deny, guard.forbid
        agent_changed = config.agent != self.config.agent
        self.config = self.runtime.config = config
        self.overrides = overrides
        if agent_changed:  # its model, key or endpoint: agent/run and teammates use the new one
            self.set_agents(make_agents(self))
        self.jobs.max_finished = config.limits.max_finished_jobs
        self.jobs.max_running = config.limits.max_running_jobs
        self.jobs.max_running_per_session = config.limits.max_running_jobs_per_session
        if self.gateway.hooks is not None:
            self.gateway.hooks.config = config.hooks
        if self.gateway.checkpoints is not None:
            self.gateway.checkpoints.configure(config.checkpoints, config.limits.max_file_size)
        if sandbox is not None:
            # The runner object stays (agents and teammates hold it); the replaced sandbox
            # is closed in the background once the calls running in it finish.
            login = self.runtime.login_environment
            if login is not None and login.started:
                # New execution settings: captured again at the next bash call needing it.
                self.runtime.login_environment = LoginEnvironment(self.root)
            self.runner.replace_sandbox(sandbox)
            self.warn_runner_problem()
        if self.gate.problem is not None:
            log.warning("the configuration is valid again: agents' calls are served again")
            self.gate.problem = None
        log.info("configuration reloaded")
        return None

    async def aclose(self) -> None:
        """Release what the workspace holds (every front end's last step): held questions,
        background jobs, teammates, the runner's sandboxes and the audit log."""
        self.drop_held()
        await self.jobs.close()
        if self.team is not None:
            await self.team.close()
        self.watcher.close()
        if self.gateway.checkpoints is not None:
            self.gateway.checkpoints.close()  # the shell undo's own inotify instance
        await diagnostics_step.release(self.runtime)  # its language servers
        await self.runner.close()
        if self.guard.audit is not None:
            self.guard.audit.close()

    def runner_warning(self) -> str | None:
        """What the user must know about the runner: it cannot work here (naming the fix),
        or the default one fell back from bwrap (``runner.notice``); None when neither."""
        problem = self.runner.problem
        if problem is None:
            return self.runner.notice
        message = f"the {self.runner.name} runner (execution.tool_runner) cannot run tools here: "
        return message + f"{problem}; until then every tool call fails"

    def warn_runner_problem(self) -> None:
        """Tell the user at once what ``runner_warning`` says (each session that attaches
        later is told on joining)."""
        message = self.runner_warning()
        if message is None:
            return
        if self.warn is not None:
            self.warn(message)
        else:
            log.warning("%s", message)

    async def run_job_command(
        self,
        command: str,
        timeout: int,
        on_output: Callable[[str], None],
        idle_timeout: float | None = None,
    ) -> Outcome:
        """background_run's command, through bash and the configured runner.

        Not through ``gateway.call``: the guard judged this command when background_run
        was called (its arguments hold it), and asking again would ask twice. It runs
        through the one dispatch (toold.dispatch) every judged call runs through.
        """
        context = CallContext(origin="agent", progress=on_output)
        arguments: dict[str, object] = {"command": command, "timeout": timeout}
        if idle_timeout is not None:
            arguments["idle_timeout"] = idle_timeout
        outcome = await run_judged(
            self.toolset.require("bash"),
            arguments,
            context,
            self.runner,
        )
        return Outcome(
            text=outcome.content if isinstance(outcome.content, str) else str(outcome.content),
            exit_code=outcome.exit_code,
            timed_out=outcome.timed_out,
            is_error=outcome.is_error,
        )


def make_guard(config: TooldConfig, root: Path, ask: Asker | None) -> GatedGuard:
    """The permission guard the configuration describes (ValueError names a bad rule)."""
    perms = config.permissions
    guard = PermissionGuard.from_config(
        perms.mode,
        perms.allow,
        perms.deny,
        perms.forbid,
        ask=ask,
        audit=AuditLog(root / STATE_DIR / "audit.jsonl"),
        root=str(root),
    )
    return gated(guard, ConfigGate())


def make_agents(state: WorkspaceState) -> AgentSystem | None:
    """The agent system, when an API key is configured."""
    settings = state.config.agent
    provider = AnthropicProvider.from_settings(
        api_key_env=settings.api_key_env,
        base_url=settings.base_url,
        model=settings.model,
        max_tokens=settings.max_tokens,
    )
    if provider is None:
        return None
    return AgentSystem(
        provider,
        state.gateway,
        system_prompt=settings.system_prompt,
        max_depth=settings.max_depth,
        max_iterations=settings.max_iterations,
        drain=state.jobs.drain_notifications,
        background=state.jobs,
    )
