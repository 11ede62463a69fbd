"""sleepmem as an MCP server (the official ``mcp`` SDK): tools and a resource per scope.

Tools: ``remember`` (append an event), ``recall`` (search, rendered for a prompt),
``forget`` (erase one memory), ``explain`` (why a memory exists). Resource template:
``sleepmem://memories/{agent}/{user}``, the current memories of that scope.

Every tool goes through the HTTP API with the caller's key, so auth and tenancy hold:

- ``sleepmem mcp`` (stdio) uses :class:`sleepmem.AsyncClient` as configured for this user
  (``SLEEPMEM_API_URL`` / ``SLEEPMEM_API_KEY`` or the local key file);
- the streamable-HTTP mount at ``/mcp`` on the API forwards each request's own
  ``Authorization`` header to the API in-process (an ASGI transport, no socket).

Install with the extra: ``pip install 'sleepmem[mcp]'``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from sleepmem.client import AsyncClient
from sleepmem.core.errors import SleepmemError
from sleepmem.pipelines.found import found_lines

ClientFactory = Callable[[Any], Awaitable[AsyncClient]]
"""(the MCP request context) -> a client acting for the caller."""

INSTRUCTIONS = (
    "Long-term memory. Call `recall` before answering to see what is known about the user; "
    "call `remember` with what the user said that is worth keeping; `forget` erases a "
    "memory for good; `explain` says why a memory exists. `save_checkpoint` and `checkpoint` "
    "keep a task's working state per session, so it resumes after a crash."
)


def build_server(
    client_for: ClientFactory, *, agent: str = "", user: str = ""
) -> MCPServer[Any]:
    """An ``MCPServer`` whose tools act through ``client_for(ctx)``."""
    server: MCPServer[Any] = MCPServer(name="sleepmem", instructions=INSTRUCTIONS)

    def scope(a: str | None, u: str | None) -> dict[str, str]:
        return {k: v for k, v in (("agent", a or agent), ("user", u or user)) if v}

    @server.tool(description="Store something the user said or did, for later. "
                             "Returns the event id; it becomes memory at sleep time.")
    async def remember(content: str, ctx: Context, role: str = "user", session: str = "",
                       agent: str = "", user: str = "") -> str:
        client = await client_for(ctx)
        async with client:
            fields: dict[str, Any] = {"content": content, "role": role, **scope(agent, user)}
            if session:
                fields["session"] = session
            return await client.emit(**fields)

    @server.tool(description="Recall what memory holds about a question: short cards, "
                             "best first, within a token budget.")
    async def recall(query: str, ctx: Context, k: int = 5, budget_tokens: int = 600,
                     agent: str = "", user: str = "") -> str:
        client = await client_for(ctx)
        async with client:
            result = await client.context(query, scope(agent, user) or None,
                                          budget_tokens=budget_tokens, k=k)
        return result.text or "(nothing remembered about this yet)"

    @server.tool(description="Erase one memory from every store, for good.")
    async def forget(memory_id: str, ctx: Context) -> str:
        client = await client_for(ctx)
        async with client:
            receipt = await client.forget(memory_id)
        return json.dumps(receipt.model_dump(mode="json"))

    @server.tool(description="Why a memory exists: its sources, versions and status. With "
                             "a query, also which search routes found it for that query and "
                             "how it ranked.")
    async def explain(memory_id: str, ctx: Context, query: str | None = None) -> str:
        client = await client_for(ctx)
        async with client:
            ex = await client.explain(memory_id, query=query)
        versions = [f"v{v.version} {v.status}: {v.statement}" for v in ex.versions]
        lines = [ex.why, *versions]
        if ex.query is not None:
            lines += found_lines(ex.query)
        return "\n".join(lines)

    @server.tool(description="Save the working state of a task in a session (plan, current "
                             "step, completed steps with idempotency keys, variables) as a new "
                             "version; base_version is the version read (0 for a new task). "
                             "A stale base_version is refused: read the checkpoint again.")
    async def save_checkpoint(session: str, state: dict[str, Any], base_version: int,
                              ctx: Context, agent: str = "", user: str = "") -> str:
        client = await client_for(ctx)
        async with client:
            saved = await client.put_checkpoint(
                state, base_version=base_version,
                scope={**scope(agent, user), "session": session},
            )
        return saved.model_dump_json()

    @server.tool(description="The current checkpoint of a session: where a task stands and "
                             "which steps are already done (never repeat them).")
    async def checkpoint(session: str, ctx: Context, agent: str = "", user: str = "") -> str:
        client = await client_for(ctx)
        async with client:
            current = await client.get_checkpoint({**scope(agent, user), "session": session})
        return current.model_dump_json()

    @server.resource("sleepmem://memories/{agent}/{user}", mime_type="application/json",
                     description="The current memories of one agent's user")
    async def memories(agent: str, user: str, ctx: Context) -> str:
        client = await client_for(ctx)
        async with client:
            page = await client.list({"agent": agent, "user": user}, limit=500)
        return json.dumps([{"id": m.id, "type": m.type, "statement": m.statement,
                            "pinned": m.pinned} for m in page.items], ensure_ascii=False)

    return server


# -- stdio: `sleepmem mcp` ---------------------------------------------------------------


def run_stdio(*, url: str | None, api_key: str | None, agent: str, user: str) -> None:
    """Serve MCP on stdin/stdout, acting with this user's key."""
    import anyio

    async def client_for(_ctx: Any) -> AsyncClient:
        return AsyncClient(url, api_key, agent=agent or None, user=user or None)

    # Fail before the first tool call if the server cannot be found.
    probe = AsyncClient(url, api_key)
    server = build_server(client_for, agent=agent, user=user)

    async def main() -> None:
        await probe.aclose()
        await server.run_stdio_async()

    anyio.run(main)


# -- streamable HTTP, mounted on the API ----------------------------------------------------


def http_mount(api: Any) -> tuple[Any, Any]:
    """(the ``/mcp`` route for the FastAPI app, the session manager to run in its lifespan).

    Tools reach the API in-process with the caller's own Authorization header; the route
    itself refuses a request without a valid key, in the API's error shape."""
    import httpx
    from starlette.responses import JSONResponse

    async def client_for(ctx: Any) -> AsyncClient:
        headers = dict(ctx.headers or {})
        auth = headers.get("authorization", "")
        tenant = api.state.keyring.tenant_for(auth) if auth else None
        transport = httpx.ASGITransport(app=api)
        http = httpx.AsyncClient(transport=transport, base_url="http://sleepmem.internal",
                                 headers={"Authorization": auth} if auth else {})
        return _OwningClient(http, tenant)

    server = build_server(client_for)
    app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True,
                                     json_response=True, host=_host(api))
    route: Any = next(r for r in app.routes if getattr(r, "path", "") == "/mcp")
    endpoint = route.endpoint

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        try:
            api.state.keyring.tenant_for(headers.get("authorization"))
        except SleepmemError as exc:
            hint = api.state.keyring.hint
            body = {"error": {"message": f"{exc}; {hint}"}}
            await JSONResponse(body, status_code=401,
                               headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        await endpoint(scope, receive, send)

    route.endpoint = guarded
    route.app = guarded
    return route, server.session_manager


def _host(api: Any) -> str:
    settings = getattr(api.state, "settings", None)
    return str(getattr(settings, "host", "127.0.0.1"))


class _OwningClient(AsyncClient):
    """An AsyncClient over a given transport that closes it when done."""

    def __init__(self, http: Any, tenant: str | None) -> None:
        super().__init__("http://sleepmem.internal", None, tenant=tenant, http=http)
        self._owns = True
