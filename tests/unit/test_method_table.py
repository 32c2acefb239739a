"""The daemon's table of custom requests against the wire contract (toold_protocol)."""

from __future__ import annotations

import subprocess
import sys

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


def test_a_session_is_built_without_the_models_the_tools_or_pygls_server() -> None:
    """``initialize`` is answered before the table, the protocol's models and the tools
    load (they come with the first custom request); pygls's server is never loaded."""
    probe = (
        "import sys, toold.server, toold.transport\n"
        "toold.server.create_server()\n"
        "heavy = ('toold_protocol.models', 'toold.handlers.table', 'toold.tools', "
        "'toold.workspace', 'pygls.lsp', 'pygls.protocol')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
