"""sleepmem as an MCP server (the official ``mcp`` SDK): tools and a resource per scope.

Tools: ``remember`` (append an event), ``end_session`` (consolidate now; ``wait`` until
recallable), ``recall`` (search, rendered for a prompt), ``forget`` (erase one memory),
``explain`` (why a memory exists). Every id a tool shows is accepted by every tool: a whole
memory id, a ``[#ref]`` from ``recall`` (resolved within the scope; an ambiguous one is an
error listing the candidates), or an event id (the memories it became). A failure the
service explains (not found, server down, bad key) is the tool's error text. Resource template:
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
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from sleepmem.client import AsyncClient
from sleepmem.core.errors import NotFoundError, SleepmemError, ValidationError
from sleepmem.models.views import MemoryView
from sleepmem.pipelines.context import REF_CHARS
from sleepmem.pipelines.read.found import found_lines

PAGE = 500
WAIT_S = 30.0  # end_session(wait=true): how long a consolidation may take by default
POLL_S = 0.2

ClientFactory = Callable[[Any], Awaitable[AsyncClient]]
"""(the MCP request context) -> a client acting for the caller."""

INSTRUCTIONS = (
    "Long-term memory. Call `recall` before answering to see what is known about the user; "
    "call `remember` with what the user said that is worth keeping, and `end_session` when "
    "the conversation is over (what was remembered is recallable once its session is "
    "consolidated); `forget` erases a "
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

    # The events `remember` appended per (agent, user, session), for `end_session(wait)`
    # while the server has no flush to wait on (see `settled`).
    remembered: dict[tuple[str, ...], list[str]] = {}

    @asynccontextmanager
    async def acting(ctx: Context) -> AsyncIterator[AsyncClient]:
        """The caller's client; a failure the service explains reaches the agent as the
        tool's error text (an ``isError`` result), not as a bare "Error executing tool"."""
        try:
            client = await client_for(ctx)
            async with client:
                yield client
        except SleepmemError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool(description="Store something the user said or did, for later. Returns the "
                             "event id. It is recallable once its session is consolidated: "
                             "call `end_session` (wait=true) when the conversation is over; "
                             "otherwise that happens by itself when the session goes quiet.")
    async def remember(content: str, ctx: Context, role: str = "user", session: str = "",
                       agent: str = "", user: str = "") -> str:
        async with acting(ctx) as client:
            fields: dict[str, Any] = {"content": content, "role": role, **scope(agent, user)}
            if session:
                fields["session"] = session
            event_id = await client.emit(**fields)
        if session:
            remembered.setdefault((*scope(agent, user).values(), session), []).append(
                str(event_id))
        return str(event_id)

    @server.tool(description="End a session: what was remembered in it is consolidated now. "
                             "With wait=true, returns once it is recallable (or says that "
                             "the wait timed out).")
    async def end_session(session: str, ctx: Context, wait: bool = False,
                          timeout_s: float = WAIT_S, agent: str = "", user: str = "") -> str:
        where = scope(agent, user)
        async with acting(ctx) as client:
            ended = await end(client, session, where)
            if not wait:
                return (f"session {session!r} ended (event {ended}); it is consolidated "
                        "shortly, recallable after that")
            done = await settled(client, ended, where, remembered.pop((*where.values(),
                                                                       session), []),
                                 timeout_s)
        return (f"session {session!r} ended and consolidated: what it holds is recallable now"
                if done else
                f"session {session!r} ended; not consolidated within {timeout_s:g} s, "
                "recall may not show it yet")

    @server.tool(description="Recall what memory holds about a question: short cards, best "
                             "first, within a token budget, each with its id ([#ref]) for "
                             "`explain` and `forget`. Shows what consolidated sessions hold: "
                             "end a session (`end_session`) to make it recallable at once.")
    async def recall(query: str, ctx: Context, k: int = 5, budget_tokens: int = 600,
                     agent: str = "", user: str = "") -> str:
        async with acting(ctx) as client:
            result = await client.context(query, scope(agent, user) or None,
                                          budget_tokens=budget_tokens, k=k)
        return result.text or "(nothing remembered about this yet)"

    @server.tool(description="Erase one memory from every store, for good. memory_id: any "
                             "id a tool showed: the whole id, its [#ref] from `recall`, or "
                             "the event id `remember` returned (the memories it became).")
    async def forget(memory_id: str, ctx: Context, agent: str = "", user: str = "") -> str:
        async with acting(ctx) as client:
            ids = await resolve_ids(client, memory_id, scope(agent, user))
            receipts = [await client.forget(i) for i in ids]
        return "\n".join(json.dumps(r.model_dump(mode="json")) for r in receipts)

    @server.tool(description="Why a memory exists: its sources, versions and status. "
                             "memory_id: the whole id, its [#ref] from `recall`, or the event "
                             "id `remember` returned. With a query, also which search routes "
                             "found it for that query and how it ranked.")
    async def explain(memory_id: str, ctx: Context, query: str | None = None,
                      agent: str = "", user: str = "") -> str:
        blocks = []
        async with acting(ctx) as client:
            for one in await resolve_ids(client, memory_id, scope(agent, user)):
                ex = await client.explain(one, query=query)
                versions = [f"v{v.version} {v.status}: {v.statement}" for v in ex.versions]
                lines = [f"memory {one}", ex.why, *versions]
                if ex.query is not None:
                    lines += found_lines(ex.query)
                blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    @server.tool(description="Save the working state of a task in a session (plan, current "
                             "step, completed steps with idempotency keys, variables) as a new "
                             "version; base_version is the version read (0 for a new task). "
                             "A stale base_version is refused: read the checkpoint again.")
    async def save_checkpoint(session: str, state: dict[str, Any], base_version: int,
                              ctx: Context, agent: str = "", user: str = "") -> str:
        async with acting(ctx) as client:
            saved = await client.put_checkpoint(
                state, base_version=base_version,
                scope={**scope(agent, user), "session": session},
            )
        return saved.model_dump_json()

    @server.tool(description="The current checkpoint of a session: where a task stands and "
                             "which steps are already done (never repeat them).")
    async def checkpoint(session: str, ctx: Context, agent: str = "", user: str = "") -> str:
        async with acting(ctx) as client:
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


# -- ids and waits ---------------------------------------------------------------------

_REF = re.compile(r"^\[?#?([0-9A-Za-z_-]+)\]?$")


def _broader(where: dict[str, str]) -> list[dict[str, str]]:
    """The scope and every scope above it, narrowest first: what `recall` reads."""
    levels = list(where.items())
    # A level left out would take the client's default; "" names the broader scope.
    return [{k: v if i < n else "" for i, (k, v) in enumerate(levels)}
            for n in range(len(levels), -1, -1)]


async def _current(client: AsyncClient, where: dict[str, str]) -> list[MemoryView]:
    """The current memories a search in ``where`` can see (its own scope and those above)."""
    out: dict[str, MemoryView] = {}
    for level in _broader(where):
        cursor: str | None = None
        while True:
            page = await client.list(level, limit=PAGE, cursor=cursor)
            # A broader level lists its other sub-scopes too: a sibling's rows stay out.
            out.update({m.id: m for m in page.items
                        if all(getattr(m, k) in ("", v) for k, v in where.items())})
            cursor = page.next_cursor
            if cursor is None:
                break
    return list(out.values())


async def resolve_ids(client: AsyncClient, token: str, where: dict[str, str]) -> list[str]:
    """The memory ids ``token`` names: a whole memory id as given, or, within the scope, a
    short ref (``#b28d03``, ``[#b28d03]``) or an event id (the memories it became)."""
    match = _REF.match(token.strip())
    if match is None:
        raise ValidationError("memory_id", f"{token!r} is not an id a tool showed")
    name = match.group(1)
    if len(name) > REF_CHARS:
        try:
            await client.get(name)
            return [name]
        except NotFoundError:
            pass  # perhaps an event id: the memories it became
    memories = await _current(client, where)
    if len(name) <= REF_CHARS:
        hits = sorted(m.id for m in memories if m.id.startswith(name))
        if len(hits) > 1:
            raise ValidationError("memory_id", f"#{name} names {len(hits)} memories here "
                                               f"({', '.join(hits)}); give the whole id")
    else:
        hits = sorted(m.id for m in memories if name in m.provenance)
    if not hits:
        named = ", ".join(f"{k}={v!r}" for k, v in where.items()) or "the tenant"
        raise NotFoundError(f"no current memory {token!r} in {named}: an event id "
                            "names one only once its session is consolidated (end_session "
                            "with wait=true)")
    return hits


async def end(client: AsyncClient, session: str, where: dict[str, str]) -> str:
    """Append the session-end event of ``session`` in ``where``; its event id."""
    # Not str(): once emit answers its stream position, flush waits on it (see settled).
    return await client.emit(kind="session_end", role="system", content="",
                                 session=session, **where)


async def settled(client: AsyncClient, ended: str, where: dict[str, str],
                  events: list[str], timeout_s: float) -> bool:
    """Whether the session is consolidated within ``timeout_s``.

    With the client's ``flush`` (read-your-writes), the server says so. Without it, wait
    until every event ``remember`` appended in the session is some current memory's
    source, polling the list the tools read anyway."""
    flush = getattr(client, "flush", None)
    if flush is not None:
        position = getattr(ended, "position", None)
        state = await flush(where or None, position=position or None, timeout=timeout_s)
        return bool(getattr(state, "done", True))
    deadline = anyio.current_time() + timeout_s
    wanted = set(events)
    while True:
        seen = {p for m in await _current(client, where) for p in m.provenance}
        if wanted <= seen:
            return True
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(POLL_S)


# -- stdio: `sleepmem mcp` ---------------------------------------------------------------


def run_stdio(*, url: str | None, api_key: str | None, agent: str, user: str) -> None:
    """Serve MCP on stdin/stdout, acting with this user's key. The server and the key are
    checked first: a SleepmemError saying what is wrong, before any agent connects."""

    async def client_for(_ctx: Any) -> AsyncClient:
        return AsyncClient(url, api_key, agent=agent or None, user=user or None)

    async def main() -> None:
        async with AsyncClient(url, api_key) as probe:
            await probe.jobs(limit=1)  # answers only a live server that accepts this key
        await build_server(client_for, agent=agent, user=user).run_stdio_async()

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
