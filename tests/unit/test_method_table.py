"""The daemon's table of custom requests against the wire contract (toold_protocol)."""

from __future__ import annotations

import toold_protocol
from toold.handlers import requests
from toold_protocol.names import CLIENT_REQUESTS


def test_every_client_request_has_one_row_with_the_contracts_models() -> None:
    rows = requests()
    assert sorted(rows) == sorted(CLIENT_REQUESTS)
    for name, request in rows.items():
        spec = toold_protocol.METHODS[name]
        assert (request.params, request.result) == (spec.params, spec.result), name
        assert not spec.is_notification and spec.direction == "clientToServer", name
