"""``sleepmem api``'s server: the start-up heap leaves the collector's sight once start-up is
over, so that full collections under load walk only what requests made."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import uvicorn
from fastapi import FastAPI

from sleepmem.api import serving


async def _start_then_stop(server: uvicorn.Server) -> None:
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    server.should_exit = True
    await task


class TestTheStartUpHeapIsFrozen:
    def test_it_is_frozen_after_the_app_lifespan_has_run(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The lifespan builds the API state and mounts MCP: frozen before it, all of that
        # stayed in the collector's sight (a ~25 ms pause per full collection, measured).
        lifespan_ran: list[bool] = []
        frozen_after_lifespan: list[bool] = []

        @asynccontextmanager
        async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
            lifespan_ran.append(True)
            yield

        monkeypatch.setattr(
            serving, "freeze_heap", lambda: frozen_after_lifespan.append(bool(lifespan_ran))
        )
        config = uvicorn.Config(
            FastAPI(lifespan=lifespan), host="127.0.0.1", port=0, log_config=None
        )
        asyncio.run(_start_then_stop(serving.FreezingServer(config)))
        assert frozen_after_lifespan == [True]

    def test_freezing_moves_the_live_heap_out_of_later_collections(self) -> None:
        try:
            serving.freeze_heap()
            assert gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()
