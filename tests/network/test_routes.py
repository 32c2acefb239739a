"""Through bwrap and docker: the allowed hosts by HTTP and CONNECT, and no other route.

The probe runs inside the sandbox as any program would: urllib honouring the proxy
variables, hand-made proxy requests, a raw socket that ignores the variables, a
datagram to a resolver, the sandbox's own resolver.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from typing import Any

from tests.network.conftest import Hosts, Recorded, probe, run_bash

POLICY = {"allow": ["pypi.test", "*.wild.test", "both.test"], "deny": ["both.test"]}


def test_a_policy_reaches_exactly_the_allowed_hosts(
    runner_kind: str, workspace: Any, hosts: Hosts
) -> None:
    plain, tls = hosts.http.port, hosts.https.port
    (workspace / "ca.pem").write_bytes(hosts.cafile.read_bytes())
    audit = Recorded()
    plan = [
        ["http", "fetch", f"http://pypi.test:{plain}/simple/?q=1"],
        ["https", "fetch", f"https://pypi.test:{tls}/simple/", "GET", "ca.pem"],
        ["post", "fetch", f"http://pypi.test:{plain}/upload", "POST"],
        ["unlisted", "fetch", f"http://canary.test:{hosts.canary.getsockname()[1]}/"],
        ["unlisted_tls", "proxy", f"CONNECT canary.test:{tls} HTTP/1.1"],
        ["private", "fetch", f"http://files.wild.test:{plain}/"],
        ["deny_wins", "fetch", f"http://both.test:{plain}/"],
        ["raw", "raw", "127.0.0.1", plain],
        ["raw_canary", "raw", "127.0.0.1", hosts.canary.getsockname()[1]],
        ["dns_udp", "udp", "127.0.0.1", hosts.resolver.getsockname()[1]],
        ["resolvers", "resolvers"],
        ["resolve", "resolve", "pypi.test"],
        ["https_proxy", "env", "HTTPS_PROXY"],
        ["no_proxy", "env", "no_proxy"],
    ]
    got = probe(runner_kind, workspace, POLICY, plan, audit)
    assert got["http"] == f"200 hello pypi.test:{plain} GET /simple/?q=1", got
    assert got["https"] == f"200 hello pypi.test:{tls} GET /simple/", got
    assert got["post"] == f"200 hello pypi.test:{plain} POST /upload", got
    assert got["unlisted"] == "403 toold: canary.test not in execution.network.allow", got
    assert got["unlisted_tls"] == (
        "HTTP/1.1 403 toold: canary.test not in execution.network.allow"
    ), got
    # *.wild.test matches, but its address is loopback: only an exact name may reach one.
    assert got["private"].startswith("403 toold: files.wild.test resolves to 127.0.0.1, a"), got
    assert "loopback" in got["private"], got
    assert got["deny_wins"] == "403 toold: both.test denied by execution.network.deny both.test"
    # Ignoring the variables reaches nothing: the sandbox's 127.0.0.1 is its own.
    assert got["raw"].startswith("error") and got["raw_canary"].startswith("error"), got
    assert got["resolve"].startswith("error"), got
    assert " route" not in got["resolvers"], got
    assert got["https_proxy"] == "http://127.0.0.1:3128" and "127.0.0.1" in got["no_proxy"]
    assert hosts.canary_hits == [] and not hosts.resolver_heard()
    assert hosts.http.seen == [
        f"GET pypi.test:{plain}/simple/?q=1",
        f"POST pypi.test:{plain}/upload",
    ]
    decisions = {(e["host"], e["method"], e["decision"], e["rule"]) for e in audit.entries}
    assert ("pypi.test", "CONNECT", "allowed", "pypi.test") in decisions
    assert ("canary.test", "GET", "denied", "execution.network.allow") in decisions
    assert ("both.test", "GET", "denied", "both.test") in decisions
    assert ("files.wild.test", "GET", "denied", "private") in decisions
    assert all(e["event"] == "network" and isinstance(e["port"], int) for e in audit.entries)


def test_read_methods_refuse_a_post_and_any_tunnel(
    runner_kind: str, workspace: Any, hosts: Hosts
) -> None:
    plain, tls = hosts.http.port, hosts.https.port
    policy = {"allow": ["pypi.test"], "methods": "read"}
    plan = [
        ["get", "fetch", f"http://pypi.test:{plain}/a"],
        ["head", "fetch", f"http://pypi.test:{plain}/a", "HEAD"],
        ["post", "fetch", f"http://pypi.test:{plain}/a", "POST"],
        ["connect", "proxy", f"CONNECT pypi.test:{tls} HTTP/1.1"],
    ]
    got = probe(runner_kind, workspace, policy, plan)
    assert got["get"] == f"200 hello pypi.test:{plain} GET /a", got
    assert got["head"] == "200 ", got
    assert got["post"] == ("403 toold: POST pypi.test refused: execution.network.methods = read"), (
        got
    )
    assert got["connect"].startswith("HTTP/1.1 403 toold: CONNECT pypi.test refused"), got
    assert hosts.http.seen == [f"GET pypi.test:{plain}/a", f"HEAD pypi.test:{plain}/a"]


def _wheel(name: str) -> tuple[str, bytes]:
    """A minimal pure-Python wheel of ``name`` 1.0: its file name and bytes."""
    dist = f"{name}-1.0.dist-info"
    files = {
        f"{name}.py": b"",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in [*files, f"{dist}/RECORD"]).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in [*files.items(), (f"{dist}/RECORD", record)]:
            archive.writestr(path, data)
    return f"{name}-1.0-py3-none-any.whl", buffer.getvalue()


def test_pip_and_curl_reach_the_allowed_index_and_nothing_else(
    runner_kind: str, workspace: Any, hosts: Hosts
) -> None:
    """Real clients: pip download from an HTTPS index (CONNECT), curl by HTTP, HTTPS and
    SOCKS5 (socks5h://, the same port)."""
    tls, canary, plain = hosts.https.port, hosts.canary.getsockname()[1], hosts.http.port
    wheel, data = _wheel("toold_probe")
    digest = hashlib.sha256(data).hexdigest()
    hosts.https.files = {
        "/simple/toold-probe/": f'<a href="/files/{wheel}#sha256={digest}">{wheel}</a>'.encode(),
        f"/files/{wheel}": data,
    }
    (workspace / "ca.pem").write_bytes(hosts.cafile.read_bytes())
    index = f"https://pypi.test:{tls}/simple/"
    command = (
        f"python3 -m pip download --no-cache-dir --no-deps --disable-pip-version-check -q "
        f"--cert ca.pem -d dl --index-url {index} toold-probe; echo pip=$?; ls dl; "
        f"curl -sS --cacert ca.pem https://pypi.test:{tls}/x; echo; "
        f"curl -sS -o /dev/null -w 'unlisted=%{{http_code}}\\n' http://canary.test:{canary}/; "
        f"curl -sS --noproxy '*' -m 5 http://127.0.0.1:{canary}/ || echo direct=refused; "
        f"curl -sS -x socks5h://127.0.0.1:3128 http://pypi.test:{plain}/socks; echo; "
        f"curl -sS -x socks5h://127.0.0.1:3128 http://canary.test:{canary}/ || echo socks=refused"
    )
    out = run_bash(runner_kind, workspace, {"allow": ["pypi.test"]}, command)
    assert "pip=0" in out and wheel in out, out
    assert f"hello pypi.test:{tls} GET /x" in out and "unlisted=403" in out, out
    assert "direct=refused" in out and hosts.canary_hits == [], out
    assert f"hello pypi.test:{plain} GET /socks" in out and "socks=refused" in out, out
    assert (workspace / "dl" / wheel).read_bytes() == data
