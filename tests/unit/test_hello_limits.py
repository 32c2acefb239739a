"""The engine's door: a bounded number of connections waiting for their hello (the oldest
goes), and a stdio hello's announced preface checked before anything is read."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from toold.engine.attach import PROTOCOL
from toold.engine.peers import PREFACE_LIMIT, Doorway, PeerRefused, parse_hello


def _stdio_hello(**fields: object) -> tuple[bytes, list[int]]:
    read_end, write_end = os.pipe()
    line = json.dumps({"toold": PROTOCOL, "kind": "stdio", **fields}).encode() + b"\n"
    return line, [read_end, write_end]


@pytest.mark.parametrize("count", [-1, PREFACE_LIMIT + 1, "12", True, 1.5])
def test_a_bad_preface_count_is_refused_naming_the_field(count: object) -> None:
    line, fds = _stdio_hello(prefaceBytes=count)
    try:
        with pytest.raises(PeerRefused, match="prefaceBytes must be a whole number"):
            parse_hello(line, fds)
    finally:
        for fd in fds:
            os.close(fd)


def test_a_preface_count_is_kept_and_none_means_zero() -> None:
    for fields, expected in (({"prefaceBytes": 4096}, 4096), ({}, 0)):
        line, fds = _stdio_hello(**fields)
        try:
            assert parse_hello(line, fds)["prefaceBytes"] == expected
        finally:
            for fd in fds:
                os.close(fd)


def test_the_doorway_closes_the_oldest_waiting_connection() -> None:
    async def main() -> None:
        door = Doorway(limit=3)
        forever = asyncio.Event()
        tasks = [asyncio.ensure_future(forever.wait()) for _ in range(3)]
        for task in tasks:
            door.admit(task)
        door.greeted(tasks[1])  # said hello: no longer counts, never closed
        newcomer = asyncio.ensure_future(forever.wait())
        door.admit(newcomer)  # room for it: 2 waiting + 1
        late = asyncio.ensure_future(forever.wait())
        door.admit(late)  # full: the oldest still waiting (tasks[0]) goes
        await asyncio.sleep(0)
        assert tasks[0].cancelled() and door.closed == 1
        assert not tasks[1].done() and not tasks[2].done() and len(door) == 3
        for task in (*tasks[1:], newcomer, late):
            task.cancel()
        await asyncio.gather(*tasks, newcomer, late, return_exceptions=True)
        assert len(door) == 0  # ended connections leave the count

    asyncio.run(main())
