"""Erasure: a scope (or one memory) leaves no trace in SQL, vectors, Redis or logs."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from datetime import timedelta

import orjson
import pytest
import redis as redis_lib
import sqlalchemy as sa
from lifecycle_support import DAY, T0, Clock, current, ingest, say
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, col, select

from sleepmem.adapters.redis.erase import RedisHotStore
from sleepmem.adapters.redis.hits import read_hits, record_hits
from sleepmem.adapters.redis.stream import append
from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.core.errors import NotFoundError
from sleepmem.core.keys import Keys
from sleepmem.core.logs import configure_logging
from sleepmem.core.settings import Settings
from sleepmem.ingest.validation import validate_events
from sleepmem.models import Audit, DeadLetter, Scope, SearchRequest
from sleepmem.pipelines.lifecycle.erase import erase_memory, erase_scope
from sleepmem.pipelines.lifecycle.explain import explain
from sleepmem.pipelines.lifecycle.pseudonyms import pseudonym
from sleepmem.pipelines.lifecycle.reconsolidate import create_job, run_job
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.read.rank import RankWeights
from sleepmem.pipelines.read.retrieve import search

ANN = Scope(tenant="acme", agent="bot", user="ann")
ANN_PROJECT = Scope(tenant="acme", agent="bot", user="ann", project="garden")
BOB = Scope(tenant="acme", agent="bot", user="bob")
SECRET_WORDS = ("Marguerite", "Aldhelm", "Wisteria")
AUDIT_KEY = b"the deployment's audit key"


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    configure_logging(level="DEBUG", json=True, stream=buf)
    yield buf
    configure_logging()


def hot(ports: Ports, redis: redis_lib.Redis, keys: Keys) -> Ports:
    """The ports with the Redis side of erasure, as a worker's resources build them."""
    return dataclasses.replace(ports, hot=RedisHotStore(redis, keys))


def scan_sql(engine: Engine, needle: str) -> list[str]:
    found = []
    with Session(engine) as s:
        for table in SQLModel.metadata.sorted_tables:
            for r in s.execute(sa.select(table)):
                if any(needle.casefold() in str(v).casefold() for v in r):
                    found.append(table.name)
                    break
    return found


def scan_redis(redis: redis_lib.Redis, keys: Keys, needle: str) -> list[str]:
    raw = needle.encode().lower()
    found = []
    for key in redis.scan_iter(match=keys.pattern(), count=1000):
        kind = redis.type(key).decode()
        blobs: list[bytes] = [key]
        if kind == "string":
            blobs.append(redis.get(key) or b"")
        elif kind == "stream":
            blobs += [b"".join(k + v for k, v in f.items()) for _, f in redis.xrange(key)]
        elif kind == "hash":
            blobs += [k + v for k, v in redis.hgetall(key).items()]
        if any(raw in b.lower() for b in blobs):
            found.append(key.decode())
    return found


def scan_index(index: EdgeIndex, needle: str) -> bool:
    payloads = index.payloads(index.all_ids())
    return needle.casefold() in json.dumps(payloads).casefold()


@pytest.fixture
def world(
    redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings, ports: Ports,
    clock: Clock,
) -> dict[str, list[str]]:
    """Ann (and her garden project) and Bob, consolidated; plus Ann's leftovers everywhere."""
    ingest(redis, keys, engine, settings, ports, [
        say("I'm going through a divorce with Marguerite and it's been hard.", at=T0,
            scope=ANN),
        say("I work as a nurse at Saint Aldhelm hospital.", at=T0 + timedelta(minutes=1),
            scope=ANN),
        say("The garden project needs Wisteria seeds by May.", at=T0, scope=ANN_PROJECT),
        say("I work as a carpenter in Leeds.", at=T0, scope=BOB),
    ])
    ann_ids = [m.id for m in current(engine, ANN.owner.key)]
    ann_ids += [m.id for m in current(engine, ANN_PROJECT.owner.key)]
    bob_ids = [m.id for m in current(engine, BOB.owner.key)]
    # Not yet drained, a dead letter, hits, a trigger marker and a job quoting statements.
    append(redis, keys, validate_events([say("Marguerite called again today.", at=T0 + DAY,
                                              scope=ANN)]))
    with Session(engine) as s:
        s.add(DeadLetter(stream_id="9-9", error="boom", payload=orjson.dumps(
            say("Marguerite's lawyer wrote.", at=T0, scope=ANN).model_dump(mode="json")
        ).decode()))
        s.commit()
    record_hits(redis, keys, [ann_ids[0], bob_ids[0]], at=T0 + DAY)
    record_hits(redis, keys, [ann_ids[0]], at=T0 + DAY)
    redis.set(keys.queued(ANN.owner.key), "idle")
    job = create_job(engine=engine, scope_key=ANN.owner.key, now=clock.now)
    run_job(engine=engine, ports=ports, settings=settings, job_id=job.id)
    assert ann_ids and bob_ids
    assert scan_sql(engine, "Marguerite") and scan_redis(redis, keys, "Marguerite")
    # The names are entities too: the scans below must find them gone from those tables.
    for word in SECRET_WORDS:
        assert {"entity", "entity_alias"} <= set(scan_sql(engine, word)), word
    return {"ann": ann_ids, "bob": bob_ids}


class TestEraseScope:
    def test_every_store_scanned_afterwards_holds_nothing_of_the_scope(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, ports: Ports,
        index: EdgeIndex, world: dict[str, list[str]], logs: io.StringIO,
    ) -> None:
        receipt = erase_scope(engine=engine, ports=hot(ports, redis, keys),
                              scope=ANN.owner.key, audit_key=AUDIT_KEY)
        for word in SECRET_WORDS:
            assert scan_sql(engine, word) == [], word
            assert scan_redis(redis, keys, word) == [], word
            assert not scan_index(index, word)
            assert word.casefold() not in logs.getvalue().casefold()
        for mid in world["ann"]:
            assert scan_redis(redis, keys, mid) == []
            assert index.payloads([mid]) == {}
        assert scan_redis(redis, keys, "lease") == [] and not redis.exists(
            keys.queued(ANN.owner.key))
        assert receipt.removed["memories"] == len(world["ann"])
        assert receipt.removed["raw_events"] == 3
        assert receipt.removed["stream_entries"] == 1
        assert receipt.removed["dead_letters"] == 1
        assert receipt.removed["hit_entries"] == 2
        assert receipt.removed["jobs"] == 1
        assert receipt.removed["entities"] >= len(SECRET_WORDS)
        assert len(receipt.content_hash) == 64
        assert '"erase"' in logs.getvalue()

    def test_a_sibling_scope_is_untouched(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, ports: Ports,
        index: EdgeIndex, world: dict[str, list[str]],
    ) -> None:
        erase_scope(engine=engine, ports=hot(ports, redis, keys), scope=ANN.owner.key,
                    audit_key=AUDIT_KEY)
        assert {"raw_event", "memory"} <= set(scan_sql(engine, "carpenter"))
        assert set(index.payloads(world["bob"])) == set(world["bob"])
        # Bob's id survives in the hit entry that named both of them.
        assert any(world["bob"][0] in ids for _e, ids, _t in read_hits(redis, keys))

    def test_search_explain_and_reconsolidation_afterwards_find_nothing(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, ports: Ports,
        settings: Settings, clock: Clock, world: dict[str, list[str]],
    ) -> None:
        erase_scope(engine=engine, ports=hot(ports, redis, keys), scope=ANN.owner.key,
                    audit_key=AUDIT_KEY)
        found = search(engine=engine, ports=ports, weights=RankWeights(),
                       request=SearchRequest(query="divorce nurse hospital", scope=ANN_PROJECT))
        assert found.cards == []
        with pytest.raises(NotFoundError, match="erased"):
            explain(engine=engine, memory_id=world["ann"][0], settings=settings, now=clock.now)
        job = run_job(engine=engine, ports=ports, settings=settings, job_id=create_job(
            engine=engine, scope_key=ANN.owner.key, now=clock.now).id)
        assert job.total == 0 and job.result["counts"] == {
            "added": 0, "removed": 0, "changed": 0, "unchanged": 0, "held": 0}

    def test_the_audit_keeps_ids_counts_and_a_hash_and_a_second_erasure_counts_zero(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, ports: Ports,
        world: dict[str, list[str]],
    ) -> None:
        first = erase_scope(engine=engine, ports=hot(ports, redis, keys),
                            scope=ANN.owner.key, audit_key=AUDIT_KEY)
        second = erase_scope(engine=engine, ports=hot(ports, redis, keys),
                             scope=ANN.owner.key, audit_key=AUDIT_KEY)
        with Session(engine) as s:
            # In the order written: PostgreSQL returns rows in any order without ORDER BY.
            erased = s.exec(select(Audit).where(Audit.op == "ERASE").order_by(col(Audit.id))).all()
        assert set(world["ann"]) <= {i for a in erased for i in a.memory_ids_before}
        assert {a.content_hash for a in erased} == {first.content_hash, second.content_hash}
        assert f"receipt {first.receipt_id}" in erased[0].reason
        assert sum(second.removed.values()) == 0


class TestTheAuditAfterAnErasure:
    def test_keeps_the_scopes_rows_under_a_keyed_pseudonym_and_never_the_user_id(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, ports: Ports,
        world: dict[str, list[str]],
    ) -> None:
        def audit_keys() -> list[str]:
            with Session(engine) as s:
                return list(s.exec(select(Audit.scope_key)).all())

        before = audit_keys()
        ann_rows = sum(1 for k in before if "/u=ann/" in k)
        bob_rows = before.count(BOB.owner.key)
        assert ann_rows > 0 and bob_rows > 0
        receipt = erase_scope(engine=engine, ports=hot(ports, redis, keys),
                              scope=ANN.owner.key, audit_key=AUDIT_KEY)
        after = audit_keys()
        hidden = pseudonym(ANN.owner.key, key=AUDIT_KEY)
        assert hidden.startswith("t=acme/a=bot/u=~") and "ann" not in hidden
        assert receipt.scope_key == hidden
        assert receipt.removed["audit_rows_pseudonymised"] == ann_rows
        # Every row kept (and one more: the erasure's), none naming the user.
        assert len(after) == len(before) + 1
        assert [k for k in after if "u=ann" in k] == []
        assert after.count(hidden) >= 2 and after.count(BOB.owner.key) == bob_rows
        assert scan_sql(engine, "u=ann/") == []
        # Keyed: another deployment's key gives another pseudonym; the same key, the same.
        assert pseudonym(ANN.owner.key, key=b"another key") != hidden
        assert pseudonym(hidden, key=AUDIT_KEY) == hidden
        again = erase_scope(engine=engine, ports=hot(ports, redis, keys),
                            scope=ANN.owner.key, audit_key=AUDIT_KEY)
        assert again.removed["audit_rows_pseudonymised"] == 0


class TestEraseMemory:
    def test_one_memory_goes_with_its_events_and_the_rest_of_the_scope_stays(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, ports: Ports,
        index: EdgeIndex, world: dict[str, list[str]],
    ) -> None:
        (divorce,) = [m for m in current(engine, ANN.owner.key) if "divorce" in m.statement]
        receipt = erase_memory(engine=engine, ports=hot(ports, redis, keys),
                               memory_id=divorce.id)
        assert receipt.removed["memories"] >= 1 and receipt.removed["raw_events"] == 1
        assert index.payloads([divorce.id]) == {}
        assert scan_sql(engine, "divorce") == []  # events, versions, job diffs
        # The name only that memory mentioned goes with it; the hospital's stays.
        assert not {"entity", "entity_alias"} & set(scan_sql(engine, "Marguerite"))
        assert {"entity", "entity_alias"} <= set(scan_sql(engine, "Aldhelm"))
        assert divorce.id not in {i for _e, ids, _t in read_hits(redis, keys) for i in ids}
        assert [m.statement for m in current(engine, ANN.owner.key)
                if "nurse" in m.statement]
        with pytest.raises(NotFoundError):
            erase_memory(engine=engine, ports=hot(ports, redis, keys),
                         memory_id=divorce.id)
