"""The docker runner: each call in a fresh container running the worker.

The container gets the workspace bind-mounted read-write at its own path, a read-only
root filesystem with a private /tmp, no network unless ``execution.network``, the CPU,
memory and process limits from the configuration, no capabilities, and the daemon's
uid. It is removed when the call ends and killed if the call is cancelled.

No registry is needed: ``python -m toold.sandbox.docker build-image`` imports a tiny
skeleton image (``toold-sandbox:latest``) labelled ``org.toold.runtime=host``; for such
images the runner mounts this machine's /usr and Python installation read-only, so the
worker runs the very interpreter and toold the daemon runs. Any other image must bring
``python3`` with toold importable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
import logging
import os
import shutil
import socket
import sys
import tarfile
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold.sandbox.channel import SandboxError, WorkerLost, read_answer
from toold.sandbox.environment import sandbox_environment
from toold.sandbox.pool import WorkerHandle, WorkerSandbox, python_paths, under, worker_env
from toold.sandbox.repository import (
    git_layout,
    protected_binds,
    read_only_hint,
    vetting,
)
from toold.sandbox.toolchains import git_identity, toolchain_env, toolchain_paths

if TYPE_CHECKING:
    from toold.config import TooldConfig
    from toold.tools.base import Tool

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "toold-sandbox:latest"
RUNTIME_LABEL = "org.toold.runtime"
SKELETON_LABEL = "org.toold.skeleton"
BUILD_COMMAND = "python -m toold.sandbox.docker build-image"
ENGINE_HINT = (
    "start the Docker engine (as root: `dockerd &` or `systemctl start docker`; install it "
    "with apt-get install docker.io), or set execution.tool_runner to another runner"
)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KILL_TIMEOUT = 10.0
STDERR_TAIL = 2000
GITCONFIG = "/etc/toold/gitconfig"
"""Where a container finds the user's git identity (GIT_CONFIG_GLOBAL)."""


def engine_socket_problem() -> str | None:
    """Connect to a unix-socket engine ourselves first: docker-py leaks the socket of a
    failed connect, and says less about why it failed."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return None
    path = host.removeprefix("unix://")
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(5)
        try:
            probe.connect(path)
        except OSError as exc:
            return f"cannot connect to {path}: {exc.strerror or exc}"
    return None


def _client(timeout: float = 30.0) -> Any:
    import docker

    return docker.from_env(timeout=timeout, max_pool_size=16)


# --------------------------------------------------------------------------- the image


def _skeleton() -> bytes:
    """A root filesystem with only folders, the host's /usr symlinks and a passwd file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(name: str, kind: bytes, mode: int = 0o755, data: bytes = b"", to: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.linkname, info.size = kind, mode, to, len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for folder in ("etc", "usr", "proc", "dev", "sys", "root", "run", "var"):
            add(folder, tarfile.DIRTYPE)
        add("tmp", tarfile.DIRTYPE, 0o1777)
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            if os.path.islink(f"/{name}"):
                add(name, tarfile.SYMTYPE, to=os.readlink(f"/{name}").lstrip("/"))
        uid, gid = os.getuid(), os.getgid()
        passwd = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/nonexistent:/bin/sh\n"
        group = "root:x:0:\nnogroup:x:65534:\n"
        if uid not in (0, 65534):
            passwd += f"toold:x:{uid}:{gid}::/tmp:/bin/bash\n"
        if gid not in (0, 65534):
            group += f"toold:x:{gid}:\n"
        add("etc/passwd", tarfile.REGTYPE, 0o644, passwd.encode())
        add("etc/group", tarfile.REGTYPE, 0o644, group.encode())
    return buf.getvalue()


def build_image(tag: str = DEFAULT_IMAGE, client: Any = None) -> str:
    """Import the skeleton image under ``tag`` (offline, about a second); returns its id."""
    client = client or _client()
    repository, _, version = tag.rpartition(":")
    if not repository or "/" in version:
        repository, version = tag, "latest"
    skeleton = _skeleton()
    labels = f"{RUNTIME_LABEL}=host {SKELETON_LABEL}={hashlib.sha256(skeleton).hexdigest()[:16]}"
    client.api.import_image_from_data(
        skeleton,
        repository=repository,
        tag=version,
        changes=[f"LABEL {labels}", f"ENV PATH={PATH}"],
    )
    image_id: str = client.images.get(tag).id
    return image_id


def ensure_image(tag: str = DEFAULT_IMAGE, client: Any = None) -> None:
    """Build the skeleton image unless ``tag`` holds this machine's current skeleton."""
    import docker.errors

    client = client or _client()
    try:
        labels = client.images.get(tag).labels or {}
    except docker.errors.ImageNotFound:
        labels = {}
    if labels.get(SKELETON_LABEL) != hashlib.sha256(_skeleton()).hexdigest()[:16]:
        build_image(tag, client)


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
        while True:
            end = self.out.find(b"\n")
            if end >= 0:
                line = bytes(self.out[: end + 1])
                del self.out[: end + 1]
                return line
            if self.eof:
                rest = bytes(self.out)
                self.out.clear()
                return rest
            data = await loop.sock_recv(self.sock, 65536)
            if not data:
                self.eof = True
            self._split(data)

    def _split(self, data: bytes) -> None:
        self.raw += data
        while len(self.raw) >= 8:
            size = int.from_bytes(self.raw[4:8], "big")
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

    def __init__(self, api: Any, container_id: str, sock: socket.socket) -> None:
        self.api = api
        self.id = container_id
        self.sock = sock

    async def call(self, request: bytes) -> Any:
        """One exchange over the attach socket."""
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

    name = "docker"

    def __init__(self, workspace: Path, config: TooldConfig) -> None:
        super().__init__(workspace, config)
        self._client: Any = None
        self._host_runtime = False
        self._own = Path(tempfile.mkdtemp(prefix="toold-docker-"))
        """Stand-ins for missing .git parts and the gitconfig, mounted read-only."""
        weakref.finalize(self, shutil.rmtree, self._own, ignore_errors=True)
        self._identity = git_identity(self._own)
        self._layout = git_layout(workspace)
        self.activate()

    def stale(self) -> bool:
        """.git appeared or changed shape since this sandbox began: renew it (the warm
        container was made for the old layout)."""
        return self.problem is None and git_layout(self.workspace) != self._layout

    def renewed(self) -> DockerSandbox:
        """A new sandbox on the same settings, for the workspace as it is now."""
        return type(self)(self.workspace, self.config)

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """One call; a repository it makes where the mounts could not protect one is vetted."""
        return await vetting(self.workspace, self._layout, super().run_tool(tool, args))

    def explain(self, result: Any) -> Any:
        """A write the container refused says which setting widens it."""
        return read_only_hint(result, self.name)

    def check(self) -> str | None:
        """The engine must answer and the image must exist."""
        try:
            import docker.errors
        except ImportError:
            return "the docker Python package is missing: pip install docker"
        image = self.config.execution.docker_image
        problem = engine_socket_problem()
        if problem is not None:
            return f"the Docker engine is not reachable ({problem}): {ENGINE_HINT}"
        try:
            client = _client()
            client.ping()
        except Exception as exc:
            return f"the Docker engine is not reachable ({exc}): {ENGINE_HINT}"
        try:
            labels = client.images.get(image).labels or {}
        except docker.errors.ImageNotFound:
            client.close()
            if image == DEFAULT_IMAGE:
                return f"the Docker image {image} does not exist: build it with `{BUILD_COMMAND}`"
            return f"the Docker image {image} (execution.docker_image) does not exist here"
        except Exception as exc:
            client.close()
            return f"the Docker engine failed to inspect {image}: {exc}"
        self._client = client
        self._host_runtime = labels.get(RUNTIME_LABEL) == "host"
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
        host_config = self._client.api.create_host_config(
            mounts=mounts,
            network_mode="bridge" if execution.network else "none",
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
        return ContainerWorker(api, container_id, sock)

    def release(self) -> None:
        """Close the engine connection."""
        if self._client is not None:
            self._client.close()
        shutil.rmtree(self._own, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m toold.sandbox.docker build-image [--tag TAG]``."""
    parser = argparse.ArgumentParser(prog="python -m toold.sandbox.docker")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-image", help="build the sandbox image offline")
    build.add_argument("--tag", default=DEFAULT_IMAGE, help=f"image tag (default {DEFAULT_IMAGE})")
    args = parser.parse_args(argv)
    try:
        image_id = build_image(args.tag)
    except Exception as exc:
        print(f"toold: cannot build {args.tag}: {exc}; {ENGINE_HINT}", file=sys.stderr)
        return 1
    print(f"built {args.tag} ({image_id})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
