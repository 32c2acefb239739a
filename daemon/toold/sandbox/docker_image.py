"""The docker runner's image: built offline, on first use, and again when its inputs change.

No registry is needed. The image is a skeleton root filesystem (folders, the host's /usr
symlinks, passwd and group files) imported with a label and a PATH; for such an image
(``org.toold.runtime=host``) the runner mounts this machine's /usr and Python read-only,
so the worker runs the very interpreter and toold the daemon runs.

The label ``org.toold.inputs`` is a hash of everything the image is built from: the
skeleton's bytes, the instructions it is imported with, and toold's version. A tag of
the repository ``toold-sandbox`` that does not exist is built by the first call that needs
it, and an image toold built whose hash differs (another toold version, another uid) is
built again; images toold did not build are used as they are, never replaced.

Builds of one machine are serialised by an flock in the user's state folder (shared by every
engine of the user, and by a lock per path within the process); the image is looked at
again under the lock, so concurrent first calls build it once.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import logging
import os
import socket
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REPOSITORY = "toold-sandbox"
"""The repository of images toold builds itself when they are missing."""
DEFAULT_IMAGE = f"{REPOSITORY}:latest"
RUNTIME_LABEL = "org.toold.runtime"
INPUTS_LABEL = "org.toold.inputs"
VERSION_LABEL = "org.toold.version"
BUILD_COMMAND = "python -m toold.sandbox.docker build-image"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LOCK_NAME = "docker-image.lock"
ENGINE_HINT = (
    "start the Docker engine (as root: `dockerd &` or `systemctl start docker`; install it "
    "with apt-get install docker.io), or set execution.tool_runner to another runner"
)
MISSING = "missing"
OUTDATED = "out of date"


def connect(timeout: float = 30.0) -> Any:
    """A docker-py client for the engine DOCKER_HOST names."""
    import docker

    return docker.from_env(timeout=timeout, max_pool_size=16)


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


def split_tag(tag: str) -> tuple[str, str]:
    """``repo:version`` as its two parts (``latest`` when no version is given)."""
    repository, _, version = tag.rpartition(":")
    if not repository or "/" in version:
        return tag, "latest"
    return repository, version


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


def build_plan() -> tuple[bytes, list[str], str]:
    """The skeleton, the import instructions (labels included) and the inputs' hash."""
    import toold

    skeleton = _skeleton()
    changes = [f"LABEL {RUNTIME_LABEL}=host", f"ENV PATH={PATH}"]
    digest = hashlib.sha256()
    for part in (skeleton, "\n".join(changes).encode(), toold.__version__.encode()):
        digest.update(hashlib.sha256(part).digest())
    inputs = digest.hexdigest()[:16]
    changes.append(f"LABEL {INPUTS_LABEL}={inputs} {VERSION_LABEL}={toold.__version__}")
    return skeleton, changes, inputs


def inputs_hash() -> str:
    """The ``org.toold.inputs`` label an image built by this toold, here, carries."""
    return build_plan()[2]


def image_labels(client: Any, tag: str) -> dict[str, str] | None:
    """The labels of the image ``tag``, or None when there is no such image."""
    import docker.errors

    try:
        labels: dict[str, str] = client.images.get(tag).labels or {}
    except docker.errors.ImageNotFound:
        return None
    return labels


def wanted(tag: str, labels: dict[str, str] | None) -> str | None:
    """Why toold must build ``tag`` (MISSING or OUTDATED), or None: it is fine as it is, or
    it is not toold's to build (a missing image of another repository)."""
    if labels is None:
        return MISSING if split_tag(tag)[0] == REPOSITORY else None
    if labels.get(RUNTIME_LABEL) == "host" and labels.get(INPUTS_LABEL) != inputs_hash():
        return OUTDATED  # toold built it, from other inputs
    return None


def build_image(tag: str = DEFAULT_IMAGE, client: Any = None) -> str:
    """Import the skeleton image under ``tag`` (offline, well under a second); returns its id.

    Images toold built that no tag names any more (the one this replaces, or one a
    container still used at the last build) are removed once no container uses them.
    """
    import docker.errors

    client = client or connect()
    repository, version = split_tag(tag)
    skeleton, changes, _ = build_plan()
    client.api.import_image_from_data(skeleton, repository=repository, tag=version, changes=changes)
    image_id: str = client.images.get(tag).id
    with contextlib.suppress(docker.errors.APIError):
        client.images.prune(filters={"dangling": True, "label": f"{RUNTIME_LABEL}=host"})
    return image_id


def lock_path() -> Path:
    """The flock every engine of this user takes to build an image (in the user's state
    folder: one per user, whichever runtime folder the engines use)."""
    from toold.user_state import state_dir

    return state_dir() / LOCK_NAME


def ensure_image(tag: str = DEFAULT_IMAGE, client: Any = None) -> bool:
    """Build ``tag`` if it is missing or toold built it from other inputs (blocking); True
    when this call built it, False when it was current (another caller may just have built
    it). One build at a time per user: waiting callers then find it current."""
    from toold.storage import file_lock

    client = client or connect()
    with file_lock(lock_path()):
        labels = image_labels(client, tag)
        if labels is not None and wanted(tag, labels) is None:
            return False
        started = time.perf_counter()
        build_image(tag, client)
    log.info("built the Docker image %s in %.2f s", tag, time.perf_counter() - started)
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m toold.sandbox.docker build-image [--tag TAG]``."""
    parser = argparse.ArgumentParser(prog="python -m toold.sandbox.docker")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-image", help="build the sandbox image offline")
    build.add_argument("--tag", default=DEFAULT_IMAGE, help=f"image tag (default {DEFAULT_IMAGE})")
    args = parser.parse_args(argv)
    try:
        from toold.storage import file_lock

        with file_lock(lock_path()):
            image_id = build_image(args.tag)
    except Exception as exc:
        problem = engine_socket_problem()
        hint = f" ({problem}): {ENGINE_HINT}" if problem is not None else ""
        print(f"toold: cannot build {args.tag}: {exc}{hint}", file=sys.stderr)
        return 1
    print(f"built {args.tag} ({image_id})")
    return 0
