"""Resource limits: output bombs, a 1 GB file, a large tree; the daemon stays responsive.

Memory is sampled from /proc while each call runs (peak resident growth must stay
under 100 MB); "answers other requests meanwhile" means a read_file sent right after a
long call is answered before that call is. The tree has 50,000 files
(``TOOLD_FULL_HARDENING=1``: 1,000,000). The fork bomb under bwrap (pids limit) is in
tests/sandbox/test_bwrap.py. The daemon's $HOME is an empty folder: ``bash -l`` then
reads no profile (see test_soak for why a profile that takes a lock is a hazard).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import WireClient
from tests.hardening.support import children, next_raw, rss_kib, scale, start_daemon
from tests.processes import serving_pid

TREE_FILES = scale(50_000, 1_000_000)
PEAK_LIMIT_KIB = 100 * 1024
OUTPUT_CAP = 30_000  # bash's cap, in characters (head and tail kept)


class PeakRss:
    """Samples a process's resident memory on a thread; ``growth`` is peak minus start."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = rss_kib(pid)
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_kib(self.pid))
            except (OSError, AssertionError):
                return
            self._stop.wait(0.005)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth(self) -> int:
        return self.peak - self.start


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", os.fspath(home))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "probe.txt").write_text("probe\n", encoding="utf-8")
    return ws.resolve()


@pytest.fixture
def daemon(workspace: Path) -> Iterator[WireClient]:
    client = start_daemon(workspace)
    yield client
    assert client.close() == 0, client.stderr()


def call_while_probing(
    client: WireClient, tool: str, args: dict[str, Any], probes: int = 3
) -> tuple[dict[str, Any], int]:
    """Run ``tool``; read_file probes sent just after it must be answered before it is."""
    params = {"name": tool, "arguments": args, "origin": "user"}
    big = client.request("tools/call", params, msg_id=f"big-{tool}")
    probe_params = {"name": "read_file", "arguments": {"file_path": "probe.txt"}, "origin": "user"}
    waiting = {client.request("tools/call", probe_params, msg_id=f"p{i}") for i in range(probes)}
    answered_first = 0
    while True:
        msg = next_raw(client, timeout=300)
        assert msg is not None, client.stderr()
        if msg.get("id") in waiting:
            assert msg["result"]["content"] == "1: probe", msg
            waiting.discard(msg["id"])
            answered_first += 1
        elif msg.get("id") == big:
            assert "result" in msg, msg
            for _ in waiting:  # the rest come after
                reply = next_raw(client, timeout=60)
                assert reply is not None and "result" in reply
            return msg["result"], answered_first


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("yes | head -c 500M", id="lines"),
        pytest.param("head -c 500M /dev/zero | tr '\\0' y", id="one-line"),
    ],
)
def test_an_output_bomb_is_capped_and_memory_stays_bounded(
    daemon: WireClient, command: str
) -> None:
    with PeakRss(serving_pid(daemon.proc.pid)) as rss:
        result, first = call_while_probing(daemon, "bash", {"command": command, "timeout": 120})
    content = result["content"]
    assert not result["isError"] and result.get("exitCode") == 0, str(result)[:300]
    assert len(content) <= OUTPUT_CAP + 200, len(content)
    assert "truncated" in content or "omitted" in content, content[OUTPUT_CAP // 2 - 100 :][:300]
    assert rss.growth < PEAK_LIMIT_KIB, f"peak RSS grew {rss.growth} KiB"
    assert first >= 1, "no other request was answered while the bomb ran"


def test_a_background_output_bomb_keeps_a_capped_log(daemon: WireClient, workspace: Path) -> None:
    from toold.jobs.manager import LOG_CAP_BYTES, OUTPUT_CAP

    with PeakRss(serving_pid(daemon.proc.pid)) as rss:
        text = daemon.tool("background_run", command="yes | head -c 300M", timeout=120)["content"]
        job_id = text.rsplit(" ", 1)[-1]
        finished = daemon.notification("jobs/finished", timeout=120)["params"]
    assert finished["jobId"] == job_id and finished["status"] == "done", finished
    job = daemon.call("jobs/get", {"jobId": job_id})
    assert len(job["output"]) <= OUTPUT_CAP + 200
    log = workspace / ".toold" / "jobs" / f"{job_id}.log"
    assert log.stat().st_size <= LOG_CAP_BYTES + (1 << 20)  # the cap, plus the chunk crossing it
    assert rss.growth < PEAK_LIMIT_KIB, f"peak RSS grew {rss.growth} KiB"


def test_a_timeout_kills_the_whole_process_group(daemon: WireClient) -> None:
    marker = f"toold-limit-{os.getpid()}"
    command = f"(exec -a {marker} sleep 300) & (exec -a {marker} sleep 300)"
    result = daemon.tool("bash", command=command, timeout=1)
    assert "timed out after 1 seconds" in result["content"], result

    def survivors() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if marker in Path(f"/proc/{entry}/cmdline").read_text(errors="replace"):
                        found.append(int(entry))
                except OSError:
                    continue
        return found

    deadline = time.monotonic() + 10
    while survivors() and time.monotonic() < deadline:
        time.sleep(0.05)  # the group gets SIGKILL; /proc entries vanish when reaped
    assert survivors() == []
    assert [c for c, state in children(serving_pid(daemon.proc.pid)).items() if state == "Z"] == []


# --------------------------------------------------------------------------- big files


@pytest.fixture
def one_gigabyte(workspace: Path) -> Path:
    big = workspace / "data" / "big.bin"
    big.parent.mkdir()
    with big.open("wb") as fh:
        fh.truncate(1 << 30)  # sparse: no disk needed, but 1 GB if anyone reads it all
    (big.parent / "small.txt").write_text("needle\n", encoding="utf-8")
    return big


def test_a_1_gb_file_is_refused_by_read_file_and_skipped_by_grep(
    daemon: WireClient, one_gigabyte: Path
) -> None:
    with PeakRss(serving_pid(daemon.proc.pid)) as rss:
        read = daemon.tool("read_file", file_path="data/big.bin")
        grep = daemon.tool("grep", pattern="needle", path="data")
        grep_file = daemon.tool("grep", pattern=".", path="data/big.bin")
        glob = daemon.tool("glob", pattern="*.bin")
    assert read["isError"] and "File too large: 1073741824 bytes" in read["content"], read
    assert grep["content"] == ["data/small.txt:1:needle"], grep
    assert grep_file["content"] == [], grep_file
    assert glob["content"] == ["data/big.bin"]
    assert rss.growth < PEAK_LIMIT_KIB, f"peak RSS grew {rss.growth} KiB"


def test_searches_and_metadata_tools_do_not_read_a_1_gb_file(
    daemon: WireClient, one_gigabyte: Path
) -> None:
    names = {t["name"] for t in daemon.call("tools/list", {})["tools"]}
    calls = [
        ("grep_search", {"query": "needle", "path": "data"}),
        ("file_info", {"path": "data/big.bin"}),
        ("str_replace", {"path": "data/big.bin", "old": "a", "new": "b"}),
        ("list_dir", {"path": "data"}),
    ]
    for name, args in calls:
        if name not in names:
            continue
        with PeakRss(serving_pid(daemon.proc.pid)) as rss:
            daemon.tool(name, **args)
        assert rss.growth < PEAK_LIMIT_KIB, f"{name}: peak RSS grew {rss.growth} KiB"


def test_edit_file_refuses_a_file_over_the_size_limit_without_reading_it(
    daemon: WireClient, workspace: Path
) -> None:
    big = workspace / "big.txt"
    with big.open("wb") as fh:
        fh.truncate(64 << 20)
    with PeakRss(serving_pid(daemon.proc.pid)) as rss:
        result = daemon.tool("edit_file", file_path="big.txt", old_text="a", new_text="b")
    assert result["isError"] and "too large" in result["content"].lower(), result
    assert rss.growth < 32 * 1024, f"peak RSS grew {rss.growth} KiB"


# --------------------------------------------------------------------------- a large tree


@pytest.fixture
def large_tree(workspace: Path) -> int:
    """TREE_FILES one-line files, 100 per folder; every 100th holds the needle."""
    made = 0
    for d in range(TREE_FILES // 100):
        folder = workspace / "tree" / f"d{d // 100}" / f"e{d % 100}"
        folder.mkdir(parents=True)
        for f in range(100):
            text = b"needle here\n" if f == 0 else b"hay\n"
            fd = os.open(folder / f"f{f}.txt", os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, text)
            os.close(fd)
            made += 1
    return made


def test_glob_and_grep_finish_over_a_large_tree_while_serving_others(
    daemon: WireClient, large_tree: int
) -> None:
    with PeakRss(serving_pid(daemon.proc.pid)) as rss:
        found, first_glob = call_while_probing(daemon, "glob", {"pattern": "*.txt", "path": "tree"})
        matches, first_grep = call_while_probing(
            daemon, "grep", {"pattern": "needle", "path": "tree", "output_mode": "count"}
        )
    assert not found["isError"] and len(found["content"]) == large_tree
    expected = min(large_tree // 100, 1000)  # grep stops at its match cap
    assert not matches["isError"] and len(matches["content"]) == expected
    assert first_glob >= 1 and first_grep >= 1, "requests waited for the tree walk"
    assert rss.growth < PEAK_LIMIT_KIB + large_tree // 4, f"peak RSS grew {rss.growth} KiB"
