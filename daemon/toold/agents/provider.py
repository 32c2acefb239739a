"""The model provider: Anthropic's Messages API through the official SDK.

The SDK takes seconds to import, so it is imported (on a worker thread) at the
first model call, not when the workspace is bound: a daemon with an API key
answers its first tools/call as fast as one without.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable
from typing import Any

from toold.agents.usage import DEFAULT_CONTEXT_WINDOW, TokenUsage

DEFAULT_MODEL = "claude-sonnet-5-5"


class ProviderError(RuntimeError):
    """The model could not be reached or refused the request."""


class ModelRefused(ProviderError):
    """The model declined to answer (stop_reason ``refusal``)."""


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
        self.model = model
        self.max_tokens = max_tokens
        self.base_url = base_url
        self.context_window = DEFAULT_CONTEXT_WINDOW
        """Tokens the model's context holds (what ACP's ``usage_update`` calls ``size``)."""
        self._options: dict[str, Any] = {
            "api_key": api_key,
            "base_url": base_url,
            "timeout": timeout,
            "max_retries": 2,
        }
        self._sdk: Any = None
        self._client: Any = None
        self._lock = asyncio.Lock()

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

    async def _ready(self) -> Any:
        async with self._lock:
            if self._client is None:
                self._sdk = await asyncio.to_thread(importlib.import_module, "anthropic")
                self._client = self._sdk.AsyncAnthropic(**self._options)
        return self._client

    async def prepare(self) -> None:
        """Import the SDK and build the client now (a front end readying the first call)."""
        await self._ready()

    async def close(self) -> None:
        """Close the HTTP client and its connections."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def create(
        self,
        *,
        system: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_text: Callable[[str], None] | None = None,
        on_usage: Callable[[TokenUsage], None] | None = None,
    ) -> list[dict[str, Any]]:
        """One model turn: the assistant's content blocks as plain dicts.

        With ``on_text`` the turn is streamed (server-sent events) and each piece of
        text is handed to it as it arrives; ``on_usage`` gets the response's token usage
        (a refusal's too: it was used). ModelRefused when the model declines.
        """
        client = await self._ready()
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": messages,
            "tools": tools,
        }
        try:
            if on_text is None:
                response = await client.messages.create(**request)
            else:
                async with client.messages.stream(**request) as stream:
                    async for text in stream.text_stream:
                        on_text(text)
                    response = await stream.get_final_message()
        except self._sdk.APIError as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc}") from exc
        if on_usage is not None:
            on_usage(TokenUsage.of(response.usage))
        if response.stop_reason == "refusal":
            raise ModelRefused(f"the model ({self.model}) declined to answer")
        blocks: list[dict[str, Any]] = []
        for block in response.content:
            if block.type == "text":
                blocks.append({"type": "text", "text": block.text})
            elif block.type == "tool_use":
                blocks.append(
                    {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                )
        return blocks
