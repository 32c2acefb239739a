"""JSON-RPC error codes used by toold.

Standard JSON-RPC and LSP codes are re-stated here so clients need no other
source. toold's own codes lie outside both the JSON-RPC reserved range
(-32768..-32000) and LSP's reserved range (-32899..-32800).
"""

from __future__ import annotations

# JSON-RPC 2.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# LSP base protocol
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Default cap on one frame's Content-Length (configurable)."""

# toold's own
MESSAGE_TOO_LARGE = -33001
"""A frame's Content-Length exceeds the daemon's message-size cap; the body was skipped."""
NOT_FOUND = -33002
"""A job, task or other named object does not exist."""
CONFLICT = -33003
"""The workspace changed under the request (a file edited outside toold since toold last
wrote it); ``data.paths`` names the files. Repeat with ``force`` to go ahead anyway."""

DAEMON_EXITED = -32099
"""Client side only, never sent by the daemon: toold's own client (``toold call``, ``toold run``)
reports this when the daemon's output ended before the answer came (the daemon exited or
crashed). It lies in JSON-RPC's range for implementation-defined errors (-32099..-32000), so it
cannot collide with a code the daemon sends; it is left out of ERROR_NAMES (and schema.json)."""

ERROR_NAMES: dict[int, str] = {
    PARSE_ERROR: "ParseError",
    INVALID_REQUEST: "InvalidRequest",
    METHOD_NOT_FOUND: "MethodNotFound",
    INVALID_PARAMS: "InvalidParams",
    INTERNAL_ERROR: "InternalError",
    SERVER_NOT_INITIALIZED: "ServerNotInitialized",
    REQUEST_CANCELLED: "RequestCancelled",
    MESSAGE_TOO_LARGE: "MessageTooLarge",
    NOT_FOUND: "NotFound",
    CONFLICT: "Conflict",
}
