"""What the API's request handlers share, built once in the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis
from fastapi import Request

from sleepmem.adapters.redis.appender import GroupAppender
from sleepmem.core.keys import Keys
from sleepmem.models.events import Limits
from sleepmem.resources import Resources


@dataclass(frozen=True, slots=True)
class ApiState:
    resources: Resources
    redis: aioredis.Redis  # async twin of resources.redis, for the event loop
    appender: GroupAppender
    keys: Keys
    limits: Limits
    max_batch: int


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state
