"""The model provider: Anthropic's Messages API through the official SDK."""

from __future__ import annotations

import os
from typing import Any

DEFAULT_MODEL = "claude-sonnet-4-5"


class ProviderError(RuntimeError):
    """The model could not be reached or refused the request."""


class AnthropicProvider:
    """Sends a conversation with tool schemas; returns the assistant's content blocks."""

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        model: str = DEFAULT_MODEL,
        max_tokens: int = 4096,
        timeout: float = 600.0,
    ) -> None:
        import anthropic

        self.model = model
        self.max_tokens = max_tokens
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=2
        )

    @classmethod
    def from_settings(
        cls,
        *,
        api_key_env: str,
        base_url: str | None,
        model: str | None,
        max_tokens: int,
    ) -> AnthropicProvider | None:
        """A provider when an API key is available, else None (tools say unavailable)."""
        api_key = os.environ.get(api_key_env)
        if not api_key:
            return None
        return cls(
            api_key,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            model=model or os.environ.get("TOOLD_MODEL") or DEFAULT_MODEL,
            max_tokens=max_tokens,
        )

    async def create(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """One model turn: the assistant's content blocks as plain dicts."""
        import anthropic

        try:
            response = await self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=system,
                messages=messages,  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
            )
        except anthropic.APIError as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc}") from exc
        blocks: list[dict[str, Any]] = []
        for block in response.content:
            if block.type == "text":
                blocks.append({"type": "text", "text": block.text})
            elif block.type == "tool_use":
                blocks.append(
                    {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                )
        return blocks
