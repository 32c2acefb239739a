"""TeamManager: team_spawn / team_send / team_list, running teammates, and main's inbox.

A running teammate is an asyncio task in the daemon that spawned it; it holds an
flock on ``.toold/team/<name>.lock`` so every daemon sharing the workspace knows
it runs. Teammates and main's inbox wake on file events: a watch of the mailbox folder on
the workspace's one watcher (toold.watching: inotify, so an idle team costs no wake-ups,
or polling where inotify cannot be had).

A teammate lives as long as what started it: its daemon, and in an engine shared by
several clients the session whose call spawned it (``session_of``; the engine calls
``end_session`` when that session ends), so a closed editor's teammates stop spending
tokens. A teammate that stops answers each request it had not answered with a
``stopped`` message, so its askers are not left waiting; mailboxes stay on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from toold.agents.loop import AgentContext, agent_loop
from toold.permissions.rules import Rule
from toold.storage import make_state_dir, open_state
from toold.team.mailbox import MAIN, Mailboxes, new_message
from toold.team.registry import TeamRegistry, check_teammate_name
from toold.tools.context import failed
from toold.watching import FolderWatch, WatchHub

log = logging.getLogger(__name__)

REPLY_TIMEOUT = 60.0
TEAM_SEND_RULE = Rule.parse("team_send")
STOPPED = "stopped"
"""The type of the message a stopping teammate answers an unanswered request with."""
DAEMON_STOPPED = "its daemon stopped"
SESSION_ENDED = "the session that started it ended"

current_sender: ContextVar[str] = ContextVar("toold_team_sender", default=MAIN)
"""Who is calling team_send: main, or the teammate whose turn is running."""


class _Waker:
    """Wakes readers of the mailbox folder on file events, one watch per manager."""

    def __init__(self, folder: Path, hub: WatchHub | None) -> None:
        self.folder = folder
        self.hub = hub
        self._event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="toold-mailbox-watch")

    async def _watch(self) -> None:
        make_state_dir(self.folder)  # never through a link: nothing outside is watched
        watch = await FolderWatch([self.folder], recursive=False, hub=self.hub).start()
        try:
            self._event.set()  # what arrived before the watch was installed
            async for _ in watch.batches():
                self._event.set()
        finally:
            watch.close()

    async def wait(self) -> None:
        await self._event.wait()
        self._event.clear()

    def poke(self) -> None:
        self._event.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class TeamManager:
    """The team of one workspace, as seen from one daemon."""

    def __init__(
        self,
        root: Path,
        state_dir: Path,
        *,
        agents: Any,
        push: Callable[[dict[str, Any]], None] | None = None,
        reply_timeout: float = REPLY_TIMEOUT,
        watcher: WatchHub | None = None,
    ) -> None:
        """``watcher``: the workspace's (WorkspaceState.watcher); without it, one of its own."""
        self.registry = TeamRegistry(root / ".team.json", state_dir / "team" / "registry.lock")
        self.mail = Mailboxes(state_dir / "mailboxes")
        self.locks = state_dir / "team"
        self.agents = agents
        self.push = push
        self.reply_timeout = reply_timeout
        self.watcher = watcher
        self._running: dict[str, asyncio.Task[None]] = {}
        self._lock_fds: dict[str, int] = {}
        self._waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._subscribers: list[asyncio.Event] = []
        self._waker: _Waker | None = None
        self._inbox: asyncio.Task[None] | None = None
        self.session_of: Callable[[], int | None] = lambda: None
        """The session whose call runs now, set by a front end that serves several (the
        engine); None in a daemon of one client, whose teammates live as long as it."""
        self._owners: dict[str, int] = {}
        """The session that spawned each running teammate, where there is one."""
        self._why_stopped: dict[str, str] = {}

    # -- background machinery -------------------------------------------------------
    def start(self) -> None:
        """Start main's inbox (team/message notifications, team_send replies)."""
        if self._waker is not None:
            return
        self._waker = _Waker(self.mail.folder, self.watcher)
        self._waker.start()
        # Read from here, now: a reply to the request about to be sent may arrive before
        # the inbox task first runs (the waker's first wake-up covers it).
        offset = self.mail.size(MAIN)
        self._inbox = asyncio.create_task(self._read_inbox(offset), name="toold-main-inbox")

    async def _read_inbox(self, offset: int) -> None:
        assert self._waker is not None
        while True:
            await self._waker.wait()
            for event in self._subscribers:
                event.set()
            messages, offset = self.mail.read_from(MAIN, offset)
            for message in messages:
                waiter = self._waiters.pop(str(message.get("inReplyTo")), None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
                if self.push is not None:
                    self.push(message)

    async def close(self) -> None:
        """Stop teammates and watchers; release the run locks."""
        for name in list(self._running):
            await self._stop(name, DAEMON_STOPPED)
        for task in (self._inbox,):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._waker is not None:
            await self._waker.close()

    # -- running state --------------------------------------------------------------------
    def _lock_path(self, name: str) -> Path:
        return self.locks / f"{check_teammate_name(name)}.lock"

    def is_running(self, name: str) -> bool:
        """Running here, or in another daemon sharing the workspace."""
        if name in self._running:
            return True
        try:
            fd = open_state(self._lock_path(name), os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def _take_lock(self, name: str) -> bool:
        fd = open_state(self._lock_path(name), os.O_RDWR | os.O_CREAT, create_dirs=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fds[name] = fd
        return True

    def _release_lock(self, name: str) -> None:
        fd = self._lock_fds.pop(name, None)
        if fd is not None:
            os.close(fd)

    # -- the tools ----------------------------------------------------------------------------
    def register(
        self, name: str, role: str, system_prompt: str = "", model: str | None = None
    ) -> dict[str, Any]:
        """team_register: add or replace a teammate in .team.json."""
        return self.registry.register(name, role, system_prompt, model)

    def list(self) -> list[dict[str, Any]]:
        """team_list: registered teammates with ``running``."""
        return [{**t, "running": self.is_running(t["name"])} for t in self.registry.all()]

    async def spawn(self, name: str) -> str:
        """team_spawn: start a registered teammate in this daemon."""
        teammate = self.registry.get(name)
        if self.is_running(name):
            return f"Teammate {name} is already running."
        if self.agents is None:
            return failed(f"Team spawning unavailable for {name}: provider is not configured.")
        if not self._take_lock(name):
            return f"Teammate {name} is already running."
        self.start()
        offset = self.mail.size(name)
        task = asyncio.create_task(self._teammate(teammate, offset), name=f"teammate-{name}")
        self._running[name] = task
        owner = self.session_of()
        if owner is not None:
            self._owners[name] = owner
        task.add_done_callback(lambda done: self._forget(name, done))
        return f"Spawned teammate {name} ({teammate['role']})"

    def _forget(self, name: str, task: asyncio.Future[None] | None) -> None:
        if self._running.get(name) is not task:
            return  # forgotten already (stopping), and maybe spawned again since
        self._running.pop(name, None)
        self._owners.pop(name, None)
        self._why_stopped.pop(name, None)
        self._release_lock(name)

    async def end_session(self, session: int) -> tuple[str, ...]:
        """Stop the teammates that ``session`` spawned (it ended); their names."""
        names = tuple(name for name, owner in self._owners.items() if owner == session)
        stopped = []
        for name in names:
            # Asked again: while one stopped, another may have ended and been spawned
            # again by another session, whose teammate it is now.
            if self._owners.get(name) == session:
                await self._stop(name, SESSION_ENDED)
                stopped.append(name)
        return tuple(stopped)

    async def _stop(self, name: str, why: str) -> None:
        task = self._running.get(name)
        if task is not None:
            self._why_stopped[name] = why
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def send(self, to_agent: str, content: str) -> str:
        """team_send from main or, inside a teammate's turn, from that teammate.

        To ``main``: a message the editor shows (``team/message``); no reply is awaited.
        To a teammate: a request, then its reply (from main's inbox or the sender's own).
        """
        sender = current_sender.get()
        if to_agent == sender:
            return failed(f"{sender} cannot message itself; name another agent in to_agent.")
        if to_agent == MAIN:
            self.mail.append(new_message(sender, MAIN, content, "message"))
            return f"Sent to {MAIN}: the user sees it in the editor (no reply is awaited)."
        self.registry.get(to_agent)
        if not self.is_running(to_agent):
            return failed(f"Teammate {to_agent} is not running. Start it with team_spawn first.")
        self.start()
        message = new_message(sender, to_agent, content, "request")
        if sender == MAIN:
            reply = await self._reply_to_main(message)
        else:
            reply = await self._reply_to_teammate(sender, message)
        if reply is None:
            return failed(f"No reply from {to_agent} within {self.reply_timeout:g} s.")
        if reply.get("type") == STOPPED:
            return failed(str(reply.get("content", "")))
        return f"Reply from {to_agent}: {reply.get('content', '')}"

    async def _reply_to_main(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Append ``message``; main's inbox reader hands its reply over."""
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters[message["id"]] = waiter
        self.mail.append(message)
        try:
            return await asyncio.wait_for(waiter, self.reply_timeout)
        except TimeoutError:
            return None
        finally:
            self._waiters.pop(message["id"], None)

    async def _reply_to_teammate(
        self, sender: str, message: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Append ``message`` and read the sender's mailbox (its own loop is busy in this
        very turn) until the reply arrives; its loop later skips the response."""
        woken = asyncio.Event()
        self._subscribers.append(woken)
        offset = self.mail.size(sender)
        try:
            self.mail.append(message)
            async with asyncio.timeout(self.reply_timeout):
                while True:
                    messages, offset = self.mail.read_from(sender, offset)
                    for found in messages:
                        if found.get("inReplyTo") == message["id"]:
                            return found
                    await woken.wait()
                    woken.clear()
        except TimeoutError:
            return None
        finally:
            self._subscribers.remove(woken)

    # -- a running teammate -------------------------------------------------------------------
    async def _teammate(self, teammate: dict[str, Any], offset: int) -> None:
        name = teammate["name"]
        woken = asyncio.Event()
        self._subscribers.append(woken)
        unanswered: list[dict[str, Any]] = []
        try:
            while True:
                messages, offset = self.mail.read_from(name, offset)
                unanswered = [m for m in messages if m.get("type") == "request"]
                for message in messages:
                    kind = message.get("type")
                    if kind == "shutdown":
                        log.info("teammate %s shutting down", name)
                        return
                    if kind == "request":
                        await self._answer(teammate, message)
                        unanswered.remove(message)
                if not messages:
                    await woken.wait()
                    woken.clear()
        except asyncio.CancelledError:
            later, _ = self.mail.read_from(name, offset)
            unanswered += [m for m in later if m.get("type") == "request"]
            why = self._why_stopped.get(name, DAEMON_STOPPED)
            # Not running from here: whoever hears of it below sees so.
            self._forget(name, asyncio.current_task())
            self._answer_stopped(name, why, unanswered)
            raise
        finally:
            self._subscribers.remove(woken)

    def _answer_stopped(self, name: str, why: str, requests: Iterable[dict[str, Any]]) -> None:
        """Tell the askers of ``requests`` that ``name`` stopped (``why``) without
        answering them."""
        log.info("teammate %s stopped: %s", name, why)
        for request in requests:
            text = f"Teammate {name} stopped before answering: {why}."
            with contextlib.suppress(OSError, ValueError):  # its mailbox may be gone
                self.mail.append(new_message(name, request["from"], text, STOPPED, request["id"]))

    async def _answer(self, teammate: dict[str, Any], message: dict[str, Any]) -> None:
        agents = self.agents
        system = f"{agents.system_prompt}\n\nYou are teammate {teammate['name']}, role: "
        system += f"{teammate['role']}.\n{teammate.get('system_prompt', '')}".rstrip()
        guard = agents.guard.child(fail_closed=True)
        # Messaging is a teammate's own voice, like its reply: allowed unless a deny rule
        # or plan mode says otherwise (both are checked before allow rules).
        guard.allow = [*guard.allow, TEAM_SEND_RULE]
        ctx = AgentContext(
            provider=agents.provider,
            gateway=agents.gateway.narrowed(toolset=agents.toolset_for_teammate(), guard=guard),
            system=system,
            max_iterations=agents.max_iterations,
        )
        token = current_sender.set(teammate["name"])
        try:
            text = await agent_loop(ctx, [{"role": "user", "content": message["content"]}])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            text = f"Error: {type(exc).__name__}: {exc}"
        finally:
            current_sender.reset(token)
        reply = new_message(teammate["name"], message["from"], text, "response", message["id"])
        self.mail.append(reply)
