"""The configuration's schema: ``toold.toml``'s sections as pydantic models.

``TooldConfig`` and its sections (``[execution]``, ``[limits]``, ``[permissions]`` ...),
their defaults and the validators that refuse a wrong value with the fix. Reading the
file, applying the editor's overrides and reporting what is wrong is
toold.config_loading's.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from toold.errors import field_problems
from toold_protocol.errors import MAX_MESSAGE_BYTES

CONFIG_FILE = "toold.toml"

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an environment variable name: list names only, like "
            '"GIT_AUTHOR_NAME" (no "=value", no spaces)'
        )
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]
"""An environment variable's name (a name only: no "=value")."""


class _Section(BaseModel):
    # The attribute docstrings document the keys for readers of this file; pydantic's
    # use_attribute_docstrings would re-read this source at every start (about half
    # of building these models) for descriptions nothing reads.
    model_config = ConfigDict(extra="forbid")


def normalise_host(value: str) -> str:
    """A host name as compared: lower case, no final dot, IDNA (punycode) ASCII; an IP
    literal (``[::1]`` too) as ipaddress spells it. Raises ValueError for what is neither."""
    text = value.strip().rstrip(".").strip("[]").lower()
    try:
        return str(ipaddress.ip_address(text.split("%", 1)[0]))
    except ValueError:
        pass
    if _NUMERIC.fullmatch(text):
        try:  # 127.1, 0x7f.0.0.1, 2130706433, 0177.0.0.1: what a socket would reach
            return socket.inet_ntoa(socket.inet_aton(text))
        except OSError:
            pass
    try:
        text = text.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"{value!r} is not a valid host name ({exc})") from None
    if not _HOST_NAME.fullmatch(text):
        raise ValueError(f"{value!r} is not a valid host name")
    return text


def _network_entry(value: str) -> str:
    """An allow or deny entry: a name, ``*.`` and a name (its subdomains), an IP address
    or a CIDR network; normalised so spellings compare equal."""
    text = value.strip()
    if text.startswith("*."):
        return "*." + normalise_host(text[2:])
    if "/" in text:
        try:
            return str(ipaddress.ip_network(text.strip("[]"), strict=False))
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a CIDR network ({exc})") from None
    if "*" in text:
        raise ValueError(
            f'{value!r}: a wildcard stands only at the start, as in "*.example.org" '
            "(for every host, set execution.network = true)"
        )
    return normalise_host(text)


_NUMERIC = re.compile(r"[0-9a-fx.]+")
_HOST_NAME = re.compile(
    r"(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*"
)
NetworkEntry = Annotated[str, AfterValidator(_network_entry)]
"""A host entry of [execution.network], normalised (see normalise_host)."""


class NetworkPolicy(_Section):
    allow: list[NetworkEntry] = Field(default_factory=list)
    """Hosts sandboxed commands may reach through the proxy: "pypi.org" (that name only),
    "*.pythonhosted.org" (its subdomains, not itself), "10.1.2.3" or "10.0.0.0/8". A
    private, loopback or link-local address (cloud metadata) is refused unless an entry
    names the host exactly or is an address or network containing it."""
    deny: list[NetworkEntry] = Field(default_factory=list)
    """Never reached, whatever ``allow`` says (deny wins): same forms; a denied name also
    denies the addresses it resolves to."""
    methods: Literal["all", "read"] = "all"
    """read: only GET, HEAD and OPTIONS over plain HTTP, and no HTTPS tunnel (CONNECT),
    whose requests the proxy cannot see."""


class ExecutionConfig(_Section):
    tool_runner: Literal["auto", "local", "subprocess", "bwrap", "docker"] = "auto"
    """Where tools run: auto (bwrap where it works, else subprocess, saying why), the
    daemon (local), a worker process, bubblewrap or Docker; a named runner never falls back."""
    network: bool | NetworkPolicy = False
    """bwrap and docker: false (no network), true (the host's whole network: unsafe, its
    listening ports and cloud metadata included) or a table, ``[execution.network]``: only
    the hosts it allows, through toold's proxy (see toold.sandbox.network)."""
    warm_workers: int = Field(1, ge=0, le=8)
    """subprocess: idle worker processes kept ready (0 = a fresh process per call)."""
    docker_image: str = "toold-sandbox:latest"
    """docker: image the worker runs in (built locally; it needs python3 and bash)."""
    docker_cpus: float = Field(1.0, gt=0)
    """docker: CPU limit per container."""
    docker_memory: str = "512m"
    """docker: memory limit per container, in Docker's units."""
    pids_limit: int = Field(256, ge=16)
    """bwrap and docker: process-count limit inside the sandbox."""

    @field_validator("network", mode="before")
    @classmethod
    def _network(cls, value: object) -> object:
        """true, false or a table; a table's problems each name their key."""
        if isinstance(value, bool | NetworkPolicy):
            return value
        if not isinstance(value, dict):
            raise ValueError(
                "give true, false or a table: [execution.network] allow = [...], deny = [...], "
                'methods = "all" | "read"'
            )
        try:
            return NetworkPolicy.model_validate(value)
        except ValidationError as exc:
            problems = field_problems(exc, "execution.network")
            raise ValueError("; ".join(p.replace("Value error, ", "") for p in problems)) from None

    env_passthrough: list[EnvName] = Field(default_factory=list)
    """subprocess, bwrap and docker: names of the daemon's environment variables workers
    also get (e.g. ["GIT_AUTHOR_NAME"]); by default only PATH, LANG, LC_*, TERM and a
    private HOME and TMPDIR cross, so the daemon's secrets never reach a tool."""
    login_shell: bool = False
    """local: run every bash command as a login shell (bash -lc, the profile sourced each
    call). By default the login environment is captured once, at the first bash call
    that needs it (again after the execution settings change), and each command runs
    with bash -c in it (sandboxed runners never get it)."""


class LimitsConfig(_Section):
    bash_output_chars: int = Field(30_000, ge=1_000)
    """Shell output kept per call; head and tail survive around a marker."""
    max_file_size: int = Field(1_048_576, ge=1)
    """Largest file read_file reads whole, in bytes."""
    idle_timeout: float = Field(120.0, ge=0)
    """Seconds a bash or background_run command may print nothing before its process
    group is killed (output starts the window again); 0: only the call's ``timeout``,
    the hard ceiling, ends it. A call's own ``idle_timeout`` argument wins."""
    mcp_call_timeout: float = Field(600.0, gt=0)
    """Seconds a tool call to an MCP server an ACP client joined may take in all (the hard
    ceiling); within it, ``idle_timeout`` seconds without a progress notification end it."""
    max_message_bytes: int = Field(MAX_MESSAGE_BYTES, ge=1024)
    """Largest JSON-RPC frame the daemon accepts."""
    grep_max_matches: int = Field(1000, ge=1)
    """Matches grep returns at most."""
    max_finished_jobs: int = Field(100, ge=1)
    """Finished background jobs kept (records and logs in .toold/jobs); the oldest go first."""
    max_running_jobs: int = Field(64, ge=1)
    """Background jobs (and background subagents) running at once in the workspace; one
    more is refused, naming this key, until one ends."""
    max_running_jobs_per_session: int = Field(16, ge=1)
    """Of those, running at once that one session of the shared engine started."""
    shutdown_grace: float = Field(30.0, ge=0)
    """Seconds ``shutdown`` (or the end of stdin) waits for requests received before it;
    what is still running then is cancelled, logged, and the exit status becomes 1."""


class FilesConfig(_Section):
    allowed_extensions: list[str] = Field(default_factory=list)
    """Only these extensions (e.g. ".py") for read_file/write_file; empty means all."""
    max_content_size: int = Field(1_048_576, ge=1)
    """Largest content write_file accepts, in bytes."""
    create_dirs: bool = True
    """write_file creates missing parent folders."""
    fsync: bool = False
    """Tools' writes also fsync the file and its folder (survive a power loss; slower).

    Writes are atomic either way (temp file and rename): a crash leaves old or new.
    """
    require_read_before_edit: bool = True
    """An agent's edit or overwrite of an existing file is refused unless it read the file
    (read_file) or wrote it through toold, and it has not changed on disk since."""


class HttpConfig(_Section):
    timeout: float = Field(30.0, gt=0)
    """Seconds per request attempt."""
    retries: int = Field(3, ge=0, le=10)
    """Default retry count (a call may pass its own)."""
    max_response_length: int = Field(50_000, ge=100)
    """Characters of body kept; longer bodies are truncated with a notice."""
    allow_hosts: list[str] = Field(default_factory=list)
    """When set, only these may be requested: names (and their subdomains), addresses or
    CIDR networks (e.g. "10.0.0.0/8"), matched against every address the host resolves to."""
    deny_hosts: list[str] = Field(default_factory=list)
    """Never requested: names (with their subdomains and every address they resolve to;
    "localhost": all loopback addresses), addresses or CIDR networks."""
    block_private: bool = True
    """Refuse loopback, link-local (cloud metadata), private, shared, unique-local,
    multicast, unspecified and reserved addresses (checked after resolving, on every
    redirect) unless an http.allow_hosts network contains them or names the host exactly."""


class PythonReplConfig(_Section):
    timeout: float = Field(30.0, gt=0)
    """Seconds a snippet may run before its worker is killed."""
    max_output_length: int = Field(10_000, ge=100)
    """Characters of output kept; the rest is replaced by a truncation notice."""
    allowed_modules: list[str] | None = None
    """When set, the only modules snippets may import (top-level names): a convenience
    filter, not a security boundary (the bwrap and docker runners are)."""


class WebSearchConfig(_Section):
    timeout: float = Field(10.0, gt=0)
    """Seconds before a search gives up."""
    max_results: int = Field(5, ge=1, le=50)
    """Default number of results."""


class PermissionsConfig(_Section):
    mode: Literal["default", "auto", "plan", "bypass"] = "default"
    """default asks before risky calls; auto allows shell commands that are not dangerous;
    plan refuses every tool that is not read-only; bypass never asks."""
    allow: list[str] = Field(default_factory=list)
    """Rules like "bash(prefix:npm test*)" that let matching calls run without asking."""
    deny: list[str] = Field(default_factory=list)
    """Rules whose matching calls always ask (agents) or are refused (users)."""
    forbid: list[str] = Field(default_factory=list)
    """Rules (same syntax) whose matching calls never run: refused, never asked, in every mode."""
    ask_timeout: float = Field(120.0, gt=0)
    """Seconds to wait for the editor's answer before treating the call as denied."""


class AgentConfig(_Section):
    model: str | None = None
    """Model name (default: $TOOLD_MODEL, else toold's default)."""
    base_url: str | None = None
    """API base URL (default: $ANTHROPIC_BASE_URL, else Anthropic's)."""
    api_key_env: str = "ANTHROPIC_API_KEY"
    """Environment variable holding the API key; without a key agent tools are unavailable."""
    max_tokens: int = Field(4096, ge=1)
    """Largest reply per model call."""
    max_iterations: int = Field(50, ge=1)
    """Model calls one agent/run may make."""
    max_depth: int = Field(3, ge=0)
    """Deepest subagent nesting."""
    system_prompt: str = (
        "You are a coding agent working in the user's workspace through toold's tools. "
        "Prefer reading before changing; keep changes small; report what you did."
    )
    """The main agent's system prompt (subagents add their type's prompt)."""


class AcpConfig(_Section):
    use_client_fs: bool = True
    """``toold acp``: read_file and write_file go through the editor (unsaved buffers seen,
    edits tracked) when it offers fs/read_text_file and fs/write_text_file."""


class DaemonConfig(_Section):
    idle_timeout: float = Field(1800.0, gt=0)
    """Seconds the workspace's engine stays up with no session attached, no background job
    running and no teammate running; then it exits (the next client starts a new one)."""
    one_shot_idle_timeout: float | None = Field(None, ge=0)
    """Seconds the engine stays up idle instead, once a one-shot session ended (``toold
    call``, ``toold run``, a piped ``toold serve`` with no editor ``processId``) while no
    editor ever attached to it. Unset: 60, and 0 under ``CI=true`` (it exits as soon as its
    last session ends with nothing running). Never longer than ``idle_timeout``."""
    max_idle_engines: int = Field(8, ge=1)
    """Idle engines of this user (in one runtime folder) kept: when an engine starts, the
    least recently used idle ones beyond this exit. An engine with a session, a running job
    or a running teammate is not idle, and is never stopped so."""


def _regex(value: str) -> str:
    if value == "*":
        return value  # Claude Code's "every tool"
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(
            f"{value!r} is not a regular expression ({exc}): write a tool name such as "
            '"bash", alternatives such as "write_file|edit_file", or "" (or "*") for every tool'
        ) from None
    return value


class HookConfig(_Section):
    matcher: Annotated[str, AfterValidator(_regex)] = ""
    """A regular expression the tool's name must match in full; "" or "*": every tool."""
    command: str = Field(min_length=1)
    """A shell command (``bash -c``, in the workspace) that gets the call as JSON on stdin."""
    timeout: float = Field(60.0, gt=0, le=600)
    """Seconds before the hook is killed (a killed or failing pre hook makes the call ask)."""


class HooksConfig(_Section):
    pre_tool_use: list[HookConfig] = Field(default_factory=list)
    """Run before every matching call: exit 2 blocks it, JSON on stdout steers the guard."""
    post_tool_use: list[HookConfig] = Field(default_factory=list)
    """Run after every matching call that ran: stdout is added to the result."""


class SearchConfig(_Section):
    respect_gitignore: bool = True
    """glob, grep, glob_search and grep_search leave out what .gitignore, .ignore and
    .git/info/exclude ignore (a call's ``include_ignored`` brings it back)."""


class CheckpointsConfig(_Section):
    enabled: bool = True
    """Record what each file-changing tool call replaced (.toold/checkpoints), for undo."""
    max_bytes: int = Field(100 * 1024 * 1024, ge=1024)
    """Bytes of recorded contents kept; past it the oldest checkpoints are dropped. A
    shell call's undo also covers at most this many bytes of the workspace's files."""
    max_entries: int = Field(100_000, ge=1)
    """Files and folders a shell call's undo walks at most (bash, background_run,
    python_repl); past it the rest is not covered, and the call's result says so."""


DIAGNOSTICS_DEFAULTS = ("ruff", "ty", "basedpyright", "pyright", "typescript", "bash")
"""The language servers toold knows by name (toold.diagnostics.servers: their commands)."""


class DiagnosticsServerConfig(_Section):
    command: list[str] | None = None
    """The server's command line, e.g. ["ruff", "server"]; required for a server that is
    not one of the defaults (ruff, ty, basedpyright, pyright, typescript, bash)."""
    files: list[str] | None = None
    """Globs of the files it checks, e.g. ["*.py"]: a glob without "/" matches the file's
    name, one with "/" its path in the workspace; required with ``command`` for a new server."""
    enabled: bool = True
    """false: never start it (turns a detected default off)."""

    @model_validator(mode="after")
    def _complete(self) -> DiagnosticsServerConfig:
        if self.command is not None and not self.command:
            raise ValueError('command is empty: give a command line, e.g. ["ruff", "server"]')
        if self.files is not None and not self.files:
            raise ValueError('files is empty: give the globs it checks, e.g. ["*.py"]')
        return self


class DiagnosticsConfig(_Section):
    enabled: bool = True
    """After each file-changing call, report the diagnostics the edit introduced, from the
    workspace's language servers."""
    wait_ms: int = Field(2000, ge=0, le=60_000)
    """Milliseconds a file-changing call waits at most for its diagnostics; a server that has
    not answered by then is reported as pending, never as a failure."""
    idle_seconds: float = Field(600.0, gt=0)
    """A language server unused this long is stopped (started again on the next edit)."""
    servers: dict[str, DiagnosticsServerConfig] = Field(default_factory=dict)
    """Servers by name, over the defaults detected on PATH (ruff, ty or basedpyright or
    pyright, typescript, bash): a new name needs ``command`` and ``files``."""

    @model_validator(mode="after")
    def _known_or_complete(self) -> DiagnosticsConfig:
        for name, server in self.servers.items():
            if name not in DIAGNOSTICS_DEFAULTS and (
                server.command is None or server.files is None
            ):
                raise ValueError(
                    f"diagnostics.servers.{name}: a server that is not one of the defaults "
                    f"({', '.join(DIAGNOSTICS_DEFAULTS)}) needs both command and files, e.g. "
                    f'command = ["{name}", "--stdio"] and files = ["*.ext"]'
                )
        return self


class TooldConfig(_Section):
    """The whole configuration; every section optional."""

    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    files: FilesConfig = Field(default_factory=FilesConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    python_repl: PythonReplConfig = Field(default_factory=PythonReplConfig)
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    permissions: PermissionsConfig = Field(default_factory=PermissionsConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    acp: AcpConfig = Field(default_factory=AcpConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    checkpoints: CheckpointsConfig = Field(default_factory=CheckpointsConfig)
    diagnostics: DiagnosticsConfig = Field(default_factory=DiagnosticsConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
