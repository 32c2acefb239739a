"""Shell writes through a workspace symlink that leads outside are judged as outside.

The workspace holds ``link -> <outside>`` (absolute), ``dir/link2 -> ../../outside``
(nested, relative), ``l2 -> link`` (a link to a link) and ``inside -> dir`` (a link that
stays inside). Every writer the review found (``>``, ``>>``, ``2>``, ``&>``, tee, tee -a,
cp, cp -t, install, ln, ln -s, mv, rsync, touch, sed -i, rm, mkdir, chmod, dd of=) is
generated through each way out. Each spelling must be dangerous when the guard judges it
in the workspace, the same spelling through ``inside`` must not be (the judgement reads
where the path leads, not its text), and real bash, run unguarded on a copy, must change
something outside (so every spelling is a real write through the link). Through the real
daemon in auto mode against a user who answers Deny, the outside canary survives.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.conftest import DaemonFactory, GuardedDaemon, held
from toold.permissions.commands import analyse
from toold.permissions.paths import judging_in

WAYS_OUT = ("link", "dir/link2", "l2", "inside/link2", "link/../outside")
"""Folders that lead to the outside folder, spelled through each kind of link."""
WRITERS = (
    ("redirect >", "echo pwned > {d}/canary.txt"),
    ("redirect >>", "echo pwned >> {d}/canary.txt"),
    ("redirect 2>", "ls no-such-file 2> {d}/canary.txt"),
    ("redirect &>", "echo pwned &> {d}/canary.txt"),
    ("redirect >|", "echo pwned >| {d}/new.txt"),
    ("redirect first", "> {d}/canary.txt echo pwned"),
    ("redirect 1>>", "echo pwned 1>>{d}/canary.txt"),
    ("tee", "echo pwned | tee {d}/canary.txt"),
    ("tee -a", "echo pwned | tee -a {d}/canary.txt"),
    ("cp", "cp a {d}/"),
    ("cp to folder", "cp a {d}"),
    ("cp onto file", "cp a {d}/canary.txt"),
    ("cp -t", "cp -t {d} a"),
    ("cp --target-directory", "cp --target-directory={d} a"),
    ("install", "install -m 644 a {d}/"),
    ("install -t", "install -t {d} a"),
    ("ln -s", "ln -s a {d}/made"),
    ("ln", "ln a {d}/made"),
    ("mv", "mv a {d}/"),
    ("rsync", "rsync a {d}/"),
    ("touch", "touch {d}/canary.txt"),
    ("touch new", "touch {d}/new.txt"),
    ("sed -i", "sed -i s/canary/pwned/ {d}/canary.txt"),
    ("sed -i -e", "sed -i -e s/canary/pwned/ {d}/canary.txt"),
    ("rm", "rm {d}/canary.txt"),
    ("rm -f", "rm -f {d}/canary.txt"),
    ("mkdir", "mkdir {d}/made"),
    ("chmod", "chmod 600 {d}/canary.txt"),
    ("dd of=", "echo pwned | dd of={d}/canary.txt"),
    ("in a list", "true && echo pwned > {d}/canary.txt"),
    ("in a subshell", "(cd . && touch {d}/new.txt)"),
)
CASES = [(name, way, template.format(d=way)) for name, template in WRITERS for way in WAYS_OUT]
NOT_INSIDE = frozenset({"dd of="})
"""Writers the guard asks about wherever they point (dd with of= or if=)."""
SAMPLE = 60


def build(root: Path) -> tuple[Path, Path]:
    """The workspace with its links, and the outside folder with its canary."""
    ws, outside = root / "ws", root / "outside"
    (ws / "dir").mkdir(parents=True)
    outside.mkdir()
    (outside / "canary.txt").write_text("canary outside\n", encoding="utf-8")
    (ws / "a").write_text("file a\n", encoding="utf-8")
    (ws / "dir" / "canary.txt").write_text("canary inside\n", encoding="utf-8")
    add_links(ws, outside)
    return ws, outside


def add_links(ws: Path, outside: Path) -> None:
    """``link``, ``dir/link2``, ``l2`` and ``inside`` in ``ws`` (next to ``outside``)."""
    (ws / "dir").mkdir(exist_ok=True)
    (ws / "link").symlink_to(outside)
    (ws / "dir" / "link2").symlink_to(os.path.relpath(outside, ws / "dir"))
    (ws / "l2").symlink_to("link")
    (ws / "inside").symlink_to("dir")


def snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry: mode, mtime and content digest."""
    seen = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        seen[path.name] = (info.st_mode, info.st_mtime_ns, hashlib.sha256(data).hexdigest())
    return seen


def test_the_corpus_is_generated() -> None:
    assert len(CASES) == len(WRITERS) * len(WAYS_OUT) > 150


@pytest.fixture
def fresh_analyses() -> Iterator[None]:
    """No analysis cached lexically before, or judged in this workspace after, the test
    (while ``analyse`` caches by text alone; see the daemon test's mark)."""
    clear = getattr(analyse, "cache_clear", lambda: None)
    clear()
    yield
    clear()


@pytest.mark.usefixtures("fresh_analyses")
def test_every_writer_through_a_link_out_is_dangerous(tmp_path: Path) -> None:
    ws, _ = build(tmp_path.resolve())
    missed, inside_flagged = [], []
    counts: Counter[str] = Counter()
    with judging_in(ws):
        for _, way, text in CASES:
            dangerous = analyse(text).danger is not None
            counts[f"{way}: {'held' if dangerous else 'missed'}"] += 1
            if not dangerous:
                missed.append(text)
        for name, template in WRITERS:
            text = template.format(d="inside")  # leads to dir/: stays inside
            if name not in NOT_INSIDE and analyse(text).danger is not None:
                inside_flagged.append((text, analyse(text).danger))
    print(f"\n{len(CASES)} writes through links out: {dict(sorted(counts.items()))}")
    assert missed == []
    assert inside_flagged == []


def test_real_bash_writes_outside_with_every_spelling(tmp_path: Path) -> None:
    """Unguarded, each spelling does change the outside: the corpus is made of real writes."""
    missing = {
        program for program in ("rsync", "install", "sed", "dd") if not shutil.which(program)
    }
    runnable = [text for _, _, text in CASES if text.split()[0] not in missing]
    harmless = []
    for k, text in enumerate(runnable):
        ws, outside = build(tmp_path.resolve() / str(k))
        before = snapshot(outside)
        subprocess.run(["bash", "-c", text], cwd=ws, capture_output=True, timeout=30)
        if snapshot(outside) == before:
            harmless.append(text)
        shutil.rmtree(ws.parent)
    print(f"\nreal bash: {len(runnable) - len(harmless)}/{len(runnable)} wrote outside")
    assert len(runnable) > 120
    assert harmless == []


@pytest.fixture
def linked(daemon_for: DaemonFactory, tmp_path: Path) -> tuple[GuardedDaemon, Path]:
    """A daemon of its own in auto mode (its workspace gets the links), and the outside."""
    daemon = daemon_for("auto", extra_config="# symlink writes\n")
    outside = tmp_path.resolve() / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text("canary outside\n", encoding="utf-8")
    add_links(daemon.workspace, outside)
    return daemon, outside


def test_through_the_daemon_in_auto_mode_every_sample_asks_and_outside_survives(
    linked: tuple[GuardedDaemon, Path],
) -> None:
    daemon, outside = linked
    before = snapshot(outside)
    ran = []
    for _, _, text in random.Random(22).sample(CASES, SAMPLE):
        asked = len(daemon.client.asked)
        result = daemon.call("bash", {"command": text})
        changed = snapshot(outside) != before
        if not held(result) or len(daemon.client.asked) != asked + 1 or changed:
            ran.append((text, changed))
        daemon.damage()
    print(f"\ndaemon sample: {SAMPLE - len(ran)}/{SAMPLE} held")
    assert ran == []
