"""A slice of the suite on the default configuration: the USE embedder (usem), not the
hashing one most tests use for speed.

Events go in through the SDK, the drain and the consolidate task's code; search runs the
production reader. What the hashing embedder cannot do, and USE must, is match meaning
across wording and language.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis as redis_lib
from sqlalchemy.engine import Engine
from support import blas_threads

from sleepmem.core.settings import Settings
from sleepmem.ingest.drain import drain_once
from sleepmem.models import Scope
from sleepmem.pipelines.write.consolidate import consolidate_scope
from sleepmem.reader import Reader, build_request
from sleepmem.resources import Resources, build_resources
from sleepmem.sdk import MemoryClient
from sleepmem.services import run_consolidation

USER = Scope(tenant="acme", agent="assistant", user="mei")


@pytest.fixture
def settings(settings: Settings, sql_url: str, engine: Engine) -> Settings:
    """The default embedder, on SQLite and on PostgreSQL."""
    default = Settings(_env_file=None).embedder  # type: ignore[call-arg]
    assert default == "usem"
    return settings.model_copy(update={"embedder": default, "database_url": sql_url,
                                       "embed_threads": blas_threads()})


@pytest.fixture
def res(settings: Settings, redis: redis_lib.Redis) -> Iterator[Resources]:
    resources = build_resources(settings)
    yield resources
    resources.close()


def remember(res: Resources, *contents: str) -> None:
    with MemoryClient(res.settings, client=res.redis, tenant=USER.tenant, agent=USER.agent,
                      user=USER.user) as client:
        client.emit_many([{"content": c} for c in contents])
    while drain_once(redis=res.redis, keys=res.keys, engine=res.engine, settings=res.settings,
                     consumer="test").read:
        pass
    run_consolidation(res, scope_key=USER.key, pipeline=consolidate_scope)


def top(res: Resources, query: str) -> str:
    cards = Reader(res).search(build_request(query, scope=USER, k=3)).flat()
    assert cards, f"nothing found for {query!r}"
    return cards[0].statement


class TestDefaultEmbedder:
    def test_it_is_the_multilingual_use_model(self, res: Resources) -> None:
        assert res.embedder.name.startswith("usem")

    def test_a_paraphrase_and_a_chinese_query_find_the_right_memory(
        self, res: Resources
    ) -> None:
        remember(
            res,
            "I work as a pharmacist at Riverside Clinic.",
            "My favourite colour is amber.",
            "I enjoy kayaking on weekends.",
            "我对花生过敏，一吃就喘不过气。",
        )
        assert "pharmacist" in top(res, "What is the user's job?")
        assert "kayaking" in top(res, "What does the user do on Saturdays for fun?")
        assert "花生" in top(res, "Does the user have any food allergies?")
        assert "kayaking" in top(res, "用户周末喜欢做什么运动？")
