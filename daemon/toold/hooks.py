"""Hooks: the user's own commands run before and after tool calls (``[[hooks.*]]``).

Same contract as Claude Code's PreToolUse/PostToolUse command hooks where they overlap,
so existing hook scripts work: the hook gets the call as JSON on stdin (``hook_event_name``,
``tool_name``, ``tool_input``, ``cwd``, plus toold's ``origin`` and ``workspace``, and for
post hooks ``tool_response``); a pre hook that exits 2 blocks the call with its stderr as
the tool's error; one that exits 0 may print ``{"decision": "allow" | "deny" | "ask",
"reason": ...}`` (or Claude Code's ``hookSpecificOutput.permissionDecision``) to steer
the guard; a post hook's stdout (exit 0) or stderr (exit 2) is added to the result.

A pre hook that cannot be understood — it fails, times out, prints a decision toold
does not know, or prints more than OUTPUT_LIMIT characters (its decision may be in the
dropped middle) — makes the call ask (fail closed: what a policy hook meant is unknown).
The gateway (toold.gateway) runs hooks for every front end.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from toold.config import HookConfig, HooksConfig
from toold.sandbox.process import run_command

log = logging.getLogger(__name__)

BLOCK_EXIT = 2
"""The exit status with which a hook blocks a call (pre) or speaks to the model (post)."""
OUTPUT_LIMIT = 10_000
"""Characters of a hook's stdout or stderr kept."""

Steer = Literal["allow", "deny", "ask"]
_DECISIONS: dict[str, Steer] = {
    "allow": "allow",
    "deny": "deny",
    "ask": "ask",
    "approve": "allow",  # Claude Code's older names
    "block": "deny",
}


@dataclass(frozen=True)
class PreHookVerdict:
    """What the pre hooks said about a call: blocked (with the message), or a steer."""

    blocked: str | None = None
    steer: Steer | None = None
    reason: str = ""


def matches(hook: HookConfig, tool: str) -> bool:
    """Whether ``hook`` applies to calls of ``tool`` (its matcher matches the whole name)."""
    if hook.matcher in ("", "*"):
        return True
    return re.fullmatch(hook.matcher, tool) is not None


def _payload(event: str, tool: str, args: Any, origin: str, root: Path, **extra: Any) -> bytes:
    data = {
        "hook_event_name": event,
        "tool_name": tool,
        "tool_input": args,
        "cwd": str(root),
        "workspace": str(root),
        "origin": origin,
        **extra,
    }
    return json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")


async def _run(hook: HookConfig, payload: bytes, root: Path) -> tuple[int | None, str, str, bool]:
    """Run one hook: (exit status or None when killed, stdout, stderr, whether stdout
    was cut at OUTPUT_LIMIT)."""
    env = {**os.environ, "TOOLD_WORKSPACE": str(root)}
    result = await run_command(
        ["bash", "-c", hook.command],
        cwd=root,
        timeout=hook.timeout,
        output_limit=OUTPUT_LIMIT,
        env=env,
        stdin=payload,
    )
    code = None if result.timed_out else result.returncode
    cut = result.out.total > OUTPUT_LIMIT
    return code, result.stdout.strip(), result.stderr.strip(), cut


def _decision(stdout: str) -> tuple[Steer | None, str] | None:
    """The steer a hook printed: (decision, reason); (None, "") for no JSON decision;
    None when it printed a decision toold does not understand."""
    if not stdout.startswith("{"):
        return None, ""
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    specific = data.get("hookSpecificOutput")
    if isinstance(specific, dict) and "permissionDecision" in specific:
        raw, reason = specific.get("permissionDecision"), specific.get("permissionDecisionReason")
    else:
        raw, reason = data.get("decision"), data.get("reason")
    if raw is None:
        return None, ""
    steer = _DECISIONS.get(raw) if isinstance(raw, str) else None
    if steer is None:
        return None
    return steer, str(reason or "")


async def run_pre_hooks(
    hooks: Sequence[HookConfig], tool: str, args: Any, origin: str, root: Path
) -> PreHookVerdict:
    """Run every matching pre hook in order; the first block or deny ends the run.

    Of the steers, deny wins, then ask, then allow (allow only when every hook that
    spoke said allow).
    """
    matching = [hook for hook in hooks if matches(hook, tool)]
    if not matching:
        return PreHookVerdict()
    payload = _payload("PreToolUse", tool, args, origin, root)
    steers: list[tuple[Steer, str]] = []
    for hook in matching:
        code, stdout, stderr, cut = await _run(hook, payload, root)
        if code == BLOCK_EXIT:
            why = stderr or f"blocked by the hook {hook.command!r}"
            return PreHookVerdict(blocked=f"Blocked by hook: {why}")
        if code != 0:
            what = "timed out" if code is None else f"exited {code}"
            log.warning("pre_tool_use hook %r %s: %s", hook.command, what, stderr[:500])
            steers.append(("ask", f"the hook {hook.command!r} {what}"))
            continue
        if cut:
            steers.append(
                (
                    "ask",
                    f"the hook {hook.command!r} printed more than {OUTPUT_LIMIT} "
                    "characters: its decision cannot be read",
                )
            )
            continue
        decided = _decision(stdout)
        if decided is None:
            steers.append(
                (
                    "ask",
                    f"the hook {hook.command!r} printed a decision toold "
                    "does not know (allow, deny or ask)",
                )
            )
        elif decided[0] is not None:
            steers.append((decided[0], decided[1] or f"the hook {hook.command!r}"))
        if steers and steers[-1][0] == "deny":
            return PreHookVerdict(steer="deny", reason=steers[-1][1])
    for wanted in ("ask", "allow"):
        found = next((reason for steer, reason in steers if steer == wanted), None)
        if found is not None:
            return PreHookVerdict(steer=wanted, reason=found)
    return PreHookVerdict()


async def run_post_hooks(
    hooks: Sequence[HookConfig],
    tool: str,
    args: Any,
    response: Any,
    origin: str,
    root: Path,
) -> list[str]:
    """Run every matching post hook; what each says to the model (stdout on exit 0,
    stderr on exit 2), in order."""
    matching = [hook for hook in hooks if matches(hook, tool)]
    if not matching:
        return []
    payload = _payload("PostToolUse", tool, args, origin, root, tool_response=response)
    said: list[str] = []
    for hook in matching:
        code, stdout, stderr, _ = await _run(hook, payload, root)
        if code == 0 and stdout:
            said.append(stdout)
        elif code == BLOCK_EXIT and stderr:
            said.append(stderr)
        elif code not in (0, BLOCK_EXIT):
            what = "timed out" if code is None else f"exited {code}"
            log.warning("post_tool_use hook %r %s: %s", hook.command, what, stderr[:500])
    return said


class Hooks:
    """A workspace's configured hooks, as the gateway runs them (``config`` is replaced
    when toold.toml is reloaded; every gateway of the workspace shares this object)."""

    def __init__(self, root: Path, config: HooksConfig) -> None:
        self.root = root
        self.config = config

    async def before(self, tool: str, args: Any, origin: str) -> PreHookVerdict:
        """The pre hooks' verdict on a call (nothing to say when none matches)."""
        return await run_pre_hooks(self.config.pre_tool_use, tool, args, origin, self.root)

    async def after(self, tool: str, args: Any, response: Any, origin: str) -> list[str]:
        """What the post hooks add to a call's result."""
        hooks = self.config.post_tool_use
        return await run_post_hooks(hooks, tool, args, response, origin, self.root)
