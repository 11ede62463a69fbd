"""A credential said in one message and its value in the next: the value never reaches a store.

"my bank pin is in the next message" / "4471": each message alone holds no secret. The
redaction of the ingest path reads each message after the one before it in the same
session, whether the two come in one batch, in two emits, or straight from a client that
XADDs without the SDK (the drain's own redaction).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis as redis_lib
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sleepmem.adapters.redis import stream
from sleepmem.adapters.sql import make_engine
from sleepmem.core.keys import Keys
from sleepmem.core.redaction import TurnContext, TurnContexts, redact_texts
from sleepmem.core.settings import Settings
from sleepmem.ingest.drain import drain_once
from sleepmem.ingest.validation import validate_event
from sleepmem.sdk import MemoryClient

INTENT = "my bank pin is in the next message"
PIN = "4471"
PASSWORD = "bluejay42"


def _stream_bytes(redis: redis_lib.Redis, keys: Keys) -> bytes:
    return b"\n".join(v for _id, fields in redis.xrange(keys.events) for v in fields.values())


@pytest.fixture
def client(settings: Settings) -> Iterator[MemoryClient]:
    with MemoryClient(settings, tenant="acme", agent="bot", user="ann") as c:
        yield c


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    eng = make_engine(settings.database_url)
    yield eng
    eng.dispose()


def _contents(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.text("SELECT content FROM raw_event ORDER BY at"))]


class TestOneTurn:
    def test_the_value_in_the_next_message_is_redacted(self) -> None:
        turn = TurnContext()
        assert turn.redact_text(INTENT) == INTENT
        assert turn.redact(PIN).text == "[REDACTED:password]"

    def test_a_question_and_its_answer_are_one_turn(self) -> None:
        turn = TurnContext()
        turn.redact_text("what's the wifi password?")
        assert PASSWORD not in turn.redact_text(PASSWORD)

    def test_chinese_too(self) -> None:
        turn = TurnContext()
        turn.redact_text("密码在下一条消息里")
        assert "19900307" not in turn.redact_text("19900307")

    def test_a_noun_that_had_its_value_waits_for_nothing(self) -> None:
        turn = TurnContext()
        turn.redact_text("my password is hunter22")
        assert turn.redact_text("the table seats 1234 people") == "the table seats 1234 people"

    def test_only_the_next_message_is_read_after_the_noun(self) -> None:
        turn = TurnContext()
        turn.redact_text(INTENT)
        turn.redact_text("ok, go ahead")
        assert turn.redact_text("room 4471 is free") == "room 4471 is free"

    def test_another_session_is_another_turn(self) -> None:
        turns = TurnContexts()
        sessions = ["s1", "s2", "s1"]
        out = redact_texts([INTENT, PIN, PIN], turns, sessions.__getitem__)
        assert out == [INTENT, PIN, "[REDACTED:password]"]

    def test_only_redacted_text_is_kept_and_the_sessions_are_bounded(self) -> None:
        turns = TurnContexts(max_sessions=2)
        for session in ("a", "b", "c"):
            turns.redact_text(session, f"my pw is hunter22 and the {session} pin comes next")
        assert set(turns.waiting) == {"b", "c"}
        assert all("hunter22" not in w for w in turns.waiting.values())


class TestTheIngestPath:
    def test_two_emits_of_one_session_leave_no_pin_in_the_stream(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        client.emit(session="s1", content=INTENT)
        client.emit(session="s2", content="the meeting is in room 4471")  # another session
        client.emit(session="s1", content=PIN)
        blob = _stream_bytes(redis, keys)
        assert b"room 4471" in blob
        assert blob.count(PIN.encode()) == 1
        assert b"[REDACTED:password]" in blob

    def test_one_batch_is_read_message_after_message(
        self, client: MemoryClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        client.emit_many(
            [
                {"session": "s1", "content": "what's the wifi password?"},
                {"session": "s1", "content": PASSWORD},
                {"session": "s1", "content": "thanks, and the door code?"},
            ]
        )
        assert PASSWORD.encode() not in _stream_bytes(redis, keys)

    def test_the_drain_redacts_what_a_client_xadds_without_the_sdk(
        self, settings: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine
    ) -> None:
        stream.ensure_group(redis, keys)
        for content in (INTENT, PIN):
            fields: dict[str, Any] = validate_event(
                {"tenant": "acme", "agent": "bot", "user": "ann", "session": "raw",
                 "content": content}
            )  # fmt: skip
            redis.xadd(keys.events, {stream.FIELD: orjson.dumps(fields)})
        while drain_once(
            redis=redis, keys=keys, engine=engine, settings=settings, consumer="c1"
        ).entries:
            pass
        contents = _contents(engine)
        assert INTENT in contents and PIN not in " ".join(contents)
