"""FairExecutor: each session holds at most its share of the pool; the rest wait without
a thread, in order, and a cancelled waiting item never runs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from toold.fairness import FairExecutor, RunnerShares, caller


@pytest.fixture
def pool() -> Iterator[FairExecutor]:
    executor = FairExecutor(threads=4, share=2)
    yield executor
    executor.shutdown(wait=True)


def _as(session: int | None, executor: FairExecutor, fn: object, *args: object) -> object:
    token = caller.set(session)
    try:
        return executor.submit(fn, *args)  # type: ignore[arg-type]
    finally:
        caller.reset(token)


def test_one_session_holds_at_most_its_share_and_others_still_run(pool: FairExecutor) -> None:
    release = threading.Event()
    hogs = [_as(1, pool, release.wait, 30) for _ in range(6)]
    # Session 1 has two running and four waiting: session 2 gets a thread at once.
    other = _as(2, pool, lambda: "answered")
    assert other.result(timeout=5) == "answered"  # type: ignore[attr-defined]
    assert pool.waiting(1) == 4
    release.set()
    assert all(h.result(timeout=5) is True for h in hogs)  # type: ignore[attr-defined]
    assert pool.waiting(1) == 0


def test_waiting_items_start_in_order() -> None:
    pool = FairExecutor(threads=4, share=1)
    release = threading.Event()
    seen: list[int] = []
    blocker = _as(1, pool, release.wait, 30)
    queued = [_as(1, pool, seen.append, n) for n in range(5)]
    release.set()
    for future in [blocker, *queued]:
        future.result(timeout=5)  # type: ignore[attr-defined]
    pool.shutdown()
    assert seen == list(range(5))


def test_a_cancelled_waiting_item_never_runs(pool: FairExecutor) -> None:
    release = threading.Event()
    ran: list[str] = []
    blockers = [_as(1, pool, release.wait, 30) for _ in range(2)]
    doomed = _as(1, pool, ran.append, "doomed")
    kept = _as(1, pool, ran.append, "kept")
    assert doomed.cancel()  # type: ignore[attr-defined]
    release.set()
    kept.result(timeout=5)  # type: ignore[attr-defined]
    for future in blockers:
        future.result(timeout=5)  # type: ignore[attr-defined]
    assert ran == ["kept"]


def test_work_of_no_session_has_no_share(pool: FairExecutor) -> None:
    release = threading.Event()
    engine_work = [_as(None, pool, release.wait, 30) for _ in range(3)]
    assert pool.waiting(0) == 0
    release.set()
    assert all(f.result(timeout=5) is True for f in engine_work)  # type: ignore[attr-defined]


def test_to_thread_cancellation_frees_the_share() -> None:
    """asyncio.to_thread through the pool: a call cancelled while it waits for its
    session's share is dropped, and the session's next call runs."""

    async def main() -> str:
        loop = asyncio.get_running_loop()
        executor = FairExecutor(threads=4, share=1)
        loop.set_default_executor(executor)
        caller.set(7)
        release = threading.Event()
        running = asyncio.ensure_future(asyncio.to_thread(release.wait, 30))
        waiting = asyncio.ensure_future(asyncio.to_thread(lambda: "never"))
        await asyncio.sleep(0)
        assert executor.waiting(7) == 1
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        await running
        return await asyncio.to_thread(lambda: "next")

    assert asyncio.run(main()) == "next"


def test_shutdown_cancels_what_waits() -> None:
    executor = FairExecutor(threads=2, share=1)
    release = threading.Event()
    running = _as(1, executor, release.wait, 30)
    waiting = _as(1, executor, lambda: "never")
    release.set()
    executor.shutdown(wait=True)
    assert running.result(timeout=5) is True  # type: ignore[attr-defined]
    assert waiting.cancelled() or waiting.result(timeout=5) == "never"  # type: ignore[attr-defined]


def test_runner_shares_hold_back_one_session_only() -> None:
    """The third call of a session with a share of two waits (and can be cancelled while it
    waits); another session's call runs at once; nothing is kept once all are done."""

    async def main() -> None:
        shares = RunnerShares(share=2)
        release = asyncio.Event()
        running: list[str] = []

        async def call(session: int, name: str) -> None:
            caller.set(session)
            async with shares.held():
                running.append(name)
                await release.wait()

        first = [asyncio.ensure_future(call(1, f"a{n}")) for n in range(3)]
        other = asyncio.ensure_future(call(2, "b"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert sorted(running) == ["a0", "a1", "b"]
        assert shares.waiting(1) == 3
        first[2].cancel()
        with pytest.raises(asyncio.CancelledError):
            await first[2]
        release.set()
        await asyncio.gather(*first[:2], other)
        assert "a2" not in running and shares.waiting(1) == shares.waiting(2) == 0

    asyncio.run(main())
