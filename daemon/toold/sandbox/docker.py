"""The docker runner: each call in a fresh container running the worker.

The container gets the workspace bind-mounted read-write at its own path, a read-only
root filesystem with a private /tmp, no network unless ``execution.network = true`` (a
table: toold's proxy alone, see toold.sandbox.network), the CPU,
memory and process limits from the configuration, no capabilities, and the daemon's
uid. It is removed when the call ends and killed if the call is cancelled.

No registry is needed: the first call that needs the image (``toold-sandbox:latest``)
builds it offline (toold.sandbox.docker_image), saying so in the call's progress, and
an image toold built from other inputs (another toold version) is built again. For such
images (``org.toold.runtime=host``) the runner mounts this machine's /usr and Python
installation read-only. Any other image must bring ``python3`` with toold importable.
``python -m toold.sandbox.docker build-image`` builds the image by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold.sandbox.channel import (
    READ_LIMIT,
    SandboxError,
    SandboxUnavailable,
    WorkerLost,
    read_answer,
    take_line,
)
from toold.sandbox.docker_image import (
    BUILD_COMMAND,
    ENGINE_HINT,
    MISSING,
    PATH,
    REPOSITORY,
    RUNTIME_LABEL,
    connect,
    engine_socket_problem,
    ensure_image,
    image_labels,
    main,
    split_tag,
    wanted,
)
from toold.sandbox.environment import sandbox_environment
from toold.sandbox.network import SOCKET_DIR
from toold.sandbox.network.proxy import Recorder
from toold.sandbox.network.route import ProxyRoute, proxy_environment
from toold.sandbox.pool import (
    WorkerHandle,
    WorkerPool,
    WorkerSandbox,
    python_paths,
    under,
    worker_env,
)
from toold.sandbox.repository import (
    close_pins,
    make_records,
    protected_binds,
    protected_layout,
    read_only_hint,
    vetting,
)
from toold.sandbox.toolchains import git_identity, toolchain_env, toolchain_paths
from toold.tools.context import report_progress

if TYPE_CHECKING:
    from toold.config import TooldConfig
    from toold.tools.base import Tool

log = logging.getLogger(__name__)

KILL_TIMEOUT = 10.0
STDERR_TAIL = 2000
GITCONFIG = "/etc/toold/gitconfig"
"""Where a container finds the user's git identity (GIT_CONFIG_GLOBAL)."""
REMOVED = "removed"
"""image_wanted when the image went while the runner ran."""
RETRY_BUILD_AFTER = 30.0
"""Seconds a failed image build is remembered: calls meanwhile fail at once with its cause."""


# --------------------------------------------------------------------------- mounts


def host_runtime_mounts(workspace: Path) -> list[str]:
    """Host folders a skeleton image needs, read-only: /usr, the loader cache, Python."""
    # Never /etc/ssl whole: ssl/private would be readable to a container running as root.
    wanted = ["/usr", "/etc/ld.so.cache", "/etc/alternatives", "/etc/ssl/certs"]
    wanted += [
        f"/{name}"
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
        if os.path.isdir(f"/{name}") and not os.path.islink(f"/{name}")
    ]
    wanted += python_paths() + toolchain_paths()
    ws = str(workspace)
    chosen: list[str] = []
    for path in sorted(set(wanted)):
        if not os.path.exists(path) or under(path, ws):
            continue
        if any(under(path, kept) for kept in chosen):
            continue
        chosen.append(path)
    return chosen


# --------------------------------------------------------------------------- one container


class _Frames:
    """Docker's multiplexed attach stream: 8-byte headers, then stdout or stderr bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.raw = bytearray()
        self.out = bytearray()
        self.err = bytearray()
        self.eof = False

    async def readline(self) -> bytes:
        loop = asyncio.get_running_loop()
        while (line := take_line(self.out, self.eof, "docker")) is None:
            data = await loop.sock_recv(self.sock, 65536)
            if not data:
                self.eof = True
            self._split(data)
        return line

    def _split(self, data: bytes) -> None:
        self.raw += data
        while len(self.raw) >= 8:
            size = int.from_bytes(self.raw[4:8], "big")
            if size > READ_LIMIT:
                raise WorkerLost(f"the docker worker sent a frame over {READ_LIMIT} bytes")
            if len(self.raw) < 8 + size:
                return
            stream, payload = self.raw[0], self.raw[8 : 8 + size]
            del self.raw[: 8 + size]
            if stream == 1:
                self.out += payload
            else:
                self.err = (self.err + payload)[-STDERR_TAIL:]


class ContainerWorker(WorkerHandle):
    """A started container whose worker waits for its call on the attached stdin."""

    who = "docker"

    def __init__(
        self, api: Any, container_id: str, sock: socket.socket, stream: Any = None
    ) -> None:
        self.api = api
        self.id = container_id
        self.sock = sock
        self.stream = stream
        """The file object docker-py wraps the socket in (it holds the socket open)."""

    async def call(self, request: bytes, shared: bool = False) -> Any:
        """One exchange over the attach socket (a container serves one call: never shared)."""
        loop = asyncio.get_running_loop()
        frames = _Frames(self.sock)
        self.sock.setblocking(False)
        try:
            await loop.sock_sendall(self.sock, request)
            return await read_answer(frames.readline, self.who)
        except WorkerLost as exc:
            tail = frames.err.decode(errors="replace").strip()
            raise WorkerLost(f"{exc}: {tail[-500:]}" if tail else str(exc)) from None
        except asyncio.CancelledError:
            await asyncio.wait_for(asyncio.to_thread(self.kill), KILL_TIMEOUT)
            raise
        finally:
            self.hang_up()

    def hang_up(self) -> None:
        """Close the attach stream: stdin ends, the worker exits, Docker removes the container."""
        # shutdown() acts at once; close() alone waits for the HTTP response's file objects.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        if self.stream is not None and self.stream is not self.sock:
            self.stream.close()  # its reference is what keeps the descriptor open

    def kill(self) -> None:
        """Kill the container now (it removes itself)."""
        import docker.errors

        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            self.api.remove_container(self.id, force=True)

    def discard(self) -> None:
        """Kill an unused container."""
        self.hang_up()
        self.kill()


class DockerSandbox(WorkerSandbox):
    """Each call in a fresh container."""

    enforces_network = True
    """An [execution.network] table holds here: the proxy is the only way out."""

    name = "docker"

    def __init__(self, workspace: Path, config: TooldConfig, audit: Recorder | None = None) -> None:
        super().__init__(workspace, config)
        self.audit = audit
        self._route = ProxyRoute.for_config(config, audit)
        """[execution.network] table: the proxy, its folder bound in, the forwarder."""
        self._client: Any = None
        self._host_runtime = False
        self.image_wanted: str | None = None
        """Why the image must be built before the first call (see docker_image.wanted)."""
        self._building = asyncio.Lock()
        self._build_failed: tuple[float, str] | None = None
        """Until when a failed build is not tried again, and its message."""
        self._built = False
        self._own = Path(tempfile.mkdtemp(prefix="toold-docker-"))
        """Stand-ins for missing .git parts and the gitconfig, mounted read-only."""
        weakref.finalize(self, shutil.rmtree, self._own, ignore_errors=True)
        self._identity = git_identity(self._own)
        make_records(workspace)  # the layout and the mounts hold the real ones
        self._pins: list[int] = []
        weakref.finalize(self, close_pins, self._pins)
        self._layout = protected_layout(workspace, self._pins)
        self.activate()

    def stale(self) -> bool:
        """.git appeared or changed shape since this sandbox began: renew it (the warm
        container was made for the old layout)."""
        return self.problem is None and protected_layout(self.workspace) != self._layout

    def renewed(self) -> DockerSandbox:
        """A new sandbox on the same settings, for the workspace as it is now."""
        return type(self)(self.workspace, self.config, self.audit)

    def deferred(self) -> bool:
        """An image toold must build first leaves the pool unstarted and no problem: the
        first call builds it (run_tool), off the event loop and with progress, rather than
        whoever made this sandbox."""
        return self.image_wanted is not None

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """One call; a repository it makes where the mounts could not protect one is vetted."""
        if self._pool is None and self.image_wanted is not None:
            await self._build_image()
        pool = self._pool
        try:
            return await vetting(self.workspace, self._layout, super().run_tool(tool, args))
        except Exception as exc:
            if not self._image_gone(exc, pool):
                raise
        # The call never started (its container could not be created): build the image
        # again and run the call in the new pool.
        await self._build_image()
        return await vetting(self.workspace, self._layout, super().run_tool(tool, args))

    def _image_gone(self, exc: Exception, pool: WorkerPool | None) -> bool:
        """``exc`` says toold's image went while this runner ran (docker rmi, an image
        prune): drop the pool whose containers cannot start and want the image again."""
        import docker.errors

        tag = self.config.execution.docker_image
        if not isinstance(exc, docker.errors.ImageNotFound) or split_tag(tag)[0] != REPOSITORY:
            return False
        log.warning("the Docker image %s was removed while toold ran: building it again", tag)
        with self._lock:
            if self._pool is pool and pool is not None:
                pool.close()
                self._pool = None
            if self._pool is None:
                self.image_wanted, self._built = REMOVED, False
        return True

    async def _build_image(self) -> None:
        """Build the image for the first call: once, however many calls wait for it here or
        in other engines; a failure is remembered for RETRY_BUILD_AFTER seconds."""
        tag = self.config.execution.docker_image
        async with self._building:
            reason = self.image_wanted
            if reason is None:
                return  # built while this call waited
            failed = self._build_failed
            if failed is not None and time.monotonic() < failed[0]:
                raise SandboxUnavailable(failed[1])
            why = {MISSING: "first use", REMOVED: "it was removed"}.get(
                reason, "built by another toold version"
            )
            report_progress(f"building the Docker image {tag} offline ({why})")
            started = time.perf_counter()
            try:
                built = await asyncio.to_thread(ensure_image, tag, self._client)
            except Exception as exc:
                message = (
                    f"cannot build the Docker image {tag} (execution.docker_image): "
                    f"{type(exc).__name__}: {exc}; build it by hand with "
                    f"`{BUILD_COMMAND} --tag {tag}` (toold tries again after "
                    f"{RETRY_BUILD_AFTER:g} s, or when execution.* changes)"
                )
                self._build_failed = (time.monotonic() + RETRY_BUILD_AFTER, message)
                log.error("%s", message)
                raise SandboxUnavailable(message) from None
            self.image_wanted, self._build_failed, self._built = None, None, True
            took = time.perf_counter() - started
            done = f"built in {took:.1f} s" if built else "built meanwhile by another toold"
            report_progress(f"the Docker image {tag} is ready ({done})")

    def explain(self, result: Any) -> Any:
        """A write the container refused says which setting widens it."""
        return read_only_hint(result, self.name)

    def check(self) -> str | None:
        """The engine must answer and the image must exist, or be toold's to build: then
        ``image_wanted`` says why."""
        try:
            import docker  # noqa: F401
        except ImportError:
            return "the docker Python package is missing: pip install docker"
        image = self.config.execution.docker_image
        problem = engine_socket_problem()
        if problem is not None:
            return f"the Docker engine is not reachable ({problem}): {ENGINE_HINT}"
        client = self._client or connect()
        try:
            client.ping()
        except Exception as exc:
            return f"the Docker engine is not reachable ({exc}): {ENGINE_HINT}"
        finally:
            self._client = client  # closed by release()
        try:
            labels = image_labels(client, image)
        except Exception as exc:
            return f"the Docker engine failed to inspect {image}: {exc}"
        need = wanted(image, labels)
        if labels is None and need is None:
            return f"the Docker image {image} (execution.docker_image) does not exist here"
        if need is not None and self._built:
            # run_tool built it, yet it is missing or of other inputs again: never loop.
            return f"the Docker image {image} is {need} right after toold built it"
        self.image_wanted = need
        self._host_runtime = labels is None or labels.get(RUNTIME_LABEL) == "host"
        return None

    def _container_args(self) -> dict[str, Any]:
        execution = self.config.execution
        ws = str(self.workspace)
        # -P (Python 3.11+): the working folder, the workspace, is never on sys.path.
        command = ["python3", "-P", "-m", "toold.sandbox.worker"]
        path = f"{os.path.dirname(sys.executable)}:{PATH}" if self._host_runtime else PATH
        # The image's PATH and locale, the allow-list and execution.env_passthrough.
        env = sandbox_environment(self.config, home="/tmp", tmpdir="/tmp", path=path)
        env.setdefault("LANG", "C.UTF-8")
        mounts = [{"Type": "bind", "Source": ws, "Target": ws, "ReadOnly": False}]
        mounts += [
            {"Type": "bind", "Source": b.source, "Target": b.target, "ReadOnly": b.read_only}
            for b in protected_binds(self.workspace, self._own)
        ]
        if self._identity is not None:
            source = str(self._identity)
            mounts.append({"Type": "bind", "Source": source, "Target": GITCONFIG, "ReadOnly": True})
            env["GIT_CONFIG_GLOBAL"] = GITCONFIG
        if self._host_runtime:
            command[0] = sys.executable
            env = worker_env({**toolchain_env(), **env})
            mounts += [
                {"Type": "bind", "Source": p, "Target": p, "ReadOnly": True}
                for p in host_runtime_mounts(self.workspace)
            ]
        if self._route is not None:  # the policy's only way out: the proxy's socket
            source = str(self._route.folder)
            mounts.append(
                {"Type": "bind", "Source": source, "Target": SOCKET_DIR, "ReadOnly": True}
            )
            command = self._route.command(command[0], command)
            env.update(proxy_environment())
        host_config = self._client.api.create_host_config(
            mounts=mounts,
            network_mode="bridge" if execution.network is True else "none",
            nano_cpus=int(execution.docker_cpus * 1e9),
            mem_limit=execution.docker_memory,
            pids_limit=execution.pids_limit,
            read_only=True,
            tmpfs={"/tmp": "rw,nosuid,nodev,mode=1777"},
            auto_remove=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
        )
        return {
            "image": execution.docker_image,
            "command": command,
            "stdin_open": True,
            "user": f"{os.getuid()}:{os.getgid()}",
            "working_dir": ws,
            "environment": env,
            "labels": {"org.toold.workspace": ws, "org.toold.daemon": str(os.getpid())},
            "host_config": host_config,
        }

    def spawn(self, warm: bool) -> ContainerWorker:
        """Create, attach and start a container (blocking)."""
        api = self._client.api
        container_id = api.create_container(**self._container_args())["Id"]
        try:
            attached = api.attach_socket(
                container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            sock = getattr(attached, "_sock", attached)
            if not isinstance(sock, socket.socket) or hasattr(sock, "context"):
                raise SandboxError("the docker runner needs a local (unix or plain TCP) engine")
            api.start(container_id)
        except BaseException:
            with contextlib.suppress(Exception):
                api.remove_container(container_id, force=True)
            raise
        return ContainerWorker(api, container_id, sock, attached)

    def release(self) -> None:
        """Close the engine connection."""
        if self._client is not None:
            self._client.close()
        if self._route is not None:
            self._route.close()
        close_pins(self._pins)
        shutil.rmtree(self._own, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
