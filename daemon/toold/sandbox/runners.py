"""Choosing the runner for a workspace from ``execution.tool_runner``.

``auto`` (the default) is bwrap where bubblewrap can build its sandbox here (the web
tools excepted: see toold.sandbox.bwrap.DefaultSandbox), else the subprocess runner with
a notice saying why and how to fix it. A runner named explicitly never falls back: an
explicit ``bwrap`` that cannot work fails every call, naming the fix.
"""

from __future__ import annotations

from pathlib import Path

from toold.config import NetworkPolicy, TooldConfig
from toold.sandbox.network.proxy import Recorder
from toold.sandbox.runner import EventListener, LocalSandbox, Sandbox, ToolRunner

AUTO = "auto"


def fallback_notice(problem: str) -> str:
    """What a session is told when ``auto`` could not use bwrap (``problem`` names the fix)."""
    return (
        f"tools run in the subprocess runner, not a sandbox (a worker process with an "
        f"allow-listed environment, but your user, files, network and sockets): the default "
        f"runner, bwrap, cannot work here: {problem}. Set execution.tool_runner in toold.toml "
        f'to choose a runner ("subprocess" keeps this one without this notice)'
    )


def _auto_sandbox(config: TooldConfig, workspace: Path, audit: Recorder | None) -> Sandbox:
    from toold.sandbox.bwrap import DefaultSandbox
    from toold.sandbox.forkserver import SubprocessSandbox

    bwrap = DefaultSandbox(workspace, config, audit)
    if bwrap.problem is None:
        return bwrap
    bwrap.release()  # nothing started: only its temporary /etc
    fallback = SubprocessSandbox(workspace, config)
    fallback.notice = fallback_notice(bwrap.problem)
    return fallback


UNENFORCED_NETWORK = (
    "execution.network's allow-list is not enforced here: the {runner} runner is not a "
    "sandbox, so commands reach the host's whole network. Use the bwrap or docker runner "
    "(execution.tool_runner) for the allow-list to hold"
)


def make_sandbox(config: TooldConfig, workspace: Path, audit: Recorder | None = None) -> Sandbox:
    """The sandbox ``execution.tool_runner`` names; it starts its warm workers at once.
    ``audit`` records the network proxy's decisions (an [execution.network] table). A
    network allow-list that the chosen runner cannot enforce is said in its notice."""
    sandbox = _make_sandbox(config, workspace, audit)
    if isinstance(config.execution.network, NetworkPolicy) and not getattr(
        sandbox, "enforces_network", False
    ):
        runner = "local" if isinstance(sandbox, LocalSandbox) else "subprocess"
        said = getattr(sandbox, "notice", None)
        warning = UNENFORCED_NETWORK.format(runner=runner)
        sandbox.notice = f"{said}; {warning}" if said else warning  # type: ignore[attr-defined]
    return sandbox


def _make_sandbox(config: TooldConfig, workspace: Path, audit: Recorder | None) -> Sandbox:
    kind = config.execution.tool_runner
    if kind == AUTO:
        return _auto_sandbox(config, workspace, audit)
    if kind == "subprocess":
        from toold.sandbox.forkserver import SubprocessSandbox

        return SubprocessSandbox(workspace, config)
    if kind == "bwrap":
        from toold.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(workspace, config, audit)
    if kind == "docker":
        from toold.sandbox.docker import DockerSandbox

        return DockerSandbox(workspace, config, audit)
    return LocalSandbox()


def make_runner(
    config: TooldConfig,
    workspace: Path,
    on_event: EventListener | None = None,
    audit: Recorder | None = None,
) -> ToolRunner:
    """The ToolRunner the configuration asks for (callable from any thread).

    A sandbox named explicitly that cannot work here (bwrap or Docker missing) still gives
    a runner: its calls fail with a message naming the fix, and ``runner.problem`` says it
    at once. Nothing silently runs unsandboxed; ``auto`` says so in ``runner.notice``.
    """
    return ToolRunner(make_sandbox(config, workspace.resolve(), audit), on_event)
