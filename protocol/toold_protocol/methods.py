"""Method names of wire contract v1 and the table binding them to their models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from toold_protocol import models
from toold_protocol.names import TOOLS_CALL, TOOLS_LIST

Direction = Literal["clientToServer", "serverToClient"]


@dataclass(frozen=True)
class MethodSpec:
    """One custom method: its name, params model and result model (None for notifications)."""

    name: str
    params: type[BaseModel]
    result: type[BaseModel] | None
    direction: Direction = "clientToServer"
    doc: str = ""

    @property
    def is_notification(self) -> bool:
        """True when the method expects no response."""
        return self.result is None


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec(
            TOOLS_LIST,
            models.ToolsListParams,
            models.ToolsListResult,
            doc="List every tool's schema in the requested format.",
        ),
        MethodSpec(
            TOOLS_CALL,
            models.ToolsCallParams,
            models.ToolsCallResult,
            doc="Run one tool; failures of the tool itself come back as isError results.",
        ),
    )
}
