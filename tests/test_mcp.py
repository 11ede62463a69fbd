"""The MCP server, exercised with the official SDK's own client over stdio (``sleepmem
mcp`` as a subprocess) and over streamable HTTP (the ``/mcp`` mount of a real server)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support import mcp_over_stdio, wait_for
from test_client import SCOPE, running_server

from sleepmem.client import Client
from sleepmem.runtime import Runtime


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    with running_server(tmp_path_factory.mktemp("mcp")) as runtime:
        yield runtime


def text(result: Any) -> str:
    assert not result.is_error, result
    return "\n".join(block.text for block in result.content)


async def exercise(mcp: McpClient, runtime: Runtime, word: str) -> None:
    """remember → (sleep time) → recall → explain → resource → forget, through MCP."""
    tools = {t.name for t in (await mcp.list_tools()).tools}
    assert {"remember", "recall", "forget", "explain", "save_checkpoint", "checkpoint"} <= tools
    task = {"session": f"task-{word}", "agent": "bot", "user": "ann"}
    saved = json.loads(text(await mcp.call_tool("save_checkpoint", {
        **task, "base_version": 0,
        "state": {"goal": f"Plan a trip to {word}", "completed": [{"key": "visa"}]}})))
    assert saved["version"] == 1
    read = json.loads(text(await mcp.call_tool("checkpoint", task)))
    assert read["version"] == 1 and read["state"]["completed"][0]["key"] == "visa"
    event_id = text(await mcp.call_tool("remember", {
        "content": f"My favourite city is {word}.", "session": f"mcp-{word}",
        "agent": "bot", "user": "ann"}))
    assert len(event_id) >= 16
    with Client(data_dir=runtime.settings.data_dir, **SCOPE) as mem:
        mem.end_session(f"mcp-{word}")

        def stored() -> bool:
            return any(word in m.statement for m in mem.list(SCOPE, limit=500).items)

        assert await asyncio.to_thread(wait_for, stored, 30)
        target = next(m for m in mem.list(SCOPE, limit=500).items if word in m.statement)
    recalled = text(await mcp.call_tool("recall", {"query": "favourite city",
                                                   "agent": "bot", "user": "ann"}))
    assert word in recalled
    why = text(await mcp.call_tool("explain", {"memory_id": target.id}))
    assert word in why
    resource = await mcp.read_resource("sleepmem://memories/bot/ann")
    listed = json.loads(resource.contents[0].text)
    assert target.id in {m["id"] for m in listed}
    receipt = json.loads(text(await mcp.call_tool("forget", {"memory_id": target.id})))
    assert receipt["memory_id"] == target.id


class TestMcpOverStdio:
    def test_the_sdk_client_remembers_recalls_explains_and_forgets(self, server: Runtime) -> None:
        params = mcp_over_stdio(server.settings.data_dir)

        async def run() -> None:
            async with McpClient(params) as mcp:
                await exercise(mcp, server, "Lisbon")

        asyncio.run(run())


class TestMcpOverHttp:
    def test_the_mount_on_the_api_serves_the_same_tools_with_the_callers_key(
        self, server: Runtime
    ) -> None:
        assert server.local_key is not None
        headers = {"Authorization": f"Bearer {server.local_key.key}"}

        async def run() -> None:
            http = create_mcp_http_client(headers=headers)
            async with McpClient(streamable_http_client(f"{server.api_url}/mcp",
                                                        http_client=http)) as mcp:
                await exercise(mcp, server, "Porto")

        asyncio.run(run())

    def test_the_mount_refuses_a_caller_without_a_key(self, server: Runtime) -> None:
        import httpx

        resp = httpx.post(f"{server.api_url}/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                         "method": "tools/list"})
        assert resp.status_code == 401
        assert "SLEEPMEM_API_KEY" in resp.json()["error"]["message"]
