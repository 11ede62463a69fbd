"""``GET /ui``: the memory inspector, one static page (HTML + vanilla JS, no build step).

The page itself is public and holds no data; everything it shows comes from the ``/v1``
routes with the API key the operator types in (kept in the tab's sessionStorage).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["inspector"])


@cache
def _page() -> str:
    return (resources.files("sleepmem.api") / "static" / "inspector.html").read_text("utf-8")


@router.get("/ui", response_class=HTMLResponse, summary="The memory inspector page")
async def inspector() -> HTMLResponse:
    return HTMLResponse(
        _page(),
        headers={
            # Everything the page runs is inline in it; nothing else may load or frame it.
            "Content-Security-Policy": (
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                "connect-src 'self'; frame-ancestors 'none'"
            ),
            "Cache-Control": "no-store",
        },
    )
