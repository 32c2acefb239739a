"""Handlers of toold's custom methods, one module per area.

HANDLERS maps each method to ``module:function``; rpc.py imports a handler's
module on its first call, so the daemon answers ``initialize`` before loading
pydantic models and tools.
"""

from __future__ import annotations

from toold_protocol.names import TOOLS_CALL, TOOLS_LIST

HANDLERS: dict[str, str] = {
    TOOLS_LIST: "toold.handlers.tools:tools_list",
    TOOLS_CALL: "toold.handlers.tools:tools_call",
}
