"""The guard's question to an MCP client: an elicitation, or an ``input_required`` result.

The guard asks through the one ``ask`` callable its workspace was opened with
(toold.opening); here that callable is ``McpAsker``, which asks the client of the
``tools/call`` being judged (``exchange``, a context variable the bridge sets per call):

- on a handshake connection (2025-06-18, 2025-11-25) whose client declared the
  ``elicitation`` capability, an ``elicitation/create`` in form mode, answered within
  ``[permissions] ask_timeout``;
- on 2026-07-28, where a server sends no requests, the call ends with an
  ``input_required`` result carrying the question; the client retries it with
  ``inputResponses`` and the ``requestState`` toold minted (sealed by the SDK's
  RequestStateBoundary), and the answer is used only for the question toold asked, once.

The question shows what the editor's prompt shows (toold.editor.ask_user): the call's
summary, the guard's reason and the diff. The choices are the editor's: Allow, Always
allow, Deny; "Always allow" is remembered by the guard itself (session_rules). An answer
that does not validate is a Deny; a client that cannot ask gets today's refusal
(``CannotAsk``); a decline, a cancel or no answer in time is no answer.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toold.gateway import QUESTION_SENT
from toold.permissions import prompt
from toold.permissions.guard import Answer, CannotAsk
from toold.tools import preview
from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)

CHOICES: dict[str, str] = {"allow": "Allow", "always": "Always allow", "deny": "Deny"}
"""The answers offered, by value: the editor's prompt's (toold.editor.ASK_ACTIONS)."""
ANSWER_FIELD = "answer"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        ANSWER_FIELD: {
            "type": "string",
            "title": "Allow this call?",
            "oneOf": [{"const": value, "title": title} for value, title in CHOICES.items()],
        }
    },
    "required": [ANSWER_FIELD],
}
"""The form of the question: one single-select field (the spec's titled enum)."""
MAX_PENDING = 256
"""Questions sent as ``input_required`` and not answered yet, at most (oldest dropped)."""


def answer_of(result: types.ElicitResult) -> Answer | None:
    """The guard's answer to an elicitation's result: None for a decline or a cancel, and
    a Deny for an accepted form whose content is not exactly one of the choices."""
    if result.action != "accept":
        return None
    content = result.content or {}
    value = content.get(ANSWER_FIELD)
    if set(content) != {ANSWER_FIELD} or not isinstance(value, str) or value not in CHOICES:
        log.info("an answer that does not validate (%r): denied", content)
        return "deny"
    return value  # type: ignore[return-value]  # one of CHOICES' keys, an Answer


async def question(state: WorkspaceState, tool: str, args: Any, reason: str) -> str:
    """The prompt's text: the call's summary, the guard's reason and the capped diff."""
    message = f"toold: {prompt.question(tool, args, reason)}"
    edits = await asyncio.to_thread(preview.preview_edits, state.toolset.get(tool), args)
    return message if edits is None else f"{message}\n\n{preview.in_message(edits)}"


def _digest(tool: str, args: Any, reason: str) -> str:
    """What a question was about, so an answer is used for that call only."""
    text = json.dumps([tool, args, reason], sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Question:
    """A question sent as ``input_required``: its key in ``inputRequests``, its text and
    the call it is about."""

    key: str
    message: str
    about: str
    expires: float

    def request(self) -> types.ElicitRequest:
        """The embedded ``elicitation/create`` request."""
        params = types.ElicitRequestFormParams(message=self.message, requested_schema=SCHEMA)
        return types.ElicitRequest(params=params)


class Pending:
    """Questions sent as ``input_required``, by the ``requestState`` they went out with;
    each is taken once (a replayed state answers nothing)."""

    def __init__(self) -> None:
        self._questions: OrderedDict[str, Question] = OrderedDict()

    def add(self, asked: Question) -> str:
        """Keep ``asked``; the state to send with it."""
        state = secrets.token_urlsafe(16)
        self._questions[state] = asked
        while len(self._questions) > MAX_PENDING:
            self._questions.popitem(last=False)
        return state

    def take(self, state: str) -> Question | None:
        """The question sent with ``state``, once; None for a state toold did not mint
        (or already used)."""
        return self._questions.pop(state, None)


@dataclass
class Exchange:
    """One ``tools/call`` being served: how its client can be asked, and the answer its
    retry carried (2026-07-28)."""

    ctx: ServerRequestContext[Any, Any]
    answered: Question | None = None
    answer: Answer | None = None
    asked: list[Question] = field(default_factory=list)
    """Questions to send as ``input_required`` once the call is judged."""
    call_meta: dict[str, Any] = field(default_factory=dict)
    """The gateway call's ``CallContext.meta``: a question sent back is flagged there, so
    the round that only asks leaves no audit line (toold.gateway.QUESTION_SENT)."""

    @property
    def modern(self) -> bool:
        """Whether the call came on 2026-07-28 (no server requests: input_required)."""
        return self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    def can_elicit(self) -> bool:
        """Whether the client declared form elicitation."""
        caps = self.ctx.session.client_capabilities
        elicitation = caps.elicitation if caps is not None else None
        if elicitation is None:
            return False
        # An empty capability means form (2025-06-18); one naming only url does not.
        return elicitation.form is not None or elicitation.url is None


exchange: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar(
    "toold_mcp_exchange", default=None
)
"""The ``tools/call`` the guard is judging, set by the bridge around the gateway call."""


def answered(
    ctx: ServerRequestContext[Any, Any],
    pending: Pending,
    state: str | None,
    responses: dict[str, Any] | None,
) -> Exchange:
    """The exchange of a ``tools/call``, with the answer its retry carries: checked to
    answer exactly the question toold sent with ``state``, once. Raises INVALID_PARAMS
    otherwise, so a client cannot answer a question before toold asks it."""
    current = Exchange(ctx)
    if state is None and responses is None:
        return current
    asked = pending.take(state) if state is not None else None
    if asked is None or (responses is not None and set(responses) != {asked.key}):
        raise MCPError(
            types.INVALID_PARAMS,
            "inputResponses answer no question toold asked in this exchange: "
            "retry the call without them",
        )
    current.answered = asked
    response = (responses or {}).get(asked.key)
    if response is None:
        current.answer = None  # retried without an answer: none
    elif isinstance(response, types.ElicitResult):
        current.answer = answer_of(response)
    else:
        current.answer = "deny"  # an answer of another kind does not validate
    return current


class McpAsker:
    """The workspace's ``ask`` for ``toold mcp``: asks the client of the current call."""

    def __init__(self, state: WorkspaceState | None = None) -> None:
        self.state = state
        """The workspace, set once it is bound (the guard is built before)."""

    def _timeout(self) -> float:
        return self.state.config.permissions.ask_timeout if self.state is not None else 120.0

    async def __call__(self, tool: str, args: Any, reason: str) -> Answer | None:
        """Ask about (tool, args, reason): the answer, None for none; CannotAsk when the
        call's client has no way to be asked."""
        current = exchange.get()
        if current is None or self.state is None or not current.can_elicit():
            raise CannotAsk(tool)
        about = _digest(tool, args, reason)
        if current.modern:
            return self._from_retry(current, about, await question(self.state, tool, args, reason))
        message = await question(self.state, tool, args, reason)
        try:
            result = await asyncio.wait_for(
                current.ctx.session.elicit_form(message, SCHEMA, current.ctx.request_id),
                self._timeout(),
            )
        except NoBackChannelError:
            raise CannotAsk(tool) from None
        except ValidationError:
            log.info("an elicitation result that does not validate: %s denied", tool)
            return "deny"
        except (TimeoutError, MCPError) as exc:
            log.info("no answer to the question about %s: %r", tool, exc)
            return None
        return answer_of(result)

    def _from_retry(self, current: Exchange, about: str, message: str) -> Answer | None:
        """2026-07-28: the retry's answer when it answers this very question in time;
        else the question goes out as ``input_required`` (and this round has no answer)."""
        asked = current.answered
        if asked is not None and asked.about == about:
            current.answered = None  # one answer, one call
            if time.monotonic() > asked.expires:
                log.info("the answer came after permissions.ask_timeout: no answer")
                return None
            return current.answer
        key = f"toold-ask-{secrets.token_urlsafe(8)}"
        current.asked.append(Question(key, message, about, time.monotonic() + self._timeout()))
        current.call_meta[QUESTION_SENT] = True
        return None
