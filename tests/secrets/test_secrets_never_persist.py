"""No secret persists: a corpus of made-up secrets goes in through the SDK and HTTP, and none
of it is found afterwards in SQL, Redis (keys, stream, AOF), the vector index files or logs.

The corpus (sleepmem.bench.secrets) generates each secret in its kind's real format, from a
seed, in English, Chinese and mixed sentences; ``sleepmem bench secrets`` runs larger ones.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st
from sqlmodel import SQLModel
from support import embedded_settings, wait_for

from sleepmem.adapters.sql import make_engine
from sleepmem.bench.secrets import (
    SecretCase,
    found_in,
    kinds,
    leaked,
    locomo_turns,
    run_secret_bench,
    secret_corpus,
)
from sleepmem.core.errors import ValidationError
from sleepmem.core.redaction import redact, redact_json
from sleepmem.runtime import Runtime
from sleepmem.sdk import MemoryClient

CORPUS = secret_corpus()
LOCOMO = Path(os.environ.get("SLEEPMEM_LOCOMO", "/work/shared/data/locomo/locomo_dev8.json"))


class TestTheCorpus:
    def test_it_holds_at_least_300_secrets_of_40_kinds_in_three_languages(self) -> None:
        assert len(CORPUS) >= 300
        assert len({c.kind for c in CORPUS}) == len(kinds()) >= 40
        assert {c.language for c in CORPUS} == {"en", "zh", "mixed"}

    def test_no_secret_survives_redaction(self) -> None:
        left = [(c.kind, c.text) for c in CORPUS if c.secret in redact(c.text).text]
        assert left == []

    def test_a_second_pass_changes_nothing(self) -> None:
        for case in CORPUS:
            once = redact(case.text)
            again = redact(once.text)
            assert again.text == once.text and again.kinds == (), case.text
            assert "[REDACTED:[" not in once.text

    def test_a_bigger_corpus_from_another_seed_is_caught_too(self) -> None:
        report = run_secret_bench(per_kind=12, seed=2026, locomo=None)
        assert report["missed"] == 0, report["missed_kinds"]


class TestTheLeakScan:
    """found_in answers what a search per secret (leaked) answers, in one pass."""

    @examples(max_examples=200, deadline=None)
    @given(st.lists(st.one_of(
        st.sampled_from([c.secret for c in CORPUS[:40]]),
        st.sampled_from(["a", "7", "-", " ", "\n", "é", "中", "=", '"']),
        st.text(max_size=6),
    ), max_size=30))
    def test_it_finds_what_a_search_per_secret_finds(self, pieces: list[str]) -> None:
        blob = "".join(pieces).encode()
        assert found_in(blob, CORPUS) == [c for c in CORPUS if leaked(c.secret, blob)]

    def test_a_secret_inside_another_and_at_the_edges_of_a_blob(self) -> None:
        outer, inner = (SecretCase("k", "en", "", s) for s in ("ab-cd-ef", "cd"))
        assert found_in(b"ab-cd-ef", [outer, inner]) == [outer, inner]
        assert found_in(b"xab-cd-ef", [outer, inner]) == [inner]
        assert found_in(b"ab-cdx-ef", [outer, inner]) == []


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo is not committed; set SLEEPMEM_LOCOMO")
class TestBenignText:
    def test_at_most_one_locomo_turn_in_a_hundred_is_touched(self) -> None:
        turns = list(locomo_turns(LOCOMO))
        changed = [t for t in turns if redact(t).kinds]
        assert len(turns) > 1000
        assert len(changed) / len(turns) <= 0.01, changed[:5]


class TestMetaAndIds:
    def test_secrets_in_meta_keys_and_values_are_redacted(self) -> None:
        case = next(c for c in CORPUS if c.kind == "openai")
        out = redact_json({case.secret: 1, "note": case.text, "nested": [{"k": case.text}]})
        assert case.secret not in repr(out)
        assert next(iter(out)) == "[REDACTED:api_key]"

    @pytest.mark.parametrize("field", ["event_id", "tenant", "agent", "user", "project", "session"])
    def test_a_secret_in_an_id_field_is_refused_by_name(self, field: str, tmp_path: Path) -> None:
        settings = embedded_settings(tmp_path / "data")
        token = next(c for c in CORPUS if c.kind == "stripe_live").secret
        client = MemoryClient(settings, client=_NoRedis(), tenant="acme", agent="bot")
        with pytest.raises(ValidationError) as err:
            client.emit(content="hello", **{field: token})
        assert err.value.field == field
        assert "secret" in err.value.message and token not in err.value.message


class _NoRedis:
    """Refusal happens before any write: a client that would fail on any command."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"nothing may be written, yet {name} was called")


def _stores(data_dir: Path) -> dict[str, bytes]:
    """Every file under the data directory, grouped by the store that wrote it."""
    parts: dict[str, list[bytes]] = {}
    for path in sorted(data_dir.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(data_dir).as_posix()
        if rel.startswith("redis/"):
            store = "redis aof" if "appendonly" in rel or rel.endswith(".aof") else "redis files"
        elif rel.startswith("sleepmem.db"):
            store = "sqlite files"
        else:
            store = "vector index files"
        parts.setdefault(store, []).append(path.read_bytes())
    return {store: b"".join(files) for store, files in parts.items()}


def _sql_dump(url: str) -> bytes:
    engine = make_engine(url)
    parts: list[str] = []
    with engine.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            for row in conn.execute(sa.select(table)):
                parts.append(repr(tuple(row)))
    engine.dispose()
    return "\n".join(parts).encode()


def _redis_dump(client: Any) -> bytes:
    parts: list[bytes] = []
    for key in client.scan_iter(count=1000):
        parts.append(key)
        kind = client.type(key).decode()
        if kind == "string":
            parts.append(client.get(key) or b"")
        elif kind == "hash":
            parts += [b"%s=%s" % kv for kv in client.hgetall(key).items()]
        elif kind == "list":
            parts += client.lrange(key, 0, -1)
        elif kind == "set":
            parts += list(client.smembers(key))
        elif kind == "zset":
            parts += client.zrange(key, 0, -1)
        elif kind == "stream":
            for _id, fields in client.xrange(key):
                parts += [b"%s=%s" % kv for kv in fields.items()]
    return b"\n".join(parts)


def _field_for(kind: str) -> str:
    """The name an application would give the field holding a secret of this kind."""
    for word, field in (
        ("card", "card_number"),
        ("iban", "iban"),
        ("cookie", "cookie"),
        ("pin", "pin"),
        ("passcode", "passcode"),
        ("pw", "pw"),
        ("pass", "password"),
        ("code", "otp"),
        ("zh_", "支付密码"),
    ):
        if kind.startswith(word) or kind.endswith(word):
            return field
    return "api_key"


def _events(cases: list[SecretCase], user: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for i, case in enumerate(cases):
        event: dict[str, Any] = {"content": case.text, "session": f"{user}-s{i % 4}"}
        if i % 3 == 0:
            event["meta"] = {"note": case.text, "login": {_field_for(case.kind): case.secret}}
        if i % 5 == 0 and redact(case.secret).kinds:
            # As a key, a secret has no label around it: only those known by their shape.
            event["meta"] = {case.secret: True}
        events.append(event)
    for s in range(4):
        events.append({"kind": "session_end", "role": "system", "session": f"{user}-s{s}"})
    return events


@pytest.mark.slow
class TestNoSecretPersistsAnywhere:
    def test_sdk_and_http_events_leave_no_secret_in_any_store_or_log(
        self, tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG)
        data_dir = tmp_path / "data"
        settings = embedded_settings(data_dir).model_copy(update={"log_level": "DEBUG"})
        half = len(CORPUS) // 2
        via_sdk, via_http = CORPUS[:half], CORPUS[half:]
        sdk_events = _events(via_sdk, "ann")
        http_events = _events(via_http, "bob")
        total = len(sdk_events) + len(http_events)

        with Runtime(settings) as rt:
            assert rt.resources is not None
            with MemoryClient(settings, tenant="acme", agent="bot", user="ann") as client:
                client.emit_many(sdk_events)
            for i in range(0, len(http_events), 50):
                body = [
                    {"tenant": "acme", "agent": "bot", "user": "bob", **e}
                    for e in http_events[i : i + 50]
                ]
                resp = httpx.post(f"{rt.api_url}/v1/events", json=body, timeout=30)
                assert resp.status_code == 202, resp.text
            engine = rt.resources.engine

            def consolidated() -> bool:
                with engine.connect() as conn:
                    n, left = conn.execute(
                        sa.text(
                            "SELECT count(*), sum(CASE WHEN consolidated THEN 0 ELSE 1 END) "
                            "FROM raw_event"
                        )
                    ).one()
                return bool(n == total and not left)

            assert wait_for(consolidated, timeout=60), "the corpus was not consolidated"
            with engine.connect() as conn:
                memories = conn.execute(sa.text("SELECT count(*) FROM memory")).scalar()
            assert memories, "consolidation produced no memory to search"
            redis_keys = _redis_dump(rt.resources.redis)

        stores = _stores(data_dir)
        stores["sql tables"] = _sql_dump(settings.sql_url)
        stores["redis keys and stream"] = redis_keys
        captured = capfd.readouterr()
        stores["logs"] = (captured.out + captured.err + caplog.text).encode()
        assert {"redis aof", "sqlite files", "vector index files"} <= set(stores)
        assert len(stores["logs"]) > 0

        leaks = {store: found_in(blob, CORPUS) for store, blob in stores.items()}
        summary = {s: f"{len(found)}/{len(CORPUS)}" for s, found in leaks.items()}
        assert all(not found for found in leaks.values()), (
            summary,
            {s: sorted({c.kind for c in f}) for s, f in leaks.items() if f},
        )
        # The search is real: the same scan finds a secret planted where it looks.
        planted = CORPUS[0]
        assert leaked(planted.secret, stores["sql tables"] + b" " + planted.secret.encode())
