"""Never lose a 202: every event is either refused up front with a clear error, or stored.

The inputs are the ones a probe found accepted and then dead-lettered or half-written: NULs
(PostgreSQL cannot store them), lone surrogates (not UTF-8), events whose redacted form
outgrew the size limit, times outside the supported range, and secrets in id fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis as redis_lib
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from test_drain import drain_all, rows

from sleepmem.adapters.redis import stream
from sleepmem.bench.secrets import secret_corpus
from sleepmem.core.errors import ValidationError
from sleepmem.core.keys import Keys
from sleepmem.core.redaction import MAX_GROWTH, redact, redact_json
from sleepmem.core.settings import Settings
from sleepmem.sdk import MemoryClient

LIMIT = 2048
# A secret whose marker is longer than it: "pin 123456" becomes "pin [REDACTED:one_time_code]".
GROWS = "pin 123456. " * (LIMIT // 12)

GITHUB_TOKEN = "ghp_9aZbY8cX7dW6eV5fU4gT3hS2iR1jQ0kPlMn"
PROBLEMS: dict[str, tuple[dict[str, Any], str, str]] = {
    # name: (event fields, the field named in the error, a phrase of its message)
    "nul in content": ({"content": "a\x00b"}, "content", "NUL"),
    "nul in a meta value": ({"content": "x", "meta": {"k": "a\x00b"}}, "meta", "NUL"),
    "nul in a meta key": ({"content": "x", "meta": {"a\x00": 1}}, "meta", "NUL"),
    "lone surrogate in content": ({"content": "caf\ud800"}, "content", "surrogate"),
    "lone surrogate in meta": ({"content": "x", "meta": {"k": "\udfff"}}, "meta", "UTF-8"),
    "outgrows the limit once redacted": ({"content": GROWS}, "content", "after its secrets"),
    "time before year 1 in UTC": ({"content": "x", "at": "0001-01-01T00:00:00+05:00"}, "at",
                                  "supported range"),
    "a key in the user id": ({"content": "x", "user": "sk-proj-Q3vX9mT2LpA8wZr5Kd7YbN1c"},
                             "user", "secret"),
    "a key in the event id": ({"content": "x", "event_id": GITHUB_TOKEN}, "event_id", "secret"),
}  # fmt: skip

GOOD: dict[str, dict[str, Any]] = {
    "chinese and emoji": {"content": "我住在上海 🏙️，喜欢喝茶"},
    "a secret that still fits": {"content": "my password is hunter2-Prod! " * 4},
    "exactly at the limit": {"content": "a" * LIMIT},
    "an escaped nul as text": {"content": "the byte \\x00 ends C strings"},
    "the latest time": {"content": "x", "at": "9999-12-30T00:00:00Z"},
    "an id that only looks random": {"content": "x", "user": "V1StGXR8_Z5jdHi6B-myT"},
}


@pytest.fixture
def cfg(settings: Settings, sql_url: str) -> Settings:
    return settings.model_copy(
        update={"database_url": sql_url, "content_max_bytes": LIMIT, "meta_max_bytes": 1024}
    )


@pytest.fixture
def client(cfg: Settings) -> Iterator[MemoryClient]:
    with MemoryClient(cfg, tenant="acme", agent="bot", user="u1") as c:
        yield c


def _length(redis: redis_lib.Redis, keys: Keys) -> int:
    return int(redis.xlen(keys.events)) if redis.exists(keys.events) else 0


class TestEachProblemIsRefusedUpFront:
    @pytest.mark.parametrize("name", list(PROBLEMS))
    def test_the_sdk_refuses_it_naming_the_field_and_writes_nothing(
        self, name: str, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        fields, field, phrase = PROBLEMS[name]
        with pytest.raises(ValidationError) as err:
            client.emit(**fields)
        assert err.value.field == field
        assert phrase.lower() in err.value.message.lower()
        assert _length(redis, keys) == 0

    def test_a_bad_event_in_a_big_batch_writes_none_of_it(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        batch: list[dict[str, Any]] = [{"content": f"note {i}"} for i in range(600)]
        batch[450] = {"content": "caf\ud800"}
        with pytest.raises(ValidationError) as err:
            client.emit_many(batch)
        assert err.value.field == "events[450].content"
        assert _length(redis, keys) == 0

    def test_http_answers_422_with_the_field_and_no_value(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        from sleepmem.api.app import create_app

        with TestClient(create_app(cfg)) as http:
            for name, (fields, field, _phrase) in PROBLEMS.items():
                if name.startswith("lone surrogate"):
                    continue  # JSON text cannot carry one to the server as a str
                body = {"tenant": "acme", "agent": "bot", **fields}
                resp = http.post("/v1/events", json=body)
                assert resp.status_code == 422, (name, resp.text)
                assert resp.json()["error"]["field"].endswith(field), name
                assert "sk-proj" not in resp.text and "ghp_" not in resp.text
        assert _length(redis, keys) == 0


class TestEverythingAcceptedIsStored:
    def test_each_good_event_reaches_the_raw_log_on_both_databases(
        self,
        client: MemoryClient,
        redis: redis_lib.Redis,
        keys: Keys,
        engine: Engine,
        cfg: Settings,
    ) -> None:
        ids = [client.emit(**fields) for fields in GOOD.values()]
        ids += client.emit_many(list(GOOD.values()))
        drain_all(redis, keys, engine, cfg)
        stored = {r["event_id"] for r in rows(engine)}
        assert stored == set(ids)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM dead_letter")).scalar() == 0
        assert stream.backlog(redis, keys) == {"length": 0, "pending": 0}

    def test_the_stored_content_is_what_was_accepted_redacted_once(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        cfg: Settings,
    ) -> None:  # fmt: skip
        event_id = client.emit(content="card 4111 1111 1111 1111, https://u:pa55w0rd9@h/x")
        drain_all(redis, keys, engine, cfg)
        (row,) = [r for r in rows(engine) if r["event_id"] == event_id]
        assert row["content"] == "card [REDACTED:card_number], https://u:[REDACTED:password]@h/x"


class TestRedactionGrowthIsBounded:
    """Small events skip the size re-check because redaction grows text by MAX_GROWTH at most."""

    @pytest.mark.parametrize(
        "text",
        [
            "pw:x " * 50,
            "pin 1234 " * 50,
            "a://:x@h " * 50,
            '{"pw": 1} ' * 50,
            "验证码1234，" * 50,
            "code 1234. " * 50,
            *(case.text for case in secret_corpus(per_kind=1)),
        ],
    )
    def test_no_text_grows_past_the_bound(self, text: str) -> None:
        grown = len(redact(text).text.encode()) / len(text.encode())
        assert grown <= MAX_GROWTH

    def test_a_meta_of_secret_named_keys_stays_within_the_bound(self) -> None:
        meta = {f"pw{i}": i for i in range(10)} | {"pin": 1, "otp": 2}
        before = len(orjson.dumps(meta))
        assert len(orjson.dumps(redact_json(meta))) <= MAX_GROWTH * before
