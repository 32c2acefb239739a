"""http_request and duckduckgo_search: Jianmu's network tools.

Both import their libraries lazily, inside ``run``: listing tools never loads aiohttp,
and duckduckgo_search works only where ``ddgs`` (or the older ``duckduckgo_search``)
is installed — ``pip install 'toold[web]'``.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import importlib
import json
import math
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import Field, field_validator

from toold.tools.annotations import ToolAnnotations
from toold.tools.base import ToolArguments
from toold.tools.builtin._http_policy import (
    HostPolicy,
    Lookup,
    Refused,
    Unresolvable,
    pinned_resolver,
    system_lookup,
)
from toold.tools.builtin._spill import Spill
from toold.tools.builtin._workspace import WorkspaceTool
from toold.tools.context import failed

if TYPE_CHECKING:
    import aiohttp

T = TypeVar("T")

MAX_REDIRECTS = 10
SPILL_CHUNK = 256 * 1024
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""Answers that say "try again later": retried like connection errors and timeouts."""
# Headers that must not follow a redirect to another host.
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


class HttpRequestArguments(ToolArguments):
    url: str = Field(description="The URL to request (http or https).")
    method: Literal["GET", "POST", "PUT", "DELETE"] = Field(
        "GET", description="HTTP method (default: GET)."
    )
    headers: dict[str, str] | None = Field(None, description="Optional HTTP headers.")
    body: dict[str, Any] | None = Field(None, description="Optional JSON body.")
    retries: int | None = Field(
        None,
        ge=0,
        le=10,
        description="Retry count after a failed attempt (default: http.retries, 3).",
    )

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


def backoff_delay(attempt: int, base: float, cap: float = 10.0) -> float:
    """Exponential backoff with full jitter before retry number ``attempt`` (from 1)."""
    return random.uniform(0, min(cap, base * 2 ** (attempt - 1)))


class _Retry(Exception):
    """An attempt that failed in a way worth retrying; ``text`` is its final message."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class HttpRequestTool(WorkspaceTool):
    name = "http_request"
    annotations = ToolAnnotations()
    description = (
        "Make HTTP requests to APIs. Supports GET, POST, PUT, DELETE methods with headers "
        "and a JSON body. Returns '[HTTP status]' then the body (JSON pretty-printed, long "
        "bodies truncated, the whole body saved to a file the result names). Connection "
        "errors, timeouts and 429/502/503/504 are retried with backoff. Private, loopback "
        "and link-local addresses are refused unless http.allow_hosts lists them."
    )
    Arguments = HttpRequestArguments
    effect_tags = ("network",)
    backoff_base = 0.5
    """Seconds before the first retry (doubling, with full jitter)."""
    lookup: Lookup | None = None
    """How hosts are resolved (None: getaddrinfo); tests put a scripted resolver here."""

    async def run(self, args: HttpRequestArguments) -> str:
        """Jianmu's ``[HTTP status]`` text, or ``Error: ...``."""
        url, retries = args.url, args.retries
        if not url or not url.strip():
            return failed("Error: No URL provided")
        import aiohttp
        from yarl import URL

        settings = self.config.http
        try:
            target = URL(url.strip())
        except ValueError as exc:
            return failed(f"Error: {type(exc).__name__}: {exc}")
        policy = HostPolicy(settings.allow_hosts, settings.deny_hosts, settings.block_private)
        refused = policy.refusal(target)
        if refused:
            return failed(f"Error: {refused}")
        attempts = 1 + (settings.retries if retries is None else retries)
        timeout = aiohttp.ClientTimeout(total=settings.timeout)
        text, error = "", False
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(backoff_delay(attempt, self.backoff_base))
            resolver = pinned_resolver()
            # No cache and no proxy from the environment: each hop connects to the
            # addresses checked for it, and only to those.
            connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False)
            try:
                async with aiohttp.ClientSession(
                    timeout=timeout, connector=connector, trust_env=False
                ) as session:
                    return await self._request(
                        session,
                        policy,
                        resolver,
                        args.method,
                        target,
                        dict(args.headers or {}),
                        args.body,
                    )
            except Refused as refusal:
                return failed(f"Error: {refusal}")
            except Unresolvable as exc:
                text, error = f"Error: {exc}", True
            except _Retry as retry:
                text, error = retry.text, False
            except TimeoutError:
                text, error = f"Error: Request timed out after {settings.timeout}s", True
            except aiohttp.ClientError as exc:
                text, error = f"Error: {type(exc).__name__}: {exc}", True
        return failed(text) if error else text

    async def _request(
        self,
        session: aiohttp.ClientSession,
        policy: HostPolicy,
        resolver: Any,
        method: str,
        url: Any,
        headers: dict[str, str],
        body: dict[str, Any] | None,
    ) -> str:
        """One attempt, following redirects only to URLs the policy allows; each hop's
        addresses are checked and pinned before it connects."""
        from yarl import URL

        lookup = self.lookup or system_lookup
        addresses = await policy.check(url, lookup)
        for _ in range(MAX_REDIRECTS + 1):
            resolver.pin(url, addresses)
            async with session.request(
                method, url, headers=headers, json=body, allow_redirects=False
            ) as response:
                location = response.headers.get("Location")
                if response.status in REDIRECT_STATUSES and location:
                    next_url = url.join(URL(location))
                    refused = policy.refusal(next_url)
                    try:
                        addresses = [] if refused else await policy.check(next_url, lookup)
                    except (Refused, Unresolvable) as exc:
                        refused = str(exc)
                    if refused:
                        return failed(f"Error: redirect to {next_url} refused: {refused}")
                    if response.status == 303 or (
                        response.status in (301, 302) and method == "POST"
                    ):
                        method, body = "GET", None
                    if next_url.origin() != url.origin():
                        headers = {
                            k: v for k, v in headers.items() if k.lower() not in _CREDENTIAL_HEADERS
                        }
                    url = next_url
                    continue
                text = await self._render(response)
                if response.status in RETRY_STATUSES:
                    raise _Retry(text)
                return text
        return failed(f"Error: too many redirects (more than {MAX_REDIRECTS})")

    async def _render(self, response: aiohttp.ClientResponse) -> str:
        limit = self.config.http.max_response_length
        # Enough bytes for ``limit`` characters of any UTF-8 text, plus one to see more.
        cap = 4 * limit + 1
        chunks: list[bytes] = []
        size = 0
        while size < cap:
            chunk = await response.content.read(cap - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        more = size >= cap
        charset = _charset(response)
        body = b"".join(chunks)
        text = body.decode(charset, "replace")
        if "application/json" in response.headers.get("Content-Type", "") and not more:
            with contextlib.suppress(ValueError):
                text = json.dumps(json.loads(text), ensure_ascii=False, indent=2)
        if more or len(text) > limit:
            note = await self._spill(response, body if more else None, text, charset)
            text = f"{text[:limit]}\n... (truncated)" + (f"\n{note}" if note else "")
        return f"[HTTP {response.status}]\n{text}"

    async def _spill(
        self, response: aiohttp.ClientResponse, head: bytes | None, text: str, charset: str
    ) -> str | None:
        """Keep the whole body in ``.toold/outputs`` (reading the rest of it, up to the
        spill bound, when only ``head`` was read); the line that says where, or None."""
        spill = Spill(self.workspace, 0, self.config.limits.max_finished_jobs)
        try:
            if head is None:
                spill.write(text)
            else:
                decoder = codecs.getincrementaldecoder(charset)("replace")
                spill.write(decoder.decode(head))
                while not spill.full:
                    chunk = await response.content.read(SPILL_CHUNK)
                    if not chunk:
                        break
                    spill.write(decoder.decode(chunk))
                spill.write(decoder.decode(b"", final=True))
        finally:
            where = spill.finish()
        return spill.note() if where is not None else None


def _charset(response: aiohttp.ClientResponse) -> str:
    """The declared charset when Python knows it, else UTF-8."""
    declared = response.charset
    if declared:
        try:
            return codecs.lookup(declared).name
        except LookupError:
            pass
    return "utf-8"


class WebSearchArguments(ToolArguments):
    query: str = Field(description="The search query")
    max_results: int | None = Field(
        None, ge=1, le=50, description="Maximum number of results to return (default 5)."
    )


async def in_own_thread(work: Callable[[], T]) -> T:
    """``work()`` on a new daemon thread.

    The search library is synchronous and cannot be interrupted. A thread left behind
    by a timeout must not hold one of the shared executor's few workers (which file
    tools need), so it gets a thread of its own; the library's own timeout ends it.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def target() -> None:
        try:
            result, error = work(), None
        except BaseException as exc:
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop may be gone by now
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name="toold-web-search", daemon=True).start()
    return await future


def resolve_ddgs_cls() -> Any:
    """The DDGS class from ``ddgs`` or else ``duckduckgo_search`` (Jianmu's order)."""
    errors: list[Exception] = []
    for module_name in ("ddgs", "duckduckgo_search"):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            errors.append(exc)
            continue
        ddgs_cls = getattr(module, "DDGS", None)
        if ddgs_cls is not None:
            return ddgs_cls
        errors.append(AttributeError(f"module '{module_name}' has no attribute 'DDGS'"))
    detail = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
    raise RuntimeError(
        "DuckDuckGoSearchTool requires optional dependency 'ddgs' or 'duckduckgo-search'. "
        f"Import details: {detail}"
    )


def format_results(results: list[dict[str, Any]]) -> str:
    """Jianmu's result text."""
    if not results:
        return "No results found for this query."
    return "\n".join(
        f"[{i}] {r.get('title')}\nURL: {r.get('href')}\nSnippet: {r.get('body')}\n"
        for i, r in enumerate(results, 1)
    )


class DuckDuckGoSearchTool(WorkspaceTool):
    name = "duckduckgo_search"
    annotations = ToolAnnotations(read_only=True, destructive=False)
    description = (
        "Search the web for real-time information (DuckDuckGo, no API key). Useful for "
        "current events, news, and general knowledge. Returns numbered results with "
        "title, URL and snippet."
    )
    Arguments = WebSearchArguments
    effect_tags = ("network",)

    async def run(self, args: WebSearchArguments) -> str:
        """Numbered results, or ``Error performing search: ...``."""
        ddgs_cls = resolve_ddgs_cls()
        settings = self.config.web_search
        query = args.query
        count = settings.max_results if args.max_results is None else args.max_results

        def search() -> list[dict[str, Any]]:
            with ddgs_cls(timeout=max(1, math.ceil(settings.timeout))) as ddgs:
                return list(ddgs.text(query, max_results=count) or [])

        try:
            results = await asyncio.wait_for(in_own_thread(search), settings.timeout)
        except TimeoutError:
            return failed(f"Error performing search: no answer within {settings.timeout}s")
        except Exception as exc:
            return failed(f"Error performing search: {exc}")
        return format_results(results)


TOOLS = (HttpRequestTool, DuckDuckGoSearchTool)
