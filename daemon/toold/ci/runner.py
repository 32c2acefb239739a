"""Running a CI script: a sequence of steps (tool calls, requests of the contract, waits
for notifications), each with an optional fallback.

In behaviour-tree terms a script is a Sequence of ToolNodes; a step with a
``fallback`` is a Selector over the step and the Sequence of its fallback steps.
A rescued step counts as passed, and its content becomes the fallback's last result.
``continue_on_error`` lets the sequence go on after a failure, but the run still fails.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from toold.ci.catalogue import Catalogue, check_steps
from toold.ci.methods import matches
from toold.ci.references import Reference, UnresolvedReference, substitute
from toold.ci.script import Expect, Script, ScriptError, Step
from toold.ci.session import DaemonSession, SessionClosed

Status = Literal["passed", "failed", "rescued", "skipped"]
Message = dict[str, Any]


class Wire(Protocol):
    """What a run needs of a daemon session (a DaemonSession; raises SessionClosed)."""

    def request(self, method: str, params: Any = None) -> Message:
        """Send a request; its response message (``result`` or ``error``)."""

    def take_notification(
        self, predicate: Callable[[Message], bool], timeout: float
    ) -> Message | None:
        """The earliest notification since the start that ``predicate`` accepts, or None."""

    def seen(self) -> list[Message]:
        """Every notification received so far."""


class CallError(Exception):
    """The call itself went wrong (not the tool); ``fatal`` when no further call can work."""

    def __init__(self, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


@dataclass
class StepResult:
    """What one step did."""

    step: Step
    path: str
    """Where the step is in the script, e.g. ``steps[1].fallback[0]``."""
    depth: int
    """0 for the script's steps, 1 for their fallback steps, and so on."""
    status: Status = "skipped"
    duration: float = 0.0
    content: Any = None
    is_error: bool = False
    exit_code: int | None = None
    reason: str | None = None
    """Why the step failed (or was skipped)."""
    values: dict[str, Any] | None = None
    """What ``${steps.<id>.content}`` and ``.result`` give: the step's own, or those of
    the fallback that rescued it."""
    answered: bool = False
    """Whether the daemon answered the call (``content`` is real)."""

    @property
    def label(self) -> str:
        """The step's id, else its location."""
        return self.step.id or self.path


class Reporter(Protocol):
    """Told about each step as the run goes."""

    def finished(self, result: StepResult) -> None:
        """A step ran (passed or failed) or was skipped."""

    def rescued(self, result: StepResult) -> None:
        """A failed step was rescued by its fallback."""


@dataclass
class RunOutcome:
    """A whole run: every step that ran or was skipped, in order."""

    results: list[StepResult] = field(default_factory=list)
    ok: bool = True
    duration: float = 0.0


def text_of(content: Any) -> str:
    """The string form of a content: itself if a string, else its JSON."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def first_line(text: str, width: int = 120) -> str:
    """The first non-blank line, cut to ``width`` characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


def judge(reply: dict[str, Any], expect: Expect | None) -> str | None:
    """Why a result fails its step, or None when it passes."""
    content = reply.get("content")
    text = text_of(content)
    exit_code = reply.get("exitCode")
    failed = bool(reply.get("isError")) or bool(exit_code)
    line = first_line(text) or "no output"
    wanted_failure = expect.is_error if expect is not None else None
    if wanted_failure is None and failed:
        if reply.get("isError") or f"exit code {exit_code}" in line:
            return line
        return f"exit code {exit_code}: {line}"
    if wanted_failure is not None and failed != wanted_failure:
        got = "it failed" if failed else "it succeeded"
        return f"expected isError={str(wanted_failure).lower()}, but {got}: {line}"
    if expect is not None and expect.contains is not None and expect.contains not in text:
        return f"expected the content to contain {expect.contains!r}; got: {line}"
    if expect is not None and expect.checks_equals and content != expect.equals:
        want = first_line(text_of(expect.equals), 60)
        return f"expected the content to equal {want}; got: {first_line(text, 60)}"
    return None


class ScriptRunner:
    """Runs a script's steps through a daemon session, reporting each as it finishes."""

    def __init__(self, wire: Wire, reporter: Reporter | None = None) -> None:
        self._wire = wire
        self._reporter = reporter
        self._values: dict[str, dict[str, Any]] = {}
        self._aborted: str | None = None
        self.outcome = RunOutcome()

    def run(self, script: Script) -> RunOutcome:
        """Run every step; ``outcome.ok`` is False when a step failed unrescued."""
        started = time.perf_counter()
        self.outcome.ok = self._sequence(script.steps, "steps", 0)[0]
        self.outcome.duration = time.perf_counter() - started
        return self.outcome

    def _sequence(
        self, steps: list[Step], prefix: str, depth: int
    ) -> tuple[bool, dict[str, Any] | None]:
        """Run ``steps`` in order: (all passed, the last step's values)."""
        ok: bool = True
        value: dict[str, Any] | None = None
        for i, step in enumerate(steps):
            result = self._step(step, f"{prefix}[{i}]", depth)
            value = result.values
            if result.status == "failed":
                ok = False
                if self._aborted or not step.continue_on_error:
                    why = self._aborted or f"not run: {result.label} failed"
                    for j, rest in enumerate(steps[i + 1 :], start=i + 1):
                        self._skip(rest, f"{prefix}[{j}]", depth, why)
                    break
        return ok, value

    def _skip(self, step: Step, path: str, depth: int, why: str) -> None:
        result = StepResult(step, path, depth, "skipped", reason=why)
        self.outcome.results.append(result)
        self._report("finished", result)

    def _step(self, step: Step, path: str, depth: int) -> StepResult:
        result = StepResult(step, path, depth, "failed")
        self.outcome.results.append(result)
        started = time.perf_counter()
        try:
            expect = self._resolve_expect(step.expect)
            reply, whole = self._perform(step)
        except (UnresolvedReference, CallError) as exc:
            result.reason = str(exc)
            if isinstance(exc, CallError) and exc.fatal:
                self._aborted = f"not run: {exc}"
        else:
            result.answered = True
            result.content = reply.get("content")
            result.values = {"content": result.content, "result": whole}
            result.is_error = bool(reply.get("isError"))
            result.exit_code = reply.get("exitCode")
            result.reason = judge(reply, expect)
        result.duration = time.perf_counter() - started
        if result.reason is None:
            result.status = "passed"
        if step.id is not None and result.values is not None:
            self._values[step.id] = result.values
        self._report("finished", result)
        if result.status == "failed" and step.fallback and not self._aborted:
            rescued, value = self._sequence(step.fallback, f"{path}.fallback", depth + 1)
            if rescued:
                result.status, result.values = "rescued", value
                if step.id is not None and value is not None:
                    self._values[step.id] = value
                self._report("rescued", result)
        return result

    def _resolve_expect(self, expect: Expect | None) -> Expect | None:
        if expect is None:
            return None
        resolved = expect.model_copy()
        if expect.contains is not None:
            resolved.contains = substitute(expect.contains, self._lookup)
        if expect.checks_equals:
            resolved.equals = substitute(expect.equals, self._lookup)
        return resolved

    def _perform(self, step: Step) -> tuple[Message, Any]:
        """Run one step: (the reply judged as a tool result, the step's ``.result``)."""
        if step.wait_for is not None:
            return self._wait(step.wait_for, substitute(step.match, self._lookup), step.timeout)
        if step.method is not None:
            message = self._request(step.method, substitute(step.params, self._lookup))
            if "error" in message:  # an answer a step may expect (isError = true)
                return {"content": message["error"], "isError": True}, message["error"]
            result = message.get("result")
            if step.method == "tools/call" and isinstance(result, dict):
                return result, result  # judged as a tool step is: isError, exitCode
            return {"content": result, "isError": False}, result
        arguments = substitute(step.arguments, self._lookup)
        params = {"name": step.tool, "arguments": arguments, "origin": "user"}
        message = self._request("tools/call", params)
        if "error" in message:  # the call never reached the tool (unknown, bad arguments)
            raise CallError(str(message["error"].get("message", "the call failed")))
        result = message.get("result")
        return (result, result) if isinstance(result, dict) else ({"content": result}, result)

    def _request(self, method: str, params: dict[str, Any]) -> Message:
        try:
            return self._wire.request(method, params)
        except SessionClosed as exc:
            raise CallError(str(exc), fatal=True) from None

    def _wait(self, name: str, match: dict[str, Any], timeout: float) -> tuple[Message, Any]:
        """The first notification ``name`` since the run began whose params hold ``match``."""
        found = self._wire.take_notification(
            lambda m: m.get("method") == name and matches(m.get("params") or {}, match), timeout
        )
        if found is None:
            wanted = f" matching {json.dumps(match, ensure_ascii=False)}" if match else ""
            raise CallError(
                f"no {name} notification{wanted} within {timeout:g}s; "
                f"seen: {_seen(self._wire.seen(), name)}"
            )
        params = found.get("params")
        return {"content": params, "isError": False}, params

    def _lookup(self, reference: Reference) -> Any:
        values = self._values.get(reference.step)
        if values is None:
            raise UnresolvedReference(
                f"{reference.text}: step {reference.step!r} has no result "
                "(it did not run, or its call never reached the tool)"
            )
        value = values[reference.field]
        for key in reference.path:
            if isinstance(value, dict) and key in value:
                value = value[key]
            elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
                value = value[int(key)]
            else:
                got = first_line(text_of(value), 80)
                raise UnresolvedReference(f"{reference.text}: no {key!r} in {got}")
        return value

    def _report(self, event: Literal["finished", "rescued"], result: StepResult) -> None:
        if self._reporter is not None:
            getattr(self._reporter, event)(result)


def _seen(notifications: list[Message], name: str) -> str:
    """``2 jobs/finished ({...}; {...}), 1 window/showMessage`` or ``none``."""
    counts: dict[str, int] = {}
    for message in notifications:
        counts[str(message.get("method"))] = counts.get(str(message.get("method")), 0) + 1
    if not counts:
        return "no notification at all"
    parts = []
    for method, count in counts.items():
        part = f"{count} {method}"
        if method == name:
            shown = [
                first_line(text_of(m.get("params")), 100)
                for m in notifications
                if m.get("method") == name
            ]
            part += f" ({'; '.join(shown[:3])}{'; ...' if len(shown) > 3 else ''})"
        parts.append(part)
    return ", ".join(parts)


def check_tools(script: Script, catalogue: list[dict[str, Any]], source: str) -> None:
    """Refuse (ScriptError) unknown tools and arguments that fail their tool's schema."""
    problems = check_steps(script, Catalogue(catalogue))
    if problems:
        raise ScriptError(source, problems)


def run_in_daemon(
    script: Script, workspace: Path, reporter: Reporter | None = None, *, source: str = "script"
) -> RunOutcome:
    """Start a daemon for ``workspace`` and run ``script`` through it (tools as origin "user").

    Unknown tools and arguments that fail their schema are refused (ScriptError) before
    any step runs. Notifications are kept from the start, for the wait steps.
    """
    with DaemonSession(workspace) as session:
        session.initialize()
        listed = session.request("tools/list", {"format": "native"})
        if "error" in listed:
            raise SessionClosed(f"tools/list failed: {listed['error'].get('message')}")
        check_tools(script, listed["result"]["tools"], source)
        return ScriptRunner(session, reporter).run(script)
