"""Path escapes: no file tool reads or writes outside the workspace, whatever the path.

Canaries are planted around the workspace (a sibling folder, a prefix sibling
``ws_evil``, the parent, the daemon's ``$HOME``), each file holding a secret token and
an old mtime, each folder a ``ZZ-<token>`` entry. Every file tool gets every path of
``path_corpus.txt`` (hand-written, over the wire with a real daemon and its local
runner) and 10,000 generated ones (in-process through ToolSet and the local runner):
no result may show a canary's content, name or mtime, and a snapshot of everything
outside the workspace must come out unchanged (nothing written, created or removed).

The open-time race (a symlink swapped in between the check and the open) is tested on
``open_in_workspace`` directly; hard links, which no path check can see, have tests of
their own that state the decision.
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import random
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from tests.e2e.wire import WireClient
from tests.hardening.support import FULL, next_raw, scale, start_daemon
from tests.sandbox.conftest import bwrap_ready, docker_ready  # noqa: F401 (fixtures)
from tests.waiting import wait_until
from toold.config import TooldConfig
from toold.sandbox.paths import open_in_workspace, safe_path
from toold.sandbox.runners import make_runner
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet

CORPUS = Path(__file__).with_name("path_corpus.txt")
GENERATED = scale(10_000, 10_000)
RUNNERS = ("local", "subprocess", "bwrap", "docker")
DOCKER_SAMPLE = 40  # every 40th corpus path under docker at CI scale (all of them when FULL)
OLD_MTIME = 1_000_000_000  # 2001-09-09T01:46:40Z: file_info of a canary would show it
FILE_TOOLS = ("read_file", "write_file", "edit_file", "glob", "grep")
OPTIONAL_TOOLS = ("list_dir", "glob_search", "grep_search", "file_info", "str_replace")


@dataclass
class Layout:
    root: Path
    ws: Path
    outside: Path
    home: Path
    token: str

    @property
    def leaks(self) -> tuple[str, ...]:
        """Strings no result may contain."""
        return (self.token, "2001-09-09", "root:x:0:0")

    def placeholders(self) -> dict[str, str]:
        long_name = "n" * 300
        return {
            "{WS}": os.fspath(self.ws),
            "{PARENT}": os.fspath(self.root),
            "{OUTSIDE}": os.fspath(self.outside),
            "{HOME}": os.fspath(self.home),
            "{LONG_DOTDOT}": "../" * 2000 + "etc/passwd",
            "{LONG_NAME}": "x" * 10_000,
            "{LONG_DEEP}": "/".join([long_name] * 40) + "/f.txt",
            "{LONG_DEEP_ESCAPE}": "d/" * 3000 + "../" * 3001 + "outside/canary.txt",
            "{LONG_SLASHES}": "/" * 5000 + "etc/passwd",
        }


def _canary(path: Path, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"CANARY-{token} secret\nsecond line {token}\n", encoding="utf-8")
    os.utime(path, (OLD_MTIME, OLD_MTIME))


def build_layout(root: Path) -> Layout:
    """The workspace, its symlinks, and canaries all around it."""
    token = secrets.token_hex(8)
    ws, outside, home = root / "ws", root / "outside", root / "home"
    layout = Layout(root, ws, outside, home, token)
    for folder in (outside, home, root / "ws_evil", root):
        (folder / f"ZZ-{token}").mkdir(parents=True, exist_ok=True)
    for path in (
        outside / "canary.txt",
        outside / "canary2.md",
        outside / "nested" / "canary3.txt",
        root / "secret.txt",
        root / "ws_evil" / "canary.txt",
        home / ".bashrc",
        home / ".ssh" / "id_rsa",
    ):
        _canary(path, token)
    (ws / "sub" / "deep" / "deeper").mkdir(parents=True)
    (ws / "inside.txt").write_text("inside\n", encoding="utf-8")
    (ws / "sub" / "inside2.txt").write_text("inside two\n", encoding="utf-8")
    links = {
        "link_out": "../outside",
        "link_file": "../outside/canary.txt",
        "link_in": "sub",
        "chain1": "chain2",
        "chain2": "chain3",
        "chain3": "../outside",
        "dangling": "../outside/created_by_escape.txt",
        "abs_link": os.fspath(outside / "canary.txt"),
        "abs_dir": os.fspath(outside),
        "loop": "loop",
        "evil_link": "../ws_evil",
        "home_link": os.fspath(home),
        "etc_link": "/etc",
        "sub/up": "../..",
        "sub/deep/deeper/out": "../../../../outside",
    }
    for name, target in links.items():
        (ws / name).symlink_to(target)
    return layout


def snapshot(layout: Layout) -> dict[str, tuple[Any, ...]]:
    """Every entry outside the workspace: type, size, mtime, inode, links, content hash."""
    seen: dict[str, tuple[Any, ...]] = {}
    for top, dirs, files in os.walk(layout.root, followlinks=False):
        if Path(top) == layout.root:
            dirs.remove("ws")
        for name in dirs + files:
            path = os.path.join(top, name)
            info = os.lstat(path)
            extra: Any = None
            if stat.S_ISLNK(info.st_mode):
                extra = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                extra = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            seen[path] = (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino, extra)
    return seen


def restore_workspace(layout: Layout, keep: set[str]) -> None:
    """Remove what the tools created inside the workspace (never following a link)."""
    for top, dirs, files in os.walk(layout.ws, topdown=False, followlinks=False):
        for name in files + dirs:
            path = os.path.join(top, name)
            if path in keep:
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    (layout.ws / "inside.txt").write_text("inside\n", encoding="utf-8")
    (layout.ws / "sub" / "inside2.txt").write_text("inside two\n", encoding="utf-8")


def workspace_entries(layout: Layout) -> set[str]:
    found: set[str] = set()
    for top, dirs, files in os.walk(layout.ws, followlinks=False):
        found.update(os.path.join(top, n) for n in dirs + files)
    return found


# --------------------------------------------------------------------------- paths


def _decode(line: str) -> str:
    line = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), line)
    return line.replace("\\0", "\x00").replace("\\t", "\t")


def corpus(layout: Layout) -> list[str]:
    """The hand-written attempts with placeholders filled in."""
    paths = []
    for raw in CORPUS.read_text(encoding="utf-8").splitlines():
        if not raw or raw.startswith("# ") or raw == "#":
            continue
        path = _decode(raw)
        for key, value in layout.placeholders().items():
            path = path.replace(key, value)
        paths.append(path)
    return paths


PIECES = (
    "..", ".", "...", "", "sub", "link_out", "link_file", "link_in", "chain1", "dangling",
    "abs_dir", "loop", "evil_link", "home_link", "etc_link", "up", "outside", "ws",
    "ws_evil", "canary.txt", "secret.txt", "inside.txt", "new.txt", "nested", "deep",
    "deeper", "out", "~", "~root", "%2e%2e", "%2f", "\x00", "\\", "..\\", "C:", "\uff0e\uff0e",
    "\u2024\u2024", " ", "..;", "*", "etc", "passwd", "n" * 255,
)  # fmt: skip
SEPARATORS = ("/", "/", "/", "//", "\\", "/./")


def generated(layout: Layout, count: int, seed: int = 7) -> list[str]:
    """``count`` seeded paths built from the layout's names, dots and odd characters."""
    rng = random.Random(seed)
    prefixes = ("", "", "", "./", "/", "~/", f"{layout.ws}/", f"{layout.outside}/", "../")
    hand = corpus(layout)
    paths = []
    for _ in range(count):
        if rng.random() < 0.1:
            path = rng.choice(hand)
            cut = rng.randint(0, len(path))
            path = path[:cut] + rng.choice(("../", "/..", "./", "\x00", "link_out/")) + path[cut:]
        else:
            parts = [rng.choice(PIECES) for _ in range(rng.randint(1, 8))]
            path = rng.choice(prefixes) + "".join(
                part + rng.choice(SEPARATORS) for part in parts[:-1]
            )
            path += parts[-1] + rng.choice(("", "", "/", "/."))
        paths.append(path)
    return paths


def calls(path: str, tools: set[str], as_pattern: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """Every file tool's way of taking ``path`` (also as a glob pattern: a full walk)."""
    planned: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"file_path": path}),
        ("write_file", {"file_path": path, "content": "PWNED"}),
        ("write_file", {"file_path": path, "content": "PWNED", "append": True}),
        ("edit_file", {"file_path": path, "old_text": "CANARY", "new_text": "PWNED"}),
        ("glob", {"pattern": "*", "path": path}),
        ("glob", {"pattern": path}),
        ("grep", {"pattern": "CANARY", "path": path}),
        ("list_dir", {"path": path}),
        ("glob_search", {"pattern": "*", "path": path, "include_hidden": True}),
        ("grep_search", {"query": "CANARY", "path": path}),
        ("file_info", {"path": path}),
        ("str_replace", {"path": path, "old": "CANARY", "new": "PWNED"}),
    ]
    if not as_pattern:
        planned.remove(("glob", {"pattern": path}))
    return [(name, args) for name, args in planned if name in tools]


def leaked(layout: Layout, content: Any) -> str | None:
    text = content if isinstance(content, str) else repr(content)
    return next((marker for marker in layout.leaks if marker in text), None)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return build_layout(tmp_path.resolve())


def _tools_present(names: list[str]) -> set[str]:
    present = set(FILE_TOOLS) | {n for n in OPTIONAL_TOOLS if n in names}
    missing = set(FILE_TOOLS) - set(names)
    assert not missing, f"file tools missing: {missing}"
    return present


@pytest.fixture(params=RUNNERS)
def runner(request: pytest.FixtureRequest) -> str:
    """Every runner; bwrap and docker only where they can work (else skipped with why)."""
    if request.param in ("bwrap", "docker"):
        request.getfixturevalue(f"{request.param}_ready")
    return str(request.param)


@pytest.fixture
def daemon(layout: Layout, runner: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[WireClient]:
    """A daemon on the layout's workspace, running its tools through ``runner``."""
    monkeypatch.setenv("HOME", os.fspath(layout.home))
    options = {"config": {"execution": {"tool_runner": runner}}}
    client = start_daemon(layout.ws, initializationOptions=options)
    yield client
    assert client.close() == 0, client.stderr()


def test_corpus_has_at_least_200_hand_written_attempts(layout: Layout) -> None:
    paths = corpus(layout)
    assert len(paths) >= 200
    assert len(set(paths)) == len(paths), "duplicates in path_corpus.txt"


def test_corpus_over_the_wire_reads_and_writes_nothing_outside(
    layout: Layout, runner: str, daemon: WireClient
) -> None:
    tools = _tools_present([t["name"] for t in daemon.call("tools/list", {})["tools"]])
    before = snapshot(layout)
    paths = corpus(layout)
    if runner == "docker" and not FULL:
        paths = paths[::DOCKER_SAMPLE]  # a container per call: a sample at CI scale
    planned = [call for path in paths for call in calls(path, tools)]
    window = 64
    outcomes: dict[Any, tuple[str, dict[str, Any]]] = {}
    pending: set[Any] = set()
    sent = 0
    while sent < len(planned) or pending:
        while sent < len(planned) and len(pending) < window:
            name, args = planned[sent]
            params = {"name": name, "arguments": args, "origin": "user"}
            msg_id = daemon.request("tools/call", params, msg_id=f"c{sent}")
            outcomes[msg_id] = planned[sent]
            pending.add(msg_id)
            sent += 1
        msg = next_raw(daemon, timeout=30)
        assert msg is not None, daemon.stderr()
        if "method" in msg or msg.get("id") not in pending:
            continue
        pending.discard(msg["id"])
        assert "result" in msg, (outcomes[msg["id"]], msg)
        marker = leaked(layout, msg["result"]["content"])
        assert marker is None, (f"leaked {marker!r}", outcomes[msg["id"]], msg)
    assert snapshot(layout) == before
    assert daemon.proc.poll() is None


def test_generated_paths_through_the_local_runner_read_and_write_nothing_outside(
    layout: Layout,
) -> None:
    runtime = ToolRuntime(workspace=layout.ws, config=TooldConfig())
    toolset = ToolSet(BuiltinToolProvider(runtime).get_tools())
    tools = _tools_present(toolset.names())
    local = TooldConfig.model_validate({"execution": {"tool_runner": "local"}})
    runner = make_runner(local, layout.ws)  # the path checks alone, no sandbox behind them
    assert runner.name == "local"
    before = snapshot(layout)
    keep = workspace_entries(layout)
    paths = generated(layout, GENERATED)

    async def run_all() -> None:
        for start in range(0, len(paths), 250):
            for path in paths[start : start + 250]:
                for name, args in calls(path, tools, as_pattern=False):
                    outcome = await user_call(toolset, name, args, runner=runner)
                    marker = leaked(layout, outcome.content)
                    assert marker is None, (f"leaked {marker!r}", name, args, outcome)
            restore_workspace(layout, keep)
        await runner.close()

    asyncio.run(run_all())
    assert snapshot(layout) == before


# --------------------------------------------------------------------------- the open race


def _race_layout(root: Path) -> tuple[Path, Path, str]:
    ws = root / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "f").write_text("inside", encoding="utf-8")
    outside = root / "outside"
    outside.mkdir()
    token = f"CANARY-{secrets.token_hex(8)}"
    (outside / "f").write_text(token, encoding="utf-8")
    return ws.resolve(), outside.resolve(), token


def _read_fd(fd: int) -> str:
    with os.fdopen(fd, "r", encoding="utf-8") as fh:
        return fh.read()


def test_a_folder_swapped_for_a_symlink_after_the_check_is_refused(tmp_path: Path) -> None:
    ws, outside, token = _race_layout(tmp_path)
    checked = safe_path(ws, "d/f")  # the check passes: d is a real folder now
    os.rename(ws / "d", ws / "d_real")
    (ws / "d").symlink_to(outside)  # ... and then it is not
    # What a tool that opens the checked path would read:
    assert checked.read_text(encoding="utf-8") == token
    with pytest.raises(PermissionError, match="Symlink detected in path chain"):
        open_in_workspace(ws, "d/f")


def test_a_file_swapped_for_a_symlink_is_refused_for_reads_and_writes(tmp_path: Path) -> None:
    ws, outside, token = _race_layout(tmp_path)
    safe_path(ws, "d/f")
    (ws / "d" / "f").unlink()
    (ws / "d" / "f").symlink_to(outside / "f")
    for flags in (os.O_RDONLY, os.O_WRONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND | os.O_CREAT):
        with pytest.raises(PermissionError, match="Symlink detected"):
            open_in_workspace(ws, "d/f", flags)
    with pytest.raises(PermissionError, match="Symlink detected"):
        open_in_workspace(ws, "d/f", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    assert (outside / "f").read_text(encoding="utf-8") == token


def test_creating_parents_never_follows_a_symlink(tmp_path: Path) -> None:
    ws, outside, _ = _race_layout(tmp_path)
    (ws / "link").symlink_to(outside)
    with pytest.raises(PermissionError, match="Symlink detected"):
        open_in_workspace(ws, "link/new/f.txt", os.O_WRONLY | os.O_CREAT, create_parents=True)
    assert sorted(p.name for p in outside.iterdir()) == ["f"]
    fd = open_in_workspace(ws, "a/b/c.txt", os.O_WRONLY | os.O_CREAT, create_parents=True)
    os.close(fd)
    assert (ws / "a" / "b" / "c.txt").is_file()


def test_folders_open_too_for_dir_fd_based_writes(tmp_path: Path) -> None:
    ws, outside, _ = _race_layout(tmp_path)
    (ws / "link").symlink_to(outside)
    flags = os.O_RDONLY | os.O_DIRECTORY
    for path in ("", ".", "d", "d/"):
        fd = open_in_workspace(ws, path, flags)
        try:
            assert stat.S_ISDIR(os.fstat(fd).st_mode)
        finally:
            os.close(fd)
    with pytest.raises(PermissionError, match="Symlink detected"):
        open_in_workspace(ws, "link", flags)
    fd = open_in_workspace(ws, "new/dir/x.txt", os.O_WRONLY | os.O_CREAT, create_parents=True)
    os.close(fd)
    os.close(open_in_workspace(ws, "new/dir", flags))


def test_open_in_workspace_keeps_safe_paths_lexical_rules(tmp_path: Path) -> None:
    ws, _, _ = _race_layout(tmp_path)
    for path, message in (
        ("../outside/f", "escapes workspace"),
        ("/etc/passwd", "Absolute paths"),
        ("~/x", "Home-relative"),
        ("d/\x00f", "NUL bytes"),
    ):
        with pytest.raises(PermissionError, match=message):
            open_in_workspace(ws, path)
    assert _read_fd(open_in_workspace(ws, "d/../d/./f")) == "inside"


def _swap_forever(ws: str, outside: str, swaps: Any, stop: Any) -> None:
    """In another process: swap ``d`` (and ``d/f``) for symlinks to the outside."""
    d, real, alt = (os.path.join(ws, n) for n in ("d", "d_real", "d_alt"))
    while not stop.is_set():
        os.rename(d, real)
        os.symlink(outside, d)  # the folder is a link now
        os.unlink(d)
        os.rename(alt, d)  # a real folder whose f is a link
        os.rename(d, alt)
        os.rename(real, d)
        with swaps.get_lock():
            swaps.value += 1


def test_a_racing_swapper_never_gets_a_read_outside(tmp_path: Path) -> None:
    """Another process swaps links in and out while open_in_workspace keeps opening d/f."""
    ws, outside, token = _race_layout(tmp_path)
    (ws / "d_alt").mkdir()
    (ws / "d_alt" / "f").symlink_to(outside / "f")
    context = multiprocessing.get_context("spawn")
    swaps, stop = context.Value("i", 0), context.Event()
    swapper = context.Process(target=_swap_forever, args=(ws, outside, swaps, stop))
    swapper.start()
    counts = {"read": 0, "refused": 0, "missing": 0}
    try:
        wait_until(lambda: swaps.value > 0, "the swapper to start", 30)
        opens = 0
        # At least MIN_OPENS opens, and on until the swapper has swapped enough times too.
        while opens < scale(50_000, 1_000_000) or (swaps.value < 1000 and opens < 2_000_000):
            opens += 1
            try:
                fd = open_in_workspace(ws, "d/f")
            except PermissionError:
                counts["refused"] += 1
                continue
            except (FileNotFoundError, NotADirectoryError):
                counts["missing"] += 1
                continue
            assert _read_fd(fd) == "inside", "read the outside file through a swapped link"
            counts["read"] += 1
    finally:
        stop.set()
        swapper.join(timeout=30)
    assert swapper.exitcode == 0
    assert counts["read"] > 0 and counts["refused"] > 0, (swaps.value, counts)
    assert (outside / "f").read_text(encoding="utf-8") == token


# --------------------------------------------------------------------------- hard links


@pytest.fixture
def hard_linked(tmp_path: Path) -> tuple[Path, Path, ToolSet]:
    """ws/hard.txt is a second name of outside/secret.txt (same filesystem)."""
    ws, outside, _ = _race_layout(tmp_path)
    secret = outside / "secret.txt"
    secret.write_text("HARDLINK secret\n", encoding="utf-8")
    os.link(secret, ws / "hard.txt")
    runtime = ToolRuntime(workspace=ws, config=TooldConfig())
    return ws, secret, ToolSet(BuiltinToolProvider(runtime).get_tools())


def _invoke(toolset: ToolSet, name: str, **args: Any) -> Any:
    return asyncio.run(user_call(toolset, name, args)).content


def test_replacing_writes_break_a_hard_link_instead_of_writing_through_it(
    hard_linked: tuple[Path, Path, ToolSet],
) -> None:
    _ws, secret, toolset = hard_linked
    _invoke(toolset, "write_file", file_path="hard.txt", content="new\n")
    _invoke(toolset, "write_file", file_path="hard.txt", content="HARDLINK again\n")
    _invoke(toolset, "edit_file", file_path="hard.txt", old_text="again", new_text="edited")
    if "str_replace" in toolset:
        _invoke(toolset, "str_replace", path="hard.txt", old="edited", new="replaced")
    assert secret.read_text(encoding="utf-8") == "HARDLINK secret\n"
    assert os.stat(secret).st_nlink == 1  # the temp file + rename made a new inode


def test_an_append_does_not_write_through_a_hard_link(
    hard_linked: tuple[Path, Path, ToolSet],
) -> None:
    _ws, secret, toolset = hard_linked
    _invoke(toolset, "write_file", file_path="hard.txt", content="PWNED\n", append=True)
    assert secret.read_text(encoding="utf-8") == "HARDLINK secret\n"


def test_open_in_workspace_refuses_in_place_writes_to_hard_linked_files(
    hard_linked: tuple[Path, Path, ToolSet],
) -> None:
    ws, secret, _ = hard_linked
    with pytest.raises(PermissionError, match="2 hard links"):
        open_in_workspace(ws, "hard.txt", os.O_WRONLY | os.O_APPEND, single_link=True)
    os.close(open_in_workspace(ws, "hard.txt"))  # reading stays allowed (daemon/docs/tools.md)
    assert secret.read_text(encoding="utf-8") == "HARDLINK secret\n"
