"""The bwrap runner: the fork server, and so every worker, inside a bubblewrap sandbox.

The sandbox sees a minimal view: /usr, the root folders and a few /etc entries
read-only (passwd and group written for it; no shadow, sudoers or keys), the Python
runtime toold runs on read-only, the workspace read-write at its own path, a private
/tmp, its own /dev and /proc; no /home, /root, /run or /var, so no host socket. It runs
as an unprivileged user (uid 1000) in its own user namespace, even for a root daemon;
every namespace is unshared (the network too, unless ``execution.network = true``: under
a table its only way out is toold's proxy, see toold.sandbox.network), user
namespaces cannot be nested, no capabilities survive, it leads a new session and dies
with the daemon. Its environment is the allow-list of toold.sandbox.environment.

One sandbox serves the daemon's calls, each in a worker forked for it, so a call costs
a fork rather than a sandbox and an interpreter start (~250 ms); a worker kills
everything its call started (it is their subreaper) before it exits.

Process limit (``execution.pids_limit``, for the whole sandbox): a daemon running as a
normal user sets RLIMIT_NPROC inside the sandbox's user namespace, where it counts that
sandbox alone. The kernel never applies RLIMIT_NPROC to root, so a root daemon puts the
sandbox in a pids cgroup instead, when the pids controller is writable.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold.sandbox.environment import DEFAULT_PATH, sandbox_environment
from toold.sandbox.forkserver import ForkServerSandbox
from toold.sandbox.network import SOCKET_DIR
from toold.sandbox.network.proxy import Recorder
from toold.sandbox.network.route import ProxyRoute, proxy_environment
from toold.sandbox.pool import python_paths, under, worker_env
from toold.sandbox.repository import (
    close_pins,
    make_records,
    protected_binds,
    protected_layout,
    read_only_hint,
    vetting,
)
from toold.sandbox.toolchains import git_identity, toolchain_env, toolchain_paths

if TYPE_CHECKING:
    from toold.config import ExecutionConfig, TooldConfig
    from toold.tools.base import Tool

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    'bubblewrap) or set execution.tool_runner to another runner ("local" runs tools unsandboxed)'
)
PROBE_TIMEOUT = 15.0
UNBOUND_PIDS = (
    "execution.pids_limit ({limit}) does not bind the bwrap sandbox here: toold runs as "
    "root, for whom the kernel ignores RLIMIT_NPROC, and it cannot make a pids cgroup "
    "(no writable pids controller under /sys/fs/cgroup). Run toold as a normal user, or "
    "give it a writable pids cgroup controller"
)
"""A root daemon's sandbox without a pids cgroup: what each session is told."""
CGROUP_PREFIX = "toold-"
"""A root daemon's pids cgroups: ``/sys/fs/cgroup[/pids]/toold-<pid>-<random>``."""

SANDBOX_UID = SANDBOX_GID = 1000
"""The sandbox user inside its user namespace: never 0, whoever runs the daemon."""
SANDBOX_HOME = "/tmp"
"""HOME and TMPDIR inside: the sandbox's own tmpfs."""
ROOT_FOLDERS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""Besides /usr: bound when folders, recreated when symlinks (Debian's merged /usr)."""
ETC_ENTRIES = (
    "hosts", "hostname", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives",
    "ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
    "pki/tls/certs", "pki/ca-trust/extracted", "crypto-policies", "protocols", "services",
    "mime.types", "gitconfig", "inputrc", "bash.bashrc", "profile", "profile.d",
    "os-release", "debian_version", "locale.alias", "locale.conf", "magic", "magic.mime",
)  # fmt: skip
"""What of /etc a command needs; never shadow, gshadow, sudoers, ssh keys or ssl/private.
passwd and group are written for the sandbox (see sandbox_etc)."""


ETC_PREFIX = "toold-bwrap-etc-"
"""The sandbox's /etc folders in the temporary folder: ``toold-bwrap-etc-<pid>-<random>``."""


def etc_folder() -> Path:
    """A new private folder for a sandbox's /etc files, named by this process's pid. The
    first one a process makes removes those of this user's dead processes: a killed engine
    cannot remove its own, and the temporary folder must not grow with every kill."""
    _sweep_dead_etc_folders()
    return Path(tempfile.mkdtemp(prefix=f"{ETC_PREFIX}{os.getpid()}-"))


@functools.cache
def _sweep_dead_etc_folders() -> None:
    root, uid = tempfile.gettempdir(), os.getuid()
    try:
        entries = [e for e in os.scandir(root) if e.name.startswith(ETC_PREFIX)]
    except OSError:
        return
    for entry in entries:
        if not _of_a_dead_process(entry.name, ETC_PREFIX):
            continue  # an older toold's unnamed folder, or a live process's: not ours to judge
        try:  # only this user's own folder: /tmp is shared, and a link is never followed
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == uid:
            shutil.rmtree(entry.path, ignore_errors=True)


def _of_a_dead_process(name: str, prefix: str) -> bool:
    """Whether ``name`` is ``<prefix><pid>-...`` of a process that no longer runs."""
    if not name.startswith(prefix):
        return False
    pid, sep, _ = name.removeprefix(prefix).partition("-")
    return bool(sep) and pid.isdigit() and not _alive(int(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def sandbox_etc(folder: Path) -> Path:
    """Write the sandbox's passwd and group into ``folder``: root, the sandbox user, nobody;
    and its global gitconfig (the user's name and email only, see git_identity)."""
    folder.mkdir(parents=True, exist_ok=True)
    git_identity(folder)
    (folder / "passwd").write_text(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"sandbox:x:{SANDBOX_UID}:{SANDBOX_GID}:toold sandbox:{SANDBOX_HOME}:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    (folder / "group").write_text(f"root:x:0:\nsandbox:x:{SANDBOX_GID}:\nnogroup:x:65534:\n")
    return folder


def view_argv(workspace: Path, etc: Path) -> list[str]:
    """bwrap arguments building the sandbox's filesystem: the system read-only (/usr, the
    root folders, chosen /etc entries, the Python runtime toold runs on, the user's
    toolchains), the workspace read-write but for .git's config, hooks and info, a
    private /tmp, /dev and /proc. Nothing else of the host is visible: no /run, /var, no
    socket, nothing of /home or /root but the toolchains."""
    ws = str(workspace)
    argv = ["--ro-bind", "/usr", "/usr"]
    for name in ROOT_FOLDERS:
        path = f"/{name}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--perms", "0755", "--dir", "/etc"]
    argv += ["--ro-bind", str(etc / "passwd"), "/etc/passwd"]
    argv += ["--ro-bind", str(etc / "group"), "/etc/group"]
    entries = [*ETC_ENTRIES, *sorted(p.name for p in Path("/etc").glob("python3*"))]
    for entry in entries:
        argv += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    argv += ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]
    if (etc / "gitconfig").is_file():
        argv += ["--ro-bind", str(etc / "gitconfig"), f"{SANDBOX_HOME}/.gitconfig"]
    bound = ["/usr", ws]
    for path in [*python_paths(), *toolchain_paths()]:
        if not any(under(path, kept) for kept in bound):
            argv += ["--ro-bind", path, path]
            bound.append(path)
    argv += ["--bind", ws, ws]
    for bind in protected_binds(workspace, etc):  # after the workspace: over it
        argv += ["--ro-bind" if bind.read_only else "--bind", bind.source, bind.target]
    # The root bwrap builds the view on becomes read-only too (/tmp and the workspace stay).
    return [*argv, "--remount-ro", "/", "--chdir", ws]


@functools.cache
def supports(exe: str, option: str) -> bool:
    """This bubblewrap knows ``option`` (older releases refuse unknown options)."""
    try:
        done = subprocess.run([exe, "--help"], capture_output=True, timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option.encode() in done.stdout + done.stderr


def bwrap_argv(
    exe: str,
    workspace: Path,
    execution: ExecutionConfig,
    command: list[str],
    etc: Path,
    route: ProxyRoute | None = None,
) -> list[str]:
    """The bubblewrap command line that runs ``command`` sandboxed for ``workspace``;
    with a ``route`` (an [execution.network] table), its proxy folder is bound in and
    ``command`` starts behind the loopback forwarder."""
    argv = [exe]
    if route is not None:  # before the view, which ends by making / read-only
        argv += ["--ro-bind", str(route.folder), SOCKET_DIR]
        command = route.command(sys.executable, command)
    argv += view_argv(workspace, etc)
    argv += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
    if supports(exe, "--disable-userns"):  # bubblewrap 0.8+: no nested user namespaces
        argv.append("--disable-userns")
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    argv += ["--unshare-cgroup-try"]
    if execution.network is not True:  # a policy's only way out is its proxy
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--", *command]
    return argv


class PidsCgroup:
    """A pids cgroup for a root daemon's sandboxes (RLIMIT_NPROC does not bind root)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # A runner dropped without close() (a configuration change) still removes it.
        self._finalizer = weakref.finalize(self, _remove_cgroup, path)

    @classmethod
    def create(cls, limit: int) -> PidsCgroup | None:
        """A new cgroup limited to ``limit`` tasks, or None where that is not possible."""
        if os.geteuid() != 0:
            return None
        base = Path("/sys/fs/cgroup")
        if (base / "pids" / "cgroup.procs").exists():
            parent = base / "pids"  # cgroup v1
        elif "pids" in _read(base / "cgroup.subtree_control").split():
            parent = base  # cgroup v2
        else:
            return None
        _sweep_dead_cgroups(parent)
        # Random as well as the pid: a killed daemon's cgroup keeps its name, pids are reused.
        path = parent / f"{CGROUP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
        except OSError as exc:
            log.warning("no pids cgroup for the bwrap runner: %s", exc)
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started from inside the cgroup, so its first fork is already counted."""
        procs = str(self.path / "cgroup.procs")
        return ["/bin/sh", "-c", 'echo $$ > "$0" && shift && exec "$@"', procs, "-", *argv]

    def remove(self) -> None:
        """Kill what is left in the cgroup and delete it (blocking, bounded)."""
        self._finalizer()


@functools.cache
def _sweep_dead_cgroups(parent: Path) -> None:
    """Remove the empty cgroups of dead toold processes, once per process: a killed daemon
    cannot remove its own (its sandbox died with it), and the folder must not grow with
    every kill. A live process's cgroup, or one with a task in it, is left alone."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if _of_a_dead_process(entry.name, CGROUP_PREFIX):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)  # EBUSY while a task is in it


def _remove_cgroup(path: Path) -> None:
    for _ in range(100):
        for pid in _read(path / "cgroup.procs").split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # killed a moment ago, still exiting
    log.info("could not remove %s: still in use", path)


def _namespace_inits() -> list[int]:
    """This process's children that are bwrap as PID 1 of a namespace of their own."""
    found = []
    for task in Path("/proc/self/task").iterdir():
        for pid in _read(task / "children").split():
            status = _read(Path(f"/proc/{pid}/status")).splitlines()
            nspid = next((line.split()[1:] for line in status if line.startswith("NSpid:")), [])
            if status and status[0] == "Name:\tbwrap" and len(nspid) > 1 and nspid[-1] == "1":
                found.append(int(pid))
    return found


def reap_orphans(rounds: int = 50) -> None:
    """Reap what bubblewrap leaves to a subreaper (the engine is one): the PID 1 of a
    sandbox whose outer bwrap has exited is reparented here and would stay a zombie.
    Bounded: ``rounds`` checks 10 ms apart while one is still exiting."""
    for _ in range(rounds):
        left = []
        for pid in _namespace_inits():
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG) == (0, 0):
                    left.append(pid)
        if not left:
            return
        time.sleep(0.01)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


class BwrapSandbox(ForkServerSandbox):
    """Each call in a worker forked inside one bubblewrap sandbox."""

    enforces_network = True
    """An [execution.network] table holds here: the proxy is the only way out."""

    name = "bwrap"
    kills_through_server = True

    def __init__(self, workspace: Path, config: TooldConfig, audit: Recorder | None = None) -> None:
        super().__init__(workspace, config)
        self.audit = audit
        self._route = ProxyRoute.for_config(config, audit)
        self._argv: list[str] = []
        self._cgroup: PidsCgroup | None = None
        self._etc = etc_folder()
        weakref.finalize(self, shutil.rmtree, self._etc, ignore_errors=True)
        self._layout: tuple[str, ...] = ()
        self._pins: list[int] = []
        weakref.finalize(self, close_pins, self._pins)
        self._view: tuple[str, Path] = ("bwrap", self._etc)
        self.activate()

    def stale(self) -> bool:
        """.git appeared or changed shape since the view was built: the next call needs a
        fresh sandbox, whose view protects it (see toold.sandbox.repository)."""
        return self.problem is None and protected_layout(self.workspace) != self._layout

    def renewed(self) -> BwrapSandbox:
        """A new sandbox on the same settings, for the workspace as it is now."""
        return type(self)(self.workspace, self.config, self.audit)

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """One call; a repository it makes where the view could not protect one is vetted."""
        return await vetting(self.workspace, self._layout, super().run_tool(tool, args))

    def explain(self, result: object) -> object:
        """A write the sandbox refused says which setting widens it."""
        return read_only_hint(result, self.name)

    def check(self) -> str | None:
        """bwrap must exist and be able to build the sandbox here."""
        exe = shutil.which("bwrap")
        if exe is None:
            return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
        execution = self.config.execution
        etc = sandbox_etc(self._etc)
        make_records(self.workspace)  # the layout and the view hold the real ones
        close_pins(self._pins)
        self._layout = protected_layout(self.workspace, self._pins)  # before the view
        probe = bwrap_argv(exe, self.workspace, execution, ["true"], etc)
        try:
            done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not start ({exc}): {INSTALL_HINT}"
        finally:
            reap_orphans()
        if done.returncode != 0:
            reason = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
            return (
                f"bubblewrap cannot create its sandbox here ({reason}): allow unprivileged "
                "user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
                "an AppArmor profile for bwrap), or choose another execution.tool_runner"
            )
        server = super().server_argv()
        self._cgroup = PidsCgroup.create(execution.pids_limit)
        if self._cgroup is None and os.geteuid() == 0:
            self.notice = UNBOUND_PIDS.format(limit=execution.pids_limit)
        if self._cgroup is None:
            host_userns = os.stat("/proc/self/ns/user").st_ino
            server += ["--nproc", str(execution.pids_limit), "--host-userns", str(host_userns)]
        self._view = (exe, etc)
        self._argv = self.interpreter_argv(server)
        return None

    def interpreter_argv(self, argv: list[str]) -> list[str]:
        """``argv`` in a bubblewrap sandbox of this view (the fork server; python_repl's
        interpreter, in one of its own), inside the pids cgroup when there is one."""
        exe, etc = self._view
        wrapped = bwrap_argv(exe, self.workspace, self.config.execution, argv, etc, self._route)
        return wrapped if self._cgroup is None else self._cgroup.wrap(wrapped)

    def server_argv(self) -> list[str]:
        """bwrap running the fork server."""
        return self._argv

    def server_env(self) -> dict[str, str]:
        """The allow-list, with HOME and TMPDIR on the sandbox's own /tmp and this Python
        first on PATH (``python3`` is then the interpreter whose packages are bound)."""
        path = f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH') or DEFAULT_PATH}"
        base = sandbox_environment(self.config, home=SANDBOX_HOME, tmpdir=SANDBOX_HOME, path=path)
        if self._route is not None:
            base.update(proxy_environment())
        return worker_env({**toolchain_env(), **base})

    def release(self) -> None:
        """Stop the sandbox and remove its cgroup."""
        super().release()
        reap_orphans()
        if self._cgroup is not None:
            self._cgroup.remove()
        if self._route is not None:
            self._route.close()
        close_pins(self._pins)
        shutil.rmtree(self._etc, ignore_errors=True)


def reaches_the_web(tool: Tool) -> bool:
    """A web tool (http_request, a web search): the network is its whole job, its own
    [http] policy judges each address, and it runs no code of the model's."""
    marks = getattr(tool, "annotations", None)
    return bool(marks and marks.open_world and not marks.shell and not marks.runs_code)


class DefaultSandbox(BwrapSandbox):
    """``execution.tool_runner = "auto"`` where bwrap works: every call in the bwrap
    sandbox (no network unless ``execution.network``) but the web tools, which run in
    the daemon under the [http] policy, so they work by default. An explicit "bwrap"
    runs them in the sandbox too."""

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """The web tools in the daemon unless the network is on; the rest sandboxed."""
        if self.config.execution.network is not True and reaches_the_web(tool):
            return await tool.call(args)
        return await super().run_tool(tool, args)
