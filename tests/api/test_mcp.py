"""The MCP server, exercised with the official SDK's own client over stdio (``sleepmem
mcp`` as a subprocess) and over streamable HTTP (the ``/mcp`` mount of a real server)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import mcp_over_stdio, require_extra
from test_client import running_server

from sleepmem.runtime import Runtime

# Without the [mcp] extra every test here is skipped with that reason (an error in CI,
# where scripts/bootstrap installs it).
require_extra("mcp", "mcp")
from mcp import Client as McpClient  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

DEAD_URL = "http://127.0.0.1:9"  # discard: nothing listens


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    with running_server(tmp_path_factory.mktemp("mcp")) as runtime:
        yield runtime


def text(result: Any) -> str:
    assert not result.is_error, result
    return "\n".join(block.text for block in result.content)


async def exercise(mcp: McpClient, runtime: Runtime, word: str) -> None:
    """remember → end_session(wait) → recall → explain and forget by the ids shown, through
    MCP alone."""
    tools = {t.name for t in (await mcp.list_tools()).tools}
    assert {"remember", "end_session", "recall", "forget", "explain", "save_checkpoint",
            "checkpoint"} <= tools
    task = {"session": f"task-{word}", "agent": "bot", "user": "ann"}
    saved = json.loads(text(await mcp.call_tool("save_checkpoint", {
        **task, "base_version": 0,
        "state": {"goal": f"Plan a trip to {word}", "completed": [{"key": "visa"}]}})))
    assert saved["version"] == 1
    read = json.loads(text(await mcp.call_tool("checkpoint", task)))
    assert read["version"] == 1 and read["state"]["completed"][0]["key"] == "visa"
    owner = {"agent": "bot", "user": "ann"}
    event_id = text(await mcp.call_tool("remember", {
        "content": f"My favourite city is {word}.", "session": f"mcp-{word}", **owner}))
    assert len(event_id) >= 16
    ended = text(await mcp.call_tool("end_session", {"session": f"mcp-{word}", "wait": True,
                                                     **owner}))
    assert "recallable now" in ended
    recalled = text(await mcp.call_tool("recall", {"query": "favourite city", **owner}))
    line = next(ln for ln in recalled.splitlines() if word in ln)
    ref = re.search(r"\[#\w+\]", line)
    assert ref is not None, recalled
    why = text(await mcp.call_tool("explain", {"memory_id": ref.group(0), **owner}))
    assert word in why
    full_id = why.splitlines()[0].removeprefix("memory ")
    assert full_id.startswith(ref.group(0)[2:-1])
    # The event id `remember` showed names the memory it became.
    assert text(await mcp.call_tool("explain", {"memory_id": event_id, **owner})) == why
    resource = await mcp.read_resource("sleepmem://memories/bot/ann")
    listed = json.loads(resource.contents[0].text)
    assert full_id in {m["id"] for m in listed}
    receipt = json.loads(text(await mcp.call_tool("forget", {"memory_id": ref.group(0)[1:-1],
                                                             **owner})))
    assert receipt["memory_id"] == full_id
    gone = await mcp.call_tool("explain", {"memory_id": full_id, **owner})
    assert gone.is_error and full_id in error_text(gone)
    unknown = await mcp.call_tool("forget", {"memory_id": "#zzzzzz", **owner})
    assert unknown.is_error and "no current memory '#zzzzzz'" in error_text(unknown)


def error_text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


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


class TestMcpSaysWhatIsWrong:
    def test_a_tool_reports_a_server_that_is_down_as_its_error_text(self) -> None:
        from sleepmem.client import AsyncClient
        from sleepmem.mcpserver import build_server

        async def client_for(_ctx: Any) -> AsyncClient:
            return AsyncClient(DEAD_URL, "sm_unused", tenant="default")

        async def run() -> None:
            async with McpClient(build_server(client_for, agent="bot", user="ann")) as mcp:
                result = await mcp.call_tool("recall", {"query": "anything"})
            assert result.is_error
            assert f"sleepmem server at {DEAD_URL} unreachable" in error_text(result)

        asyncio.run(run())

    def test_sleepmem_mcp_refuses_to_start_without_a_server_in_one_line(
        self, tmp_path: Path
    ) -> None:
        params = mcp_over_stdio(tmp_path)
        env = {**(params.env or {}), "SLEEPMEM_API_URL": DEAD_URL, "SLEEPMEM_API_KEY": "sm_x"}
        done = subprocess.run([params.command, *params.args], env=env, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 75
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and DEAD_URL in lines[0], done.stderr

    def test_sleepmem_mcp_refuses_a_key_the_server_does_not_accept(
        self, server: Runtime, tmp_path: Path
    ) -> None:
        params = mcp_over_stdio(tmp_path)
        env = {**(params.env or {}), "SLEEPMEM_API_URL": server.api_url,
               "SLEEPMEM_API_KEY": "sm_not_a_key"}
        done = subprocess.run([params.command, *params.args], env=env, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 4
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
