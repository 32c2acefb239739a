"""Token usage: what each model response used, as the Messages API reports it, summed.

The provider hands each response's ``usage`` to the loop's meter (``AgentContext.meter``).
A subagent's meter is a child of its parent's: its responses count in the parent's sums
(the same bill) but not as the parent's context, which is its own conversation's.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

DEFAULT_CONTEXT_WINDOW = 200_000
"""Tokens a Claude model's context holds on the Messages API without the long-context
beta (Anthropic's model overview gives every current model 200K)."""


@dataclass(frozen=True)
class TokenUsage:
    """Tokens of one response, or a sum of them."""

    input_tokens: int = 0
    """Input tokens read without the prompt cache."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    """Input tokens read from the prompt cache."""
    cache_write_tokens: int = 0
    """Input tokens written to the prompt cache."""

    @classmethod
    def of(cls, usage: Any) -> TokenUsage:
        """The SDK's ``usage`` of a message (a field it leaves out or sets to null is 0)."""

        def count(name: str) -> int:
            value = getattr(usage, name, None)
            return value if isinstance(value, int) and value > 0 else 0

        return cls(
            input_tokens=count("input_tokens"),
            output_tokens=count("output_tokens"),
            cache_read_tokens=count("cache_read_input_tokens"),
            cache_write_tokens=count("cache_creation_input_tokens"),
        )

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total(self) -> int:
        """Every token: for one response, what its context holds once it answered (the
        prompt it read, cached or not, and what it wrote)."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class UsageMeter:
    """One conversation's usage: the sum of its responses (and its subagents') and its
    latest response; ``on_change`` hears of each response of its own."""

    def __init__(
        self,
        on_change: Callable[[UsageMeter], None] | None = None,
        *,
        parent: UsageMeter | None = None,
    ) -> None:
        self.total = TokenUsage()
        self.last: TokenUsage | None = None
        """The latest response of this conversation (not of its subagents)."""
        self.on_change = on_change
        self.parent = parent

    def record(self, usage: TokenUsage) -> None:
        """A response of this conversation."""
        self.last = usage
        self._add(usage)
        if self.on_change is not None:
            self.on_change(self)

    def _add(self, usage: TokenUsage) -> None:
        self.total = self.total + usage
        if self.parent is not None:
            self.parent._add(usage)

    def child(self, on_change: Callable[[UsageMeter], None] | None = None) -> UsageMeter:
        """A subagent's meter: its responses also count in this one's sums."""
        return UsageMeter(on_change, parent=self)


current_meter: ContextVar[UsageMeter | None] = ContextVar("toold_usage_meter", default=None)
"""The meter of the loop whose tool call runs (a subagent's meter is its child)."""
