"""``sleepmem mcp``: the memory as an MCP server on stdio, for agent hosts."""

from __future__ import annotations

from typing import Annotated

import typer

from sleepmem.cli.app import app


@app.command()
def mcp(
    url: Annotated[str | None, typer.Option(help="Server URL (default: SLEEPMEM_API_URL, "
                                                 "else the local key file)")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="SLEEPMEM_API_KEY",
                                                help="Bearer key")] = None,
    agent: Annotated[str, typer.Option(envvar="SLEEPMEM_AGENT", help="Default agent")] = "",
    user: Annotated[str, typer.Option(envvar="SLEEPMEM_USER", help="Default user")] = "",
) -> None:
    """MCP on stdin/stdout: remember, end_session, recall, forget, explain; a resource per scope.

    Every call goes to the running server over HTTP with this key (install sleepmem[mcp])."""
    try:
        from sleepmem.mcpserver import run_stdio
    except ImportError:
        typer.echo("error: the MCP server needs the extra: pip install 'sleepmem[mcp]'", err=True)
        raise typer.Exit(2) from None
    run_stdio(url=url, api_key=api_key, agent=agent, user=user)
