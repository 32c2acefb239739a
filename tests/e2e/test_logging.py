"""What the daemon writes to its log at the editors' default level (info).

Spawned because the log is the process's stderr, with the environment it was started in.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.e2e.wire import WireClient


def test_info_log_holds_no_message_bodies_and_no_traceback_for_ordinary_errors(
    workspace: Path,
) -> None:
    (workspace / "secret.txt").write_text("CANARY-BODY-7f3a\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    client = WireClient(workspace, "--log-level", "info", env=env)
    try:
        client.initialize(rootUri=workspace.as_uri())
        result = client.call(
            "tools/call", {"name": "read_file", "arguments": {"file_path": "secret.txt"}}
        )
        assert "CANARY-BODY-7f3a" in str(result["content"])
        answer = client.response(client.request("agent/run", {"prompt": "hi"}))
        assert answer["error"]["data"] == {"apiKeyEnv": "ANTHROPIC_API_KEY"}
        unknown = client.response(client.request("jobs/get", {"jobId": "nope"}))
        assert "error" in unknown
    finally:
        client.close()
    log = client.stderr()
    assert "toold" in log  # the daemon did log at info: the check below is not vacuous
    assert "CANARY-BODY-7f3a" not in log
    assert "Traceback" not in log
