"""Real servers on 127.0.0.1 and sandboxed runners under an [execution.network] policy.

Names reach the test servers through the proxy's test resolver (TOOLD_NETWORK_TEST_HOSTS,
read by the proxy alone): never the public internet. Every test runs its probe (probe.py,
copied into the workspace) through the real bwrap and docker runners, in process.
"""

from __future__ import annotations

import asyncio
import datetime
import http.server
import json
import shutil
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from tests.sandbox.conftest import bwrap_ready, docker_ready  # noqa: F401 (fixtures)
from toold.config import TooldConfig
from toold.sandbox.network.policy import TEST_HOSTS
from toold.sandbox.runners import make_runner
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet

NAMES = {
    "pypi.test": "127.0.0.1",
    "files.wild.test": "127.0.0.1",
    "canary.test": "127.0.0.1",
    "xn--bcher-kva.test": "127.0.0.1",
    "both.test": "127.0.0.2",
}
"""The test names and their loopback addresses (a denied name denies its addresses too,
so the one both allowed and denied has an address of its own)."""


class Origin(http.server.ThreadingHTTPServer):
    """An HTTP origin on 127.0.0.1 that answers ``hello HOST METHOD PATH``."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[str] = []
        self.files: dict[str, bytes] = {}
        """Paths served as they are (a package index); anything else says hello."""
        self.port = self.server_address[1]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Origin

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.seen.append(f"{self.command} {self.headers['Host']}{self.path}")
        body = self.server.files.get(self.path)
        if body is None:
            body = f"hello {self.headers['Host']} {self.command} {self.path}".encode()
        self.send_response(200)
        if self.path.endswith("/"):
            self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for pypi.test (its own CA): cert and key files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pypi.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("pypi.test")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@dataclass
class Hosts:
    """The servers: plain and TLS origins, a TCP canary and a UDP 'resolver' canary."""

    http: Origin
    https: Origin
    cafile: Path
    canary: socket.socket
    resolver: socket.socket
    canary_hits: list[int] = field(default_factory=list)

    def resolver_heard(self) -> bool:
        """Whether any datagram reached the host-side resolver canary."""
        self.resolver.setblocking(False)
        try:
            self.resolver.recv(512)
        except BlockingIOError:
            return False
        return True


def _count_accepts(listener: socket.socket, hits: list[int]) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        hits.append(1)
        conn.close()


@pytest.fixture
def test_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test names resolve to their addresses (in the proxy only), nothing else does."""
    monkeypatch.setenv(TEST_HOSTS, ",".join(f"{name}={address}" for name, address in NAMES.items()))


@pytest.fixture
def hosts(tmp_path: Path, test_names: None) -> Iterator[Hosts]:
    """The servers, and the test names resolving to them."""
    cert, key = certificate(tmp_path)
    plain, tls = Origin(), Origin()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    tls.socket = context.wrap_socket(tls.socket, server_side=True)
    canary = socket.create_server(("127.0.0.1", 0))
    resolver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    resolver.bind(("127.0.0.1", 0))
    found = Hosts(plain, tls, cert, canary, resolver)
    threading.Thread(target=_count_accepts, args=(canary, found.canary_hits), daemon=True).start()
    for server in (plain, tls):
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield found
    for server in (plain, tls):
        server.shutdown()
        server.server_close()
    canary.close()
    resolver.close()


@pytest.fixture(params=["bwrap", "docker"])
def runner_kind(request: pytest.FixtureRequest) -> str:
    """Each sandboxing runner, where it can run (in CI: must)."""
    request.getfixturevalue(f"{request.param}_ready")
    kind: str = request.param
    return kind


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(Path(__file__).with_name("probe.py"), ws / "probe.py")
    return ws.resolve()


class Recorded:
    """The proxy's audit entries, as the audit log would get them."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def record(self, **entry: Any) -> None:
        """Keep one entry."""
        self.entries.append(entry)


def config(kind: str, network: Any) -> TooldConfig:
    """A configuration running tools in ``kind`` under ``network``."""
    return TooldConfig.model_validate(
        {"execution": {"tool_runner": kind, "network": network, "warm_workers": 0}}
    )


def run_bash(
    kind: str, workspace: Path, network: Any, command: str, audit: Recorded | None = None
) -> str:
    """``command``'s output, run by bash in a fresh ``kind`` sandbox under ``network``."""
    settings = config(kind, network)

    async def run() -> Any:
        runner = make_runner(settings, workspace, audit=audit)
        assert runner.problem is None, runner.problem
        toolset = ToolSet(BuiltinToolProvider(ToolRuntime(workspace, settings)).get_tools())
        try:
            arguments = {"command": command, "timeout": 120}
            return await user_call(toolset, "bash", arguments, runner=runner)
        finally:
            await runner.close()

    outcome = asyncio.run(run())
    return str(outcome.content)


def probe(
    kind: str, workspace: Path, network: Any, plan: list[list[Any]], audit: Recorded | None = None
) -> dict[str, str]:
    """Run ``plan`` (see probe.py) through bash in a fresh ``kind`` sandbox."""
    (workspace / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    out = run_bash(kind, workspace, network, "python3 probe.py plan.json", audit)
    answer: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    return answer
