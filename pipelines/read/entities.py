"""The entity route: memories reached through the entities a query names, and one hop on.

1. Link: every 1-4 word span of the query (and every 2-6 character run of Chinese) in the
   form aliases are stored in (case-folded, no possessive) is looked up in the alias
   index of the scopes the query sees.
2. Seeds: the memories that mention a linked entity, each entity weighted by how specific
   it is (a name in three memories says more than the speaker in three hundred).
3. One hop: entities related to a linked one by a current relation, and their memories,
   at a discount.
4. Only current memories the query's scope may see (the SQL re-check retrieval uses),
   ordered by entity weight times how much of the rest of the question they cover.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from itertools import product
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.models import (
    CURRENT_STATUSES,
    LEVELS,
    Entity,
    EntityAlias,
    EntityKind,
    EntityMention,
    Memory,
    Relation,
    Scope,
)
from sleepmem.pipelines.entities.spot import FUNCTION_WORDS, alias_key
from sleepmem.pipelines.language import han_runs, is_han
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.ports import Hit

MAX_SPAN_WORDS = 4
# Memories read per entity: a hub (the speaker of every turn) is capped, its weight is
# low anyway.
MAX_MENTIONS_PER_ENTITY = 500
HOP_DISCOUNT = 0.5
HUB_SHARE = 0.2
HUB_FLOOR = 100
# A memory about an entity says more about it than one that names it in passing.
_ROLE_WEIGHT = {"subject": 1.0, "object": 1.0, "mention": 0.6}
_QUERY_WORD = re.compile(r"[^\W_][\w'’-]*", re.UNICODE)


def entity_route(
    *,
    engine: Engine,
    scope: Scope,
    query: str,
    limit: int,
    now: datetime | None = None,
    include_hubs: bool = False,
) -> list[Hit]:
    """Memories reached through entities the query names (linked via canonical names and
    aliases of the scope's entity table, case/possessive-insensitive, EN and ZH), plus
    one-hop neighbours through relations; Hit(id=memory_id, score in [0,1]).

    ``now`` decides expiry (pass the ports' clock; the wall clock otherwise).
    ``include_hubs``: also follow entities in more than a fifth of the scope's memories
    (the speaker of most turns). Off by default: they narrow little down, and ranking
    their hundreds of memories costs tens of milliseconds."""
    spans = query_spans(query)
    if not spans or limit <= 0:
        return []
    keys = visible_scope_keys(scope)
    with Session(engine) as session:
        linked = _link(session, spans, keys)
        if not linked:
            return []
        hub = _hub_size(session, keys) if not include_hubs else 2**31
        # A hub (the speaker of most turns, the user) narrows nothing down: the other
        # routes already rank the whole scope. It is neither a seed nor a hop.
        entities = {e.id: e for e in session.exec(
            select(Entity).where(col(Entity.id).in_(list(linked)),
                                 col(Entity.mention_count) <= hub))}
        if not entities:
            return []
        weight = {eid: _specificity(e.mention_count) for eid, e in entities.items()}
        # Per memory, the weight of each entity that reached it (seed or hop).
        reach: dict[str, dict[str, float]] = defaultdict(dict)
        for eid, found in _mentions(session, list(weight)).items():
            for mid, role in found:
                _add(reach[mid], eid, weight[eid] * _ROLE_WEIGHT.get(role, 1.0))
        hops = _neighbours(session, weight)
        if hops:
            hop_entities = {e.id: e for e in session.exec(
                select(Entity).where(col(Entity.id).in_(list(hops)),
                                     col(Entity.mention_count) <= hub))}
            for eid, found in _mentions(session, list(hop_entities)).items():
                w = HOP_DISCOUNT * hops[eid] * _specificity(hop_entities[eid].mention_count)
                for mid, role in found:
                    _add(reach[mid], eid, w * _ROLE_WEIGHT.get(role, 1.0))
        if not reach:
            return []
        rows = session.execute(
            sa.select(*_COLUMNS).where(col(Memory.id).in_(list(reach)))  # type: ignore[call-overload]
        ).all()
    now = now or datetime.now(UTC)
    statements = {r[0]: r[1] for r in rows if _visible(r, scope, now)}
    if not statements:
        return []
    rest = _rest_of_question(query, linked_names=[e.name for e in entities.values()])
    coverage = _coverage(rest, statements)
    scored: list[tuple[float, str]] = []
    for mid in statements:
        ws = sorted(reach[mid].values(), reverse=True)
        # The best entity, plus a little for every further one the memory joins.
        by_entity = ws[0] + 0.25 * sum(ws[1:])
        scored.append((by_entity * (0.2 + 0.8 * coverage[mid]), mid))
    scored.sort(key=lambda s: (-s[0], s[1]))
    top = scored[0][0] or 1.0
    return [Hit(id=mid, score=round(score / top, 6)) for score, mid in scored[:limit]
            if score > 0]


def _hub_size(session: Session, keys: list[str]) -> int:
    """Mentions above which an entity is a hub: a fifth of the memories the query may see,
    and never below HUB_FLOOR (in a small scope every name is in many of them)."""
    n = session.execute(sa.select(sa.func.count()).select_from(Memory).where(
        col(Memory.scope_key).in_(keys))).scalar_one()
    return max(HUB_FLOOR, int(HUB_SHARE * n))


def _add(weights: dict[str, float], eid: str, w: float) -> None:
    weights[eid] = max(weights.get(eid, 0.0), w)


def query_spans(query: str) -> list[str]:
    """Every span of the query an alias could be: 1-4 words, and Chinese substrings.

    A span of function words alone ("can", "would you") names nothing, whatever a table
    built from noisier text holds under that alias: every request opens with one."""
    text = unicodedata.normalize("NFKC", query)
    words = [alias_key(w) for w in _QUERY_WORD.findall(text)]
    words = [w for w in words if w]
    out: set[str] = set()
    for n in range(1, MAX_SPAN_WORDS + 1):
        for i in range(len(words) - n + 1):
            span = words[i:i + n]
            if not all(w in FUNCTION_WORDS for w in span):
                out.add(" ".join(span))
    out.update(_chinese_spans(text))
    return sorted(s for s in out if len(s) <= 200)


def _chinese_spans(text: str) -> set[str]:
    """Every 2-6 character substring of the text's Chinese runs (no spaces to split on)."""
    out: set[str] = set()
    for run in han_runs(text, 2):
        for n in range(2, min(6, len(run)) + 1):
            out.update(run[i:i + n] for i in range(len(run) - n + 1))
    return out


def people_named(*, engine: Engine, scope: Scope, query: str) -> list[str]:
    """The scope's people a Chinese query names, as their aliases. Chinese has no capitals
    to spot a name by, so the names are the ones the scope's entity table already holds;
    a query without Chinese gets [] (the spotter finds its names) and costs no lookup."""
    spans = sorted(_chinese_spans(unicodedata.normalize("NFKC", query)))
    if not spans:
        return []
    with Session(engine) as session:
        rows = session.exec(
            select(EntityAlias.alias)
            .join(Entity, col(Entity.id) == col(EntityAlias.entity_id))
            .where(
                col(EntityAlias.alias).in_(spans),
                col(EntityAlias.scope_key).in_(visible_scope_keys(scope)),
                col(Entity.kind) == EntityKind.person.value,
            )
        ).all()
    return sorted(set(rows), key=len, reverse=True)


def visible_scope_keys(scope: Scope) -> list[str]:
    """The consolidation scopes a query in ``scope`` sees: each level set or unset."""
    choices = [[getattr(scope, lvl)] if lvl == "tenant" else
               sorted({"", getattr(scope, lvl)}) for lvl in LEVELS[:-1]]
    return sorted(
        Scope(**dict(zip(LEVELS[:-1], combo, strict=True))).key for combo in product(*choices)
    )


def _link(session: Session, spans: list[str], keys: list[str]) -> set[str]:
    rows = session.exec(
        select(EntityAlias.entity_id, EntityAlias.alias).where(
            col(EntityAlias.alias).in_(spans), col(EntityAlias.scope_key).in_(keys)
        )
    ).all()
    # A span inside a longer linked span ("tokyo" in "university of tokyo") is the longer
    # name, not a second entity.
    found = {alias for _eid, alias in rows}
    longest = {a for a in found if not any(a != b and f" {a} " in f" {b} " for b in found)}
    return {eid for eid, alias in rows if alias in longest}


def _mentions(session: Session, entity_ids: list[str]) -> dict[str, list[tuple[str, str]]]:
    """(memory id, role) of every mention of these entities, at most
    MAX_MENTIONS_PER_ENTITY each; one query."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    if not entity_ids:
        return out
    rows = session.exec(
        select(EntityMention.entity_id, EntityMention.memory_id, EntityMention.role)
        .where(col(EntityMention.entity_id).in_(entity_ids))
    )
    for eid, mid, role in rows:
        if len(out[eid]) < MAX_MENTIONS_PER_ENTITY:
            out[eid].append((mid, role))
    return out


def _neighbours(session: Session, weight: dict[str, float]) -> dict[str, float]:
    """Entities one current relation away from a linked one, each with the weight of its
    best linked end (a hop from the speaker of every turn leads nowhere in particular),
    a little more for every further relation that joins them."""
    linked = list(weight)
    rows: Iterable[tuple[str, str]] = [
        *session.exec(select(Relation.subject_id, Relation.object_id).where(
            col(Relation.subject_id).in_(linked),
            col(Relation.status).in_(CURRENT_STATUSES))),
        *session.exec(select(Relation.subject_id, Relation.object_id).where(
            col(Relation.object_id).in_(linked),
            col(Relation.status).in_(CURRENT_STATUSES))),
    ]
    best: dict[str, float] = {}
    counts: dict[str, int] = defaultdict(int)
    for sid, oid in rows:
        for a, b in ((sid, oid), (oid, sid)):
            if a in weight and b not in weight:
                counts[b] += 1
                best[b] = max(best.get(b, 0.0), weight[a])
    return {eid: best[eid] * min(1.0, 0.5 + 0.25 * n) for eid, n in counts.items()}


def _specificity(mentions: int) -> float:
    """1 for a name mentioned once, falling slowly with every further mention."""
    return 1.0 / (1.0 + math.log1p(max(0, mentions - 1)))


def _rest_of_question(query: str, *, linked_names: list[str]) -> set[str]:
    named = {t for n in linked_names for t in tokens(n)}
    return {t for t in tokens(query) if t not in named}


def _coverage(rest: set[str], statements: dict[str, str]) -> dict[str, float]:
    """How much of the rest of the question each statement covers, each word weighted by
    how rare it is among the statements reached (inverse document frequency).

    A query token (a light stem, or Chinese characters) counts as present when a word of
    the statement starts with it: a regex scan, instead of tokenising every statement.
    """
    if not rest:
        return dict.fromkeys(statements, 1.0)
    finders = {t: re.compile(re.escape(t) if (is_han(t) and is_han(t[1:])) or (len(t) == 1
                             and not t.isascii()) else rf"\b{re.escape(t)}", re.IGNORECASE)
               for t in rest}
    has = {mid: {t for t, f in finders.items() if f.search(text)}
           for mid, text in statements.items()}
    n = len(statements)
    df = {t: sum(t in ts for ts in has.values()) for t in rest}
    idf = {t: math.log(1.0 + n / (1 + df[t])) for t in rest}
    total = sum(idf.values()) or 1.0
    return {mid: sum(idf[t] for t in ts) / total for mid, ts in has.items()}


_COLUMNS = (Memory.id, Memory.statement, Memory.status, Memory.expires_at, Memory.details,
            Memory.tenant, Memory.agent, Memory.user, Memory.project, Memory.session)


def _visible(row: Any, scope: Scope, now: datetime) -> bool:
    """The SQL re-check retrieval makes: seen from ``scope``, current, not hidden or
    expired."""
    _mid, _text, status, expires, details = row[:5]
    # The rest of the row is the level columns, which sees() reads by name (_COLUMNS).
    if not scope.sees(row) or status not in CURRENT_STATUSES or (details or {}).get("hidden"):
        return False
    if expires is not None and expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    return expires is None or expires > now
