"""Handlers of toold's custom methods, one module per area; HANDLERS maps method → handler."""

from __future__ import annotations

from toold.handlers.tools import tools_call, tools_list
from toold.rpc import MethodHandler
from toold_protocol import TOOLS_CALL, TOOLS_LIST

HANDLERS: dict[str, MethodHandler] = {
    TOOLS_LIST: tools_list,
    TOOLS_CALL: tools_call,
}
