"""The SDK's request path: validate, redact, one XADD. Nothing else happens on it."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import orjson
import pytest
import redis as redis_lib

from sleepmem.adapters.redis.embedded import EmbeddedRedis
from sleepmem.adapters.redis.stream import SEND_CHUNK, append, encode, encode_many
from sleepmem.core.errors import AuthError, ConfigurationError, ForbiddenError, ValidationError
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.ingest.validation import validate_events
from sleepmem.models.events import Event, EventFields, EventKind
from sleepmem.sdk import MemoryClient


def stream_events(redis: redis_lib.Redis, keys: Keys) -> list[dict[str, object]]:
    return [orjson.loads(fields[b"e"]) for _id, fields in redis.xrange(keys.events)]


@pytest.fixture
def client(settings: Settings) -> MemoryClient:
    return MemoryClient(settings, tenant="acme", agent="support-bot", user="u1")


class TestEmit:
    def test_one_emit_appends_one_entry_and_returns_its_event_id(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        event_id = client.emit(content="I prefer window seats", session="s1")
        entries = stream_events(redis, keys)
        assert [e["event_id"] for e in entries] == [event_id]
        assert entries[0]["content"] == "I prefer window seats"
        assert (entries[0]["tenant"], entries[0]["user"], entries[0]["session"]) == (
            "acme",
            "u1",
            "s1",
        )

    def test_a_client_supplied_event_id_is_kept(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        assert client.emit(event_id="evt-1", content="x") == "evt-1"
        assert stream_events(redis, keys)[0]["event_id"] == "evt-1"

    def test_an_event_object_can_be_emitted(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        event = Event(tenant="acme", agent="a", kind=EventKind.session_end, content="")
        assert client.emit(event) == event.event_id
        assert stream_events(redis, keys)[0]["kind"] == "session_end"

    def test_an_event_and_keyword_fields_together_are_refused(self, client: MemoryClient) -> None:
        with pytest.raises(ValidationError) as caught:
            client.emit(Event(tenant="acme", agent="a"), content="x")
        assert caught.value.field == "event"

    def test_an_invalid_event_is_refused_and_nothing_is_written(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            client.emit(content="x", kind="chat")
        assert caught.value.field == "kind"
        assert redis.exists(keys.events) == 0

    def test_secrets_are_redacted_before_they_reach_redis(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        client.emit(
            content="my password is hunter2-Prod! and card 4111 1111 1111 1111",
            meta={"api_key": "sk-proj-Q3vX9mT2LpA8wZr5Kd7YbN1c", "note": "OTP 482913"},
        )
        raw = b"".join(fields[b"e"] for _id, fields in redis.xrange(keys.events))
        for secret in (b"hunter2", b"4111 1111", b"sk-proj-Q3vX", b"482913"):
            assert secret not in raw
        assert b"[REDACTED:password]" in raw

    def test_emit_touches_no_sql(self, tmp_path: Path, namespace: str) -> None:
        settings = Settings(
            data_dir=tmp_path / "data",
            redis_url="redis://127.0.0.1:6379/0",
            namespace=namespace,
            _env_file=None,
        )
        with MemoryClient(settings, tenant="t", agent="a") as client:
            client.emit(content="x")
        assert not (tmp_path / "data" / "sleepmem.db").exists()
        cleanup = redis_lib.Redis.from_url("redis://127.0.0.1:6379/0")
        cleanup.delete(Keys(namespace).events)


class TestEmitMany:
    def test_a_batch_is_appended_in_order_with_one_id_each(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        ids = client.emit_many([{"content": f"m{i}"} for i in range(25)])
        entries = stream_events(redis, keys)
        assert [e["event_id"] for e in entries] == ids
        assert [e["content"] for e in entries] == [f"m{i}" for i in range(25)]

    def test_a_batch_larger_than_one_chunk_is_fully_written(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        ids = client.emit_many([{"content": "x"}] * 2500)
        assert len(set(ids)) == 2500
        assert redis.xlen(keys.events) == 2500

    def test_stream_ids_across_chunks_point_at_their_own_events(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        events = validate_events(
            [{"tenant": "t", "agent": "a", "content": f"m{i}"} for i in range(SEND_CHUNK * 3 + 7)]
        )
        ids = append(redis, keys, events)
        entries = redis.xrange(keys.events)
        by_id = {mid.decode(): orjson.loads(f[b"e"])["content"] for mid, f in entries}
        assert [by_id[i] for i in ids] == [f"m{i}" for i in range(len(events))]

    def test_a_batch_lands_whole_after_the_server_forgot_the_script(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        redis.script_flush()
        ids = client.emit_many([{"content": f"m{i}"} for i in range(SEND_CHUNK + 1)])
        entries = stream_events(redis, keys)
        assert [e["event_id"] for e in entries] == ids

    def test_one_bad_event_refuses_the_batch_and_names_its_index(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        batch = [{"content": "ok"}, {"content": "ok"}, {"content": "bad", "role": "robot"}]
        with pytest.raises(ValidationError) as caught:
            client.emit_many(batch)
        assert caught.value.field == "events[2].role"
        assert "must be one of user, assistant, tool, system" in caught.value.message
        assert redis.exists(keys.events) == 0

    def test_an_empty_batch_writes_nothing(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        assert client.emit_many([]) == []
        assert redis.exists(keys.events) == 0

    def test_the_stream_ids_come_back_from_the_adapter(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        events = validate_events([{"tenant": "t", "agent": "a", "content": c} for c in "abc"])
        ids = append(redis, keys, events)
        assert ids == [mid.decode() for mid, _ in redis.xrange(keys.events)]


_BATCH_EVENTS: list[dict[str, object]] = [
    {"content": "plain", "meta": {"channel": "chat"}},
    {"content": "my password is hunter2!", "meta": {"token": "abc"}},
    {"content": "记住我的座位偏好：靠窗", "kind": "feedback", "role": "assistant"},
    {"content": 'quotes "},{\"event_id\":" in text', "meta": {"n": [1, 2.5, None]}},
    {"meta": {"nested": [{"a": 1}, {"event_id": "not-the-event"}]}},
    {"content": ""},
]


class TestBatchPayloads:
    """A batch is serialised once and cut into payloads: each must be byte for byte what
    encoding its event alone gives, whatever the events hold."""

    def events(self, items: list[dict[str, object]]) -> list[EventFields]:
        return validate_events([{"tenant": "t", "agent": "a", **e} for e in items])

    def test_every_payload_is_the_one_its_event_alone_encodes_to(self) -> None:
        events = self.events(_BATCH_EVENTS[:4] * 3)
        assert encode_many(events) == [encode(e) for e in events]

    def test_an_event_id_key_inside_meta_does_not_move_a_cut(self) -> None:
        events = self.events(_BATCH_EVENTS)
        payloads = encode_many(events)
        assert payloads == [encode(e) for e in events]
        assert [orjson.loads(p)["event_id"] for p in payloads] == [e["event_id"] for e in events]

    def test_an_event_whose_id_is_not_its_first_field_is_cut_right(self) -> None:
        events = self.events(_BATCH_EVENTS[:3])
        moved = {k: v for k, v in events[1].items() if k != "event_id"}
        events[1] = cast(EventFields, {**moved, "event_id": events[1]["event_id"]})
        assert encode_many(events) == [encode(e) for e in events]

    def test_no_secret_reaches_a_payload(self) -> None:
        payloads = encode_many(self.events(_BATCH_EVENTS))
        # Looked for in what the caller gave (content, meta), not in the generated event
        # id: a random hex id holds "abc" by chance in about one run of thirty.
        given = [orjson.dumps({k: v for k, v in orjson.loads(p).items() if k != "event_id"})
                 for p in payloads]
        assert not any(b"hunter2" in p or b"abc" in p for p in given)

    def test_one_event_and_none_encode_too(self) -> None:
        one = self.events(_BATCH_EVENTS[:1])
        assert encode_many(one) == [encode(one[0])]
        assert encode_many([]) == []


class TestEmbeddedMode:
    def test_without_a_redis_url_or_a_running_server_the_client_refuses_to_start_one(
        self, tmp_path: Path
    ) -> None:
        settings = Settings(data_dir=tmp_path / "data", _env_file=None)
        with pytest.raises(ConfigurationError, match="SLEEPMEM_REDIS_URL"):
            MemoryClient(settings, tenant="t", agent="a")
        # Nothing was started behind the caller's back.
        assert not (tmp_path / "data" / "redis" / "redis.sock").exists()

    def test_with_the_data_directory_of_a_running_server_the_client_writes_to_it(
        self, tmp_path: Path
    ) -> None:
        settings = Settings(data_dir=tmp_path / "data", _env_file=None)
        server = EmbeddedRedis((tmp_path / "data").resolve()).start()
        direct = redis_lib.Redis(unix_socket_path=str(server.socket))
        client = MemoryClient(settings, tenant="t", agent="a")
        try:
            event_id = client.emit(content="hello embedded")
            entries = direct.xrange(Keys(settings.namespace).events)
            assert [orjson.loads(f[b"e"])["event_id"] for _i, f in entries] == [event_id]
        finally:
            client.close()
            direct.close()
            server.stop()


class TestFastPathTenant:
    """The direct path skips the server, so it holds itself to its configured tenant."""

    def test_an_event_naming_another_tenant_is_refused_and_nothing_is_written(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        with pytest.raises(ForbiddenError, match="may only write tenant 'acme'"):
            client.emit(content="hi", tenant="globex")
        with pytest.raises(ForbiddenError, match=r"events\[1\]\.tenant"):
            client.emit_many([{"content": "ok"}, {"content": "x", "tenant": "globex"}])
        assert redis.exists(keys.events) == 0

    def test_a_key_binds_the_client_to_its_own_tenant(
        self, settings: Settings, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        from pydantic import SecretStr

        cfg = settings.model_copy(update={"api_keys": {"acme": SecretStr("k-acme"),
                                                       "globex": SecretStr("k-globex")}})
        with MemoryClient(cfg, api_key="k-acme", agent="bot") as mine:
            assert mine.tenant == "acme"
            mine.emit(content="mine")  # the tenant comes from the key
            with pytest.raises(ForbiddenError):
                mine.emit(content="theirs", tenant="globex")
        assert [e["tenant"] for e in stream_events(redis, keys)] == ["acme"]

    def test_an_invalid_key_or_a_key_of_another_tenant_is_refused(
        self, settings: Settings
    ) -> None:
        from pydantic import SecretStr

        cfg = settings.model_copy(update={"api_keys": {"acme": SecretStr("k-acme")}})
        with pytest.raises(AuthError, match="not one of SLEEPMEM_API_KEYS"):
            MemoryClient(cfg, api_key="guess", tenant="acme")
        with pytest.raises(ForbiddenError, match="may only write tenant 'acme'"):
            MemoryClient(cfg, api_key="k-acme", tenant="globex")
