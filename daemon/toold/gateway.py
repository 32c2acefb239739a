"""ToolGateway: the one way a front end runs a tool — validate → guard → run → audit.

Every front end translates its protocol to ``gateway.call(name, arguments, context)``
and the outcome back, nothing more: tools/call over LSP framing (which ``toold call``
and ``toold run`` reach too), the agent loop with its subagents and teammates, and the
MCP bridge. None of them holds a guard and a runner of its own, so none can run a tool
the guard has not judged.

Arguments are validated before the guard sees them, so rules and the classifier judge
the values the tool will really use (aliases folded, defaults filled), and a call that
fails validation (two names for one argument, an empty command) never reaches the guard.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from toold.checkpoints import CheckpointStore
from toold.checkpoints.baseline import Baseline, Snapshot
from toold.checkpoints.objects import IndexBusy
from toold.checkpoints.store import Pending
from toold.diagnostics.step import after_call, before_call
from toold.dispatch import run_tool
from toold.errors import CheckpointStoreError, FileChangedError
from toold.hooks import Hooks, PreHookVerdict
from toold.inotify import Inotify, remote_filesystem
from toold.outcome import ToolOutcome, error_text
from toold.permissions.guard import DENIED, PermissionGuard
from toold.sandbox.runner import ToolRunner
from toold.search.ignore import IGNORE_FILES, IgnoreRules
from toold.search.walk import SKIP_DIRS
from toold.tools.base import Tool, ToolArgumentError
from toold.tools.context import CallContext
from toold.tools.filestate import FileTracker
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet
from toold.watching import POLLING_ENV

log = logging.getLogger(__name__)

QUESTION_SENT = "toold/questionSent"
"""A ``CallContext.meta`` flag a front end's ``ask`` sets when it sent the guard's question
back to the client instead of answering it (MCP 2026-07-28's ``input_required``): that
round decided nothing, so it has no audit line; the retry carrying the answer has it."""


@dataclass(frozen=True)
class ToolGateway:
    """A tool set, the guard that judges its calls and the runner that runs them."""

    toolset: ToolSet
    guard: PermissionGuard
    runner: ToolRunner | None = None
    """Where sandboxable tools run; None runs them in this process."""
    hooks: Hooks | None = None
    """The user's pre and post hooks (toold.hooks); None runs none."""
    checkpoints: CheckpointStore | None = None
    """Where file-changing calls record what they replace (toold.checkpoints); None: nowhere."""

    def narrowed(
        self, *, toolset: ToolSet | None = None, guard: PermissionGuard | None = None
    ) -> ToolGateway:
        """The same runner with fewer tools or a stricter guard (a subagent, a teammate)."""
        return replace(
            self,
            toolset=self.toolset if toolset is None else toolset,  # an empty set stays empty
            guard=self.guard if guard is None else guard,
        )

    async def call(self, name: str, arguments: Any, context: CallContext) -> ToolOutcome:
        """Judge and run one call; every refusal or failure is an isError outcome whose
        fields say how it was decided (toold.outcome). One audit line records it.

        Only an unknown name raises (toold.tools.toolset.UnknownToolError): each front
        end answers it in its own protocol. Cancellation propagates (and is recorded).
        """
        tool = self.toolset.require(name)
        entry: dict[str, Any] = {"arguments": arguments}
        # The text of the files it may write, for the diagnostics it introduces (if any).
        watch = (
            None if tool.annotations.read_only else await before_call(tool, arguments, self.runner)
        )
        try:
            outcome = await self._call(tool, arguments, context, entry)
            if watch is not None:
                outcome = await after_call(watch, outcome)
        except asyncio.CancelledError:
            self._audit(tool.name, context.origin, entry, outcome="cancelled")
            raise
        if not context.meta.get(QUESTION_SENT) or outcome.ran:
            self._audit(tool.name, context.origin, entry, **_recorded(outcome))
        return outcome

    async def _call(
        self, tool: Tool, arguments: Any, context: CallContext, entry: dict[str, Any]
    ) -> ToolOutcome:
        """``call`` without its audit line: what was judged and run goes into ``entry``."""
        try:
            checked = tool.validate_args(arguments)
        except ToolArgumentError as exc:
            return _refused(f"Error: {exc}", entry)
        # Tools without an arguments model keep the call's own shape (rules are written for it).
        seen = (
            to_jsonable_python(checked, fallback=str) if isinstance(checked, Mapping) else arguments
        )
        entry["arguments"] = seen  # what the guard judged: aliases folded, defaults filled
        hooked = PreHookVerdict()
        if self.hooks is not None:
            hooked = await self.hooks.before(tool.name, seen, context.origin)
            if hooked.blocked is not None:
                entry["decision"] = "blocked"
                blocked = hooked.blocked
                return ToolOutcome(blocked, True, decision="denied_by_rule", reason=blocked)
        try:
            # Every file the call names (a patch's too), for the guard and the stale-file
            # check; a call whose files cannot be named does not run (fail closed).
            named = tool.named_paths(checked)
            written = tool.written_paths(checked)
        except ValueError as exc:
            return _refused(f"Error: {exc}", entry)
        # The guard judges the tool by its own annotations (a user's tool included); a dry
        # run changes nothing, so it is judged as a read.
        verdict = await self.guard.check(
            tool.name,
            seen,
            context.origin,
            tool.call_annotations(checked),
            steer=hooked,
            paths=named,
        )
        entry["decision"] = verdict.decision
        judged = ToolOutcome(
            verdict.message or DENIED,
            is_error=True,
            decision=verdict.kind or "refused",
            reason=verdict.reason,
            rule=verdict.rule,
            approvable=verdict.approvable,
            ask_reason=verdict.ask_reason,
            remedy=verdict.remedy,
        )
        if not verdict.allowed:
            return judged
        started = time.perf_counter()
        outcome = await self._tracked(tool, checked, context, written)
        entry["durationMs"] = round((time.perf_counter() - started) * 1000, 3)
        if self.hooks is not None:
            said = await self.hooks.after(tool.name, seen, outcome.content, context.origin)
            if said:
                outcome = replace(outcome, content=with_hook_output(outcome.content, said))
        if outcome.decision == "refused":  # the stale-file check, at the moment it would run
            return outcome
        job = context.meta.get("job_id")
        return replace(
            judged,
            content=outcome.content,
            is_error=outcome.is_error,
            exit_code=outcome.exit_code,
            timed_out=outcome.timed_out,
            job_id=job if isinstance(job, str) else None,
            written=[] if outcome.is_error else written,
        )

    def _audit(self, tool: str, origin: str, entry: dict[str, Any], **fields: Any) -> None:
        """The call's one line: what was judged, how it was decided and what came of it."""
        if self.guard.audit is not None:
            self.guard.audit.record(event="call", tool=tool, origin=origin, **entry, **fields)

    async def _stale(
        self, tool: Tool, checked: Any, context: CallContext, written: list[str]
    ) -> ToolOutcome | None:
        """The refusal of an agent's write of a file it has not seen as it is now
        (toold.tools.filestate); None when the call may go on."""
        files = _agent_files(tool, context)
        if files is None or not written:
            return None
        try:
            await _on_disk(tool.runs_inline(checked), files.require_seen, written)
        except FileChangedError as exc:
            return ToolOutcome(error_text(exc), True, decision="refused", reason=str(exc))
        return None

    async def _tracked(
        self, tool: Tool, checked: Any, context: CallContext, written: list[str]
    ) -> ToolOutcome:
        """Run the call under the stale-file guard: checked again at the moment it runs,
        its successful reads and writes remembered, writes of one file one at a time."""
        runtime = getattr(tool, "runtime", None)
        if not isinstance(runtime, ToolRuntime):
            return await self._run(tool, checked, context, written)
        files = runtime.files
        agent = _agent_files(tool, context) is not None
        reads = tool.read_paths(checked) if agent else []
        if not written and not reads:
            return await self._run(tool, checked, context, written)
        inline = tool.runs_inline(checked)
        async with files.serialised(written):
            stale = await self._stale(tool, checked, context, written)
            if stale is not None:
                return stale
            if reads and inline:  # on the loop: the files read stay open over the read
                with files.held(reads) as held:
                    outcome = await self._run(tool, checked, context, written)
                    if not outcome.is_error:
                        files.remember(written)
                        files.remember_held(held)
                return outcome
            before = await _on_disk(inline, files.snapshot, reads) if reads else None
            outcome = await self._run(tool, checked, context, written)
            if agent and not outcome.is_error:
                await _on_disk(inline, files.remember, written)
                if reads:
                    await _on_disk(inline, files.remember, reads, before)
        return outcome

    async def _run(
        self, tool: Tool, checked: Any, context: CallContext, written: list[str]
    ) -> ToolOutcome:
        """Run the call, recording a checkpoint of the files it writes (a shell or code
        call's: of what changed in the tree)."""
        store = self.checkpoints
        if store is not None and store.enabled and _changes_tree(tool, checked):
            return await self._run_walked(store, tool, checked, context)
        paths = written if store is not None and store.enabled else []
        if not paths or store is None:
            return await run_tool(tool, checked, context, self.runner)
        inline = tool.runs_inline(checked)  # bounded files on a local disk: no thread hop
        pending = await _on_disk(inline, store.snapshot, paths)
        try:
            return await run_tool(tool, checked, context, self.runner)
        finally:
            # Also after a failure or a cancel: whatever did change can be undone. On the
            # loop (no task, no await) when the index's lock is free, else on a thread.
            if not (inline and _recorded_now(store, pending, tool.name, context.origin)):
                record = asyncio.to_thread(store.record, pending, tool.name, context.origin)
                await asyncio.shield(record)

    async def _run_walked(
        self, store: CheckpointStore, tool: Tool, checked: Any, context: CallContext
    ) -> ToolOutcome:
        """Run a call that may change any file (toold.checkpoints.baseline): the tree is
        walked before and after it, and what it created, changed or deleted is one
        checkpoint; a background job's is recorded when the job ends. What undo could not
        cover is told once, after the call's text."""
        baseline = store.baseline
        if baseline is None:
            baseline = store.baseline = Baseline(
                store, SKIP_DIRS, IgnoreRules, IGNORE_FILES, _watcher(store.workspace)
            )
        begun = asyncio.ensure_future(asyncio.to_thread(baseline.begin))
        try:
            before = await asyncio.shield(begun)
        except asyncio.CancelledError:  # the walk goes on in its thread: its snapshot goes
            begun.add_done_callback(lambda done: _discard(baseline, done))
            raise
        except (OSError, CheckpointStoreError) as exc:  # the call runs; its result says so
            log.warning("%s: no checkpoint (%s)", tool.name, exc)
            outcome = await run_tool(tool, checked, context, self.runner)
            return _noted(outcome, f"no checkpoint of this call was recorded: {exc}")
        job: asyncio.Task[None] | None = None
        try:
            outcome = await run_tool(tool, checked, context, self.runner)
            job = _job_task(tool, context)
        finally:
            if job is None:  # also after a failure or a cancel: what changed can be undone
                finish = asyncio.to_thread(baseline.finish, before, tool.name, context.origin)
                _, note = await asyncio.shield(finish)
            else:
                note = None
                _recording.add(
                    task := asyncio.create_task(
                        _after_job(job, baseline, before, tool.name, context.origin)
                    )
                )
                task.add_done_callback(_recording.discard)
        # What undo could not cover is for the model to know; a person's own call (`toold
        # call bash`, an editor's command) keeps the command's output as it was: the
        # checkpoint records it either way (checkpoints/list's `uncovered`).
        return _noted(outcome, note if context.origin == "agent" else None)


_recording: set[asyncio.Task[None]] = set()
"""Background jobs' checkpoints waiting for their jobs to end (kept from collection)."""


def _discard(baseline: Baseline, begun: asyncio.Future[Snapshot]) -> None:
    """Let go of the snapshot taken for a call cancelled before it ran."""
    if not begun.cancelled() and begun.exception() is None:
        baseline.discard(begun.result())


def _noted(outcome: ToolOutcome, note: str | None) -> ToolOutcome:
    """The outcome with what undo could not cover after its text (a text result only)."""
    if note is None or not isinstance(outcome.content, str):
        return outcome
    return replace(outcome, content=f"{outcome.content}\n\n({note})".lstrip())


def _watcher(workspace: Path) -> Callable[[], Inotify] | None:
    """What lets a shell call skip the walk before it when nothing changed (an inotify
    instance of the baseline's own); None where inotify misses changes (a remote
    filesystem, or TOOLD_WATCH_POLLING set)."""
    if os.environ.get(POLLING_ENV) == "1" or remote_filesystem(workspace) is not None:
        return None
    return Inotify


def _changes_tree(tool: Tool, checked: Any) -> bool:
    """Whether the call runs a shell line or code, which may change any file (a dry run
    only reads)."""
    marks = tool.call_annotations(checked)
    return marks.shell or marks.runs_code


def _job_task(tool: Tool, context: CallContext) -> asyncio.Task[None] | None:
    """The running job the call started (background_run), if it still runs."""
    job = context.meta.get("job_id")
    runtime = getattr(tool, "runtime", None)
    if not isinstance(job, str) or not isinstance(runtime, ToolRuntime):
        return None
    background = runtime.background
    return background.ended(job) if background is not None else None


async def _after_job(
    job: asyncio.Task[None], baseline: Baseline, before: Snapshot, tool: str, origin: str
) -> None:
    """Record a background job's checkpoint once it has ended, however it ended."""
    await asyncio.wait([job])
    await asyncio.to_thread(baseline.finish, before, tool, origin)


def _refused(text: str, entry: dict[str, Any]) -> ToolOutcome:
    """A call refused before the guard judged it (arguments, files that cannot be named)."""
    entry["decision"] = "refused"
    return ToolOutcome(text, is_error=True, decision="refused", reason=text)


def _recorded(outcome: ToolOutcome) -> dict[str, Any]:
    """The audit line's account of an outcome: its kind, the rule and, once it ran, how."""
    fields: dict[str, Any] = {"verdict": outcome.decision, "reason": outcome.reason}
    if outcome.rule is not None:
        fields["rule"] = outcome.rule
    if outcome.ran:
        fields["outcome"] = "error" if outcome.is_error else "ok"
        fields["exitCode"] = outcome.exit_code
    if outcome.job_id is not None:
        fields["jobId"] = outcome.job_id
    return fields


def _agent_files(tool: Tool, context: CallContext) -> FileTracker | None:
    """The workspace's tracker when the call is an agent's and the check is on."""
    runtime = getattr(tool, "runtime", None)
    if not isinstance(runtime, ToolRuntime) or context.origin != "agent":
        return None
    return runtime.files if runtime.config.files.require_read_before_edit else None


async def _on_disk(inline: bool, work: Callable[..., Any], *args: Any) -> Any:
    """File work for a call: on the loop when the call itself runs there, else a thread."""
    return work(*args) if inline else await asyncio.to_thread(work, *args)


def _recorded_now(store: CheckpointStore, pending: Pending, tool: str, origin: str) -> bool:
    """Record a bounded call's checkpoint on the loop when the index's lock is free (never
    waiting on it there: another process may hold it); False when it is held, nothing
    recorded (a thread then waits for it)."""
    try:
        store.record(pending, tool, origin, wait=False)
    except IndexBusy:
        return False
    return True


def with_hook_output(content: Any, said: list[str]) -> str:
    """A result with what post hooks said after it (a structured result as JSON text)."""
    if isinstance(content, str):
        text = content
    else:
        text = json.dumps(content, ensure_ascii=False, default=str)
    return "\n\n".join([text, *said])
