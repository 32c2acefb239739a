"""Fair shares of the engine's blocking work: no session holds every thread.

Blocking work (a sync tool's ``run``, a grep's matching, the guard's judging, a
checkpoint's snapshot) goes to the event loop's default executor through
``asyncio.to_thread`` and ``run_in_executor``. Shared by every session of an engine,
that pool was a commons: twelve greps of a pattern that backtracks for its whole
budget held all of its threads, and another session's call waited a minute behind them.

``FairExecutor`` is that pool with a share per session: at most ``share`` of one
session's items run at once (or wait for a free thread of the pool); its further items
wait in a queue of that session's own, holding no thread, so the other sessions' calls
still find one. The session is ``caller``, a context variable each session's task
sets: ``to_thread`` and the jobs a session starts inherit it. Work of no session (the
engine binding its workspace, the watchers) has no share to keep.

Calls that run in a sandbox's worker processes hold no thread but a process and CPU:
``RunnerShares`` lets ``CALL_SHARE`` of one session's calls run in the runner at once,
the rest wait (cancellable), so forty runaway greps of one session are not forty
processes on two cores. Background jobs run outside any session's share (they have caps
of their own: ``limits.max_running_jobs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from typing import Any

caller: contextvars.ContextVar[int | None] = contextvars.ContextVar("toold_caller", default=None)
"""The engine session whose request (or job) runs in this context; None outside any."""


CALL_SHARE = 8
"""Calls of one session running in the tool runner at once (a worker process each)."""


def pool_threads() -> int:
    """Threads of the engine's blocking pool: Python's default, at least 8."""
    return max(8, min(32, (os.cpu_count() or 1) + 4))


def session_share(threads: int) -> int:
    """Threads one session may hold at once: a quarter of the pool, at least 2."""
    return max(2, threads // 4)


_Item = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class FairExecutor(ThreadPoolExecutor):
    """A thread pool in which each ``caller`` runs at most ``share`` items at once."""

    def __init__(self, threads: int | None = None, share: int | None = None) -> None:
        threads = threads or pool_threads()
        super().__init__(threads, thread_name_prefix="toold-work")
        self.share = share or session_share(threads)
        self._fair = threading.Lock()
        self._running: dict[int, int] = {}
        """Items of each session handed to the pool (running, or about to)."""
        self._waiting: dict[int, deque[_Item]] = {}
        """Items of each session beyond its share, in order; they hold no thread."""
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn`` on the pool now, or once the calling session is under its share."""
        key = caller.get()
        if key is None:
            return super().submit(fn, *args, **kwargs)
        outer: Future[Any] = Future()
        with self._fair:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._running.get(key, 0) >= self.share:
                self._waiting.setdefault(key, deque()).append((outer, fn, args, kwargs))
                return outer
            self._running[key] = self._running.get(key, 0) + 1
        self._hand_over(key, (outer, fn, args, kwargs))
        return outer

    def _hand_over(self, key: int, item: _Item) -> None:
        try:
            super().submit(self._run, key, item)
        except RuntimeError as exc:  # shut down meanwhile
            with contextlib.suppress(InvalidStateError):  # cancelled meanwhile
                item[0].set_exception(exc)
            self._finished(key)

    def _run(self, key: int, item: _Item) -> None:
        outer, fn, args, kwargs = item
        try:
            # Cancelled while it waited (its caller gave up): nothing runs, the slot frees.
            if outer.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    outer.set_exception(exc)
                else:
                    outer.set_result(result)
        finally:
            self._finished(key)

    def _finished(self, key: int) -> None:
        """One of ``key``'s items is done: hand its next live waiting item to the pool."""
        with self._fair:
            queue = self._waiting.get(key)
            item = None
            while queue and item is None:
                candidate = queue.popleft()
                if candidate[0].cancelled():  # its caller gave up while it waited
                    candidate[0].set_running_or_notify_cancel()  # tells wait()/as_completed()
                    continue
                item = candidate  # still cancellable until its thread starts (_run)
            if not queue:
                self._waiting.pop(key, None)
            if item is None:
                left = self._running.get(key, 0) - 1
                if left > 0:
                    self._running[key] = left
                else:
                    self._running.pop(key, None)
                return
        self._hand_over(key, item)

    def waiting(self, key: int) -> int:
        """Items of session ``key`` waiting for its share (for tests and status)."""
        with self._fair:
            return len(self._waiting.get(key, ()))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Cancel what waits for a share, then shut the pool down."""
        with self._fair:
            self._closed = True
            waiting = [item for queue in self._waiting.values() for item in queue]
            self._waiting.clear()
        for outer, *_ in waiting:
            outer.cancel()
        super().shutdown(wait, cancel_futures=cancel_futures)


class RunnerShares:
    """At most ``share`` calls of each session in the runner at once; the rest wait."""

    def __init__(self, share: int = CALL_SHARE) -> None:
        self.share = share
        self._slots: dict[int, tuple[asyncio.Semaphore, list[int]]] = {}
        """Each session's semaphore and how many calls hold or wait for it."""

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """A slot of the calling session (none needed outside a session)."""
        key = caller.get()
        if key is None:
            yield
            return
        semaphore, users = self._slots.setdefault(key, (asyncio.Semaphore(self.share), [0]))
        users[0] += 1
        try:
            async with semaphore:
                yield
        finally:
            users[0] -= 1
            if not users[0]:  # a session's last call: nothing kept for sessions long gone
                self._slots.pop(key, None)

    def waiting(self, key: int) -> int:
        """Calls of session ``key`` holding or waiting for a slot (for tests)."""
        found = self._slots.get(key)
        return found[1][0] if found else 0


runner_shares = RunnerShares()
"""The engine's shares of its tool runner (one engine per process)."""
