"""The engine's secrets and its descriptors, out of reach of the commands it runs (issue 22).

The engine is started with no secret in its environment (``/proc/PID/environ`` shows
the environment a process was exec'd with, for its whole life), yet the model still
gets the key. Every long-running toold process is non-dumpable: a process of the same
identity cannot read its environ nor open its ``/proc/PID/fd/N`` (an editor's stdin
pipe written through there passed for the editor's requests). Root with its
capabilities bypasses that, so the suite (run as root) starts the toold processes and
the attacker as root without capabilities, the same unprivileged identity for both;
/root, where Python lives here, stays readable to them, which it is not to ``nobody``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.conftest import API_KEY, ModelServer
from tests.engine.support import Engines
from tests.waiting import wait_until

TOKEN = "ghp-canary-7f3a9d"
CLOUD = "aws-canary-1b8c4e"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="prctl and /proc are Linux's"
)


@pytest.fixture
def model() -> Iterator[ModelServer]:
    server = ModelServer()
    yield server
    server.close()


def test_the_engine_starts_without_secrets_and_the_model_still_gets_its_key(
    engines: Engines, workspace: Path, model: ModelServer
) -> None:
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "local"\n')
    engines.env.update(
        ANTHROPIC_API_KEY=API_KEY,
        ANTHROPIC_BASE_URL=model.url,
        GITHUB_TOKEN=TOKEN,
        AWS_SECRET_ACCESS_KEY=CLOUD,
        PLAIN_SETTING="plain-visible",
    )
    editor = engines.editor(workspace)
    engine = engines.status(workspace)["pid"]
    environ = Path(f"/proc/{engine}/environ").read_bytes()  # root may read it: nothing there
    assert f"TOOLD_RUNTIME_DIR={engines.runtime}".encode() in environ  # the read works
    for secret in (API_KEY, TOKEN, CLOUD, "plain-visible"):
        assert secret.encode() not in environ, secret

    model.text("hello from the model")
    assert editor.call("agent/run", {"prompt": "hi"})["text"] == "hello from the model"
    assert model.headers, "the model was never called with the key"

    shown = editor.tool("bash", command=f"env; {sys.executable} -c 'print(\"child ok\")'")
    content = str(shown["content"])
    assert "PLAIN_SETTING=plain-visible" in content and "child ok" in content, shown
    for secret in (API_KEY, TOKEN, CLOUD):
        assert secret not in content, secret  # not inherited by the commands it starts


UNPRIVILEGED = [
    "setpriv",
    "--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked",
    "--bounding-set=-all",
    "--inh-caps=-all",
]
"""Root without capabilities (as root; a plain user is unprivileged already)."""

ATTACKER = r"""
import json, os, sys
found = {}
for pid in map(int, sys.argv[1:]):
    seen = found[pid] = {}
    try:
        seen["environ"] = len(open(f"/proc/{pid}/environ", "rb").read())
    except OSError as exc:
        seen["environ"] = exc.errno
    try:
        os.close(os.open(f"/proc/{pid}/fd/0", os.O_WRONLY))
        seen["fd0"] = "opened"
    except OSError as exc:
        seen["fd0"] = exc.errno
print(json.dumps(found))
"""


def _unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to drop root's capabilities")
    return UNPRIVILEGED


def _exec_done(pid: int, name: bytes) -> bool:
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        return name in cmdline.read()


def test_a_process_of_the_same_identity_cannot_reach_into_toold(
    engines: Engines, workspace: Path, tmp_path: Path
) -> None:
    """The engine, an editor's ``toold serve`` relay and a private ``toold serve
    --no-daemon`` refuse a same-identity reader; a plain process of that identity (the
    control) is read and its stdin opened, so the attack itself works."""
    as_them = _unprivileged()
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "local"\n')
    env = {**engines.env, "GITHUB_TOKEN": TOKEN}
    started = subprocess.run(
        [*as_them, sys.executable, "-m", "toold", "daemon", "start"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 0, started.stderr
    engine = engines.status(workspace)["pid"]
    serve = [*as_them, sys.executable, "-m", "toold", "serve", "--workspace", str(workspace)]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "env": env}
    relay = subprocess.Popen(serve, **pipes)  # type: ignore[call-overload]
    private = subprocess.Popen([*serve, "--no-daemon"], **pipes)  # type: ignore[call-overload]
    control = subprocess.Popen([*as_them, "sleep", "60"], stdin=subprocess.PIPE, env=env)
    try:
        for proc, name in ((relay, b"serve"), (private, b"serve"), (control, b"sleep")):
            wait_until(lambda p=proc, n=name: _exec_done(p.pid, n), f"{name!r} to start")
        wait_until(lambda: engines.status(workspace)["sessions"], "the relay's session")
        (tmp_path / "attacker.py").write_text(ATTACKER)
        targets = [engine, relay.pid, private.pid, control.pid]
        attack = subprocess.run(
            [*as_them, sys.executable, str(tmp_path / "attacker.py"), *map(str, targets)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert attack.returncode == 0, attack.stderr
        found = {int(pid): seen for pid, seen in json.loads(attack.stdout).items()}
    finally:
        for proc in (relay, private, control):
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
    assert found[control.pid] == {"environ": found[control.pid]["environ"], "fd0": "opened"}
    assert found[control.pid]["environ"] > 0, found
    for pid in (engine, relay.pid, private.pid):
        assert found[pid] == {"environ": 13, "fd0": 13}, (pid, found)  # EACCES both
