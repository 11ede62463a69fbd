"""Retrieval (README rule 7): scope filter first, hybrid candidates, weighted rerank, cards.

Read-only on SQL: hits are handed back to the caller, which records them cheaply
(Redis) for the refresh task to apply later.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.models import (
    CURRENT_STATUSES,
    ConflictGroup,
    Memory,
    MemoryCard,
    Scope,
    SearchRequest,
    SearchResult,
    card_sides,
)
from sleepmem.pipelines.entities.spot import without_people
from sleepmem.pipelines.lexical import sparse_query, token_id, tokens
from sleepmem.pipelines.persons import subjectless
from sleepmem.pipelines.ports import Hit, IndexFilter, Ports, Vector
from sleepmem.pipelines.read.cards import WORD_CARRIERS, card, shown
from sleepmem.pipelines.read.decompose import parts as decompose
from sleepmem.pipelines.read.entities import people_named
from sleepmem.pipelines.read.fusion import Fused, Route, fuse, fuse_into, mix
from sleepmem.pipelines.read.passages import passages
from sleepmem.pipelines.read.rank import (
    RankWeights,
    score,
    visible,
    without_stray_small_talk,
)
from sleepmem.pipelines.read.repeats import without_repeats
from sleepmem.pipelines.read.rewrite import QueryRewriter
from sleepmem.pipelines.speakers import speaker_hits
from sleepmem.pipelines.when import Window, asks_when, carries_date
from sleepmem.pipelines.when import resolve as resolve_window

# Queries name the person the memory is about ("the user's", "用户的"), and extracted
# statements do too; on the lexical side that word would only favour paraphrased
# statements over the user's own words, so queries drop it.
QUERY_STOP_IDS = frozenset(token_id(t) for t in {*tokens("user users 用户"), "户"})


@dataclass(slots=True)
class SearchTrace:
    """What one search saw, for ``explain``: every route in the order it was fused, the fused
    relevance per candidate, the final score of each visible one and the ranked order (a
    memory id, or the conflict set standing for its sides) and the time the query named."""

    routes: list[Route] = field(default_factory=list)
    fused: dict[str, Fused] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    rewrites: tuple[str, ...] = ()
    window: Window | None = None
    # A memory returned inside a better one's passage: its id -> the id of that card.
    joined: dict[str, str] = field(default_factory=dict)
    # The memories the result read as lines (sleepmem.pipelines.read.snippets), in its order.
    lines: list[str] = field(default_factory=list)
    # How many entries of ``order`` the result holds: the first ones.
    returned: int = 0


RouteFn = Callable[..., list[Hit]]
"""An extra recall route: ``fn(*, engine, scope, query, limit) -> list[Hit]`` (the shape of
``sleepmem.pipelines.read.entities.entity_route``); its hits are fused like the built-in ones."""


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """What the query says besides its words: a time window, a "when", its parts."""

    text: str
    window: Window | None
    asks_when: bool
    parts: tuple[str, ...]
    rewrites: tuple[str, ...] = ()
    # What the query asks without the people it names, for the sentence route: sentences
    # are indexed without their speaker (sleepmem.pipelines.write.index.own_sentences).
    about: str = ""

    def embedded(self) -> list[str]:
        """What :func:`embed_plan` embeds, in order: the query, its parts, its rewrites,
        then ``about`` when it differs from the query."""
        about = [self.about] if self.about_index() else []
        return [self.text, *self.parts, *self.rewrites, *about]

    def about_index(self) -> int:
        """Where ``about``'s vector sits among :meth:`embedded`'s: last, or the query's own
        (0) when naming nobody left it the query."""
        if self.about and self.about != self.text:
            return 1 + len(self.parts) + len(self.rewrites)
        return 0


def understand(query: str, now: datetime, people: Sequence[str] = ()) -> QueryPlan:
    """``people``: names of the scope's people the query uses, beyond those the spotter
    finds (see :func:`~sleepmem.pipelines.read.entities.people_named`)."""
    return QueryPlan(
        text=query, window=resolve_window(query, now), asks_when=asks_when(query),
        parts=tuple(decompose(query)), about=without_people(query, people),
    )


def embed_plan(ports: Ports, plan: QueryPlan) -> Vector:
    """Every text of the plan (:meth:`QueryPlan.embedded`), embedded in one batch."""
    return ports.embedder.embed([subjectless(t) for t in plan.embedded()], kind="query")


def recall(
    *,
    engine: Engine,
    ports: Ports,
    scope: Scope,
    plan: QueryPlan,
    where: IndexFilter,
    weights: RankWeights,
    limit: int,
    vectors: Vector,
    extra: Mapping[str, RouteFn] | None = None,
) -> list[Route]:
    """Every route's hits for the query: dense and lexical over the whole query, the query
    against each memory's own sentences, each part of a two-part question, the query
    restricted to its time window, and extra routes.
    ``vectors``: the plan embedded by :func:`embed_plan`, in :meth:`QueryPlan.embedded`'s
    order."""
    texts = [plan.text, *plan.parts, *plan.rewrites]
    lexical_share = 1.0 - weights.dense_share

    def both(
        i: int, w: IndexFilter, n: int, unsaid: frozenset[int] = QUERY_STOP_IDS
    ) -> tuple[list[Hit], list[Hit]]:
        dense = ports.index.search_dense(vectors[i], where=w, limit=n)
        sparse = {t: v for t, v in sparse_query(texts[i]).items() if t not in unsaid}
        lexical = ports.index.search_sparse(sparse, where=w, limit=n) if sparse else []
        return dense, lexical

    dense, lexical = both(0, where, limit)
    routes = [
        Route("dense", dense, weights.dense_share),
        Route("lexical", lexical, lexical_share),
    ]
    if weights.sentence > 0:
        about = vectors[plan.about_index()]
        sentences = ports.index.search_sentences(about, where=where, limit=limit)
        routes.append(Route("sentence", sentences, weights.sentence))
    for i in range(1, 1 + len(plan.parts)):
        d, lx = both(i, where, limit // 2)
        routes.append(
            Route("part", mix([(d, weights.dense_share), (lx, lexical_share)]), weights.part)
        )
    if plan.window is not None:
        window = plan.window
        # Inside the window every memory is of the time the query named, so the words that
        # named it ("10 days ago") tell them apart no more; kept, they would favour whatever
        # else says "days ago" over what the query asks about.
        timeless = QUERY_STOP_IDS | {token_id(t) for t in tokens(window.expression)}
        d, lx = both(0, replace(where, valid_between=(window.start, window.end)), limit // 2,
                     timeless)
        timed = [(d, weights.dense_share), (lx, lexical_share)]
        if window.margin and weights.time_near > 0:
            # The widened window holds the inside again, so inside scores 1 + near, the
            # margin alone near: closeness in time counts in steps, not as in-or-out.
            nd, nlx = both(0, replace(where, valid_between=window.widened()), limit // 2,
                           timeless)
            near = weights.time_near
            timed += [(nd, weights.dense_share * near), (nlx, lexical_share * near)]
        routes.append(Route("time", mix(timed), weights.time))
    if plan.rewrites:
        # One route for all rewrites: a memory several of them find ranks higher in it.
        found: list[tuple[list[Hit], float]] = []
        for i in range(1 + len(plan.parts), len(texts)):
            d, lx = both(i, where, limit // 2)
            found += [(d, weights.dense_share), (lx, lexical_share)]
        routes.append(Route("rewrite", mix(found), weights.rewrite))
    for name, fn in (extra or {}).items():
        routes.append(
            Route(name, fn(engine=engine, scope=scope, query=plan.text, limit=limit),
                  weights.extra)
        )
    return routes


def search(
    *,
    engine: Engine,
    ports: Ports,
    request: SearchRequest,
    weights: RankWeights,
    extra: Mapping[str, RouteFn] | None = None,
    rewriter: QueryRewriter | None = None,
    trace: SearchTrace | None = None,
) -> SearchResult:
    """``rewriter``: the optional retrieval-query rewriter (never raises; empty when it has
    nothing). ``trace``: filled with what the search saw, for ``explain``."""
    now = ports.clock()
    where = IndexFilter(
        scope=request.scope, now=now, types=tuple(request.types) if request.types else None,
        as_of=request.as_of,
    )
    names = _names(engine, request.scope)
    query = _as_user(request.query, names)
    people = people_named(engine=engine, scope=request.scope, query=query)
    plan = understand(query, request.as_of or now, people)
    if rewriter is not None:
        rewrites = [_as_user(q, names) for q in rewriter(request.scope.key, request.query)]
        plan = replace(plan, rewrites=tuple(q for q in rewrites if q != query))
    limit = max(weights.candidates, request.k * 4)
    vectors = embed_plan(ports, plan)
    routes = recall(engine=engine, ports=ports, scope=request.scope, plan=plan, where=where,
                    weights=weights, limit=limit, vectors=vectors, extra=extra)
    fused = fuse(routes)
    if trace is not None:
        trace.rewrites, trace.fused, trace.window = plan.rewrites, fused, plan.window
        trace.routes.extend(routes)
    if not fused:
        return SearchResult(cards=[])
    if weights.context > 0:
        context = _context_route(ports=ports, where=where, vector=vectors[0], fused=fused,
                                 weights=weights)
        fuse_into(fused, context)
        if trace is not None:
            trace.routes.append(context)
    with Session(engine) as session:
        rows = {
            m.id: m
            for m in session.exec(select(Memory).where(col(Memory.id).in_(list(fused))))
        }
        rows = {mid: m for mid, m in rows.items() if visible(m, request, now)}
        sets = {m.conflict_set for m in rows.values() if m.conflict_set and request.as_of is None}
        sides: dict[str, list[Memory]] = {}
        if sets:
            for m in session.exec(select(Memory).where(col(Memory.conflict_set).in_(list(sets)))):
                if visible(m, request, now):
                    sides.setdefault(str(m.conflict_set), []).append(m)
    if plan.asks_when:
        # A "when" question is answered by a memory that names a time: among the
        # candidates, those whose statement carries a date form the time route.
        dated = [Hit(mid, fused[mid].score) for mid, m in rows.items()
                 if carries_date(m.statement)]
        dated_route = Route("time", dated, weights.time)
        fuse_into(fused, dated_route)
        if trace is not None:
            trace.routes.append(dated_route)
    if weights.speaker > 0:
        said = speaker_hits(request.query, {mid: m.statement for mid, m in rows.items()},
                            {mid: fused[mid].score for mid in rows})
        speaker_route = Route("speaker", said, weights.speaker)
        fuse_into(fused, speaker_route)
        if trace is not None:
            trace.routes.append(speaker_route)
    rows = without_stray_small_talk(rows, fused)
    scored = {mid: score(m, fused[mid].score, now, weights) for mid, m in rows.items()}
    found_by = {mid: fused[mid].routes for mid in rows}

    entries: list[tuple[float, str, MemoryCard | ConflictGroup]] = []
    grouped: set[str] = set()
    for mid, m in rows.items():
        if m.conflict_set and m.conflict_set in sides and len(sides[m.conflict_set]) > 1:
            if m.conflict_set in grouped:
                continue
            grouped.add(m.conflict_set)
            members = sorted(sides[m.conflict_set], key=lambda x: (x.valid_from, x.id))
            best = max(scored.get(x.id, 0.0) for x in members)
            group = ConflictGroup(
                conflict_set=m.conflict_set,
                score=round(best, 6),
                sides=[card(x, scored.get(x.id, best), request, found_by.get(x.id, []))
                       for x in members],
            )
            entries.append((best, m.conflict_set, group))
        else:
            entries.append((scored[mid], mid, card(m, scored[mid], request, found_by[mid])))
    # Stable order for equal inputs: score, then id (cache-friendly prompts).
    entries.sort(key=lambda e: (-round(e[0], 6), e[1]))

    def sources(e: tuple[float, str, MemoryCard | ConflictGroup]) -> list[str]:
        return [ev for c in card_sides(e[2]) if c.id in rows for ev in rows[c.id].provenance]

    if weights.drop_repeats:
        entries = without_repeats(
            entries, droppable=lambda e: isinstance(e[2], MemoryCard), sources=sources,
            covers=lambda e: all(c.type in WORD_CARRIERS for c in card_sides(e[2])))
    groups = passages(
        entries, most=weights.passage_events, sources=sources,
        joins=lambda e: (e[2].source, e[2].trust)
        if isinstance(e[2], MemoryCard) and e[2].type == "event" else None)
    cards, tokens, read, lines = shown(groups, entries, rows, request)
    if trace is not None:
        trace.scores = scored
        # A member of a passage the result cut short, or of one it left out, is owed to
        # its group's head as before; what the result read names the card that read it.
        returned = {i for c in cards for side in card_sides(c) for i in (side.id, *side.joined)}
        trace.joined = {c.id: g[0][1] for g in groups for _s, _k, e in g[1:]
                        for c in card_sides(e) if c.id not in returned}
        trace.joined.update({j: c.id for c in cards if isinstance(c, MemoryCard)
                             for j in c.joined})
        # What the result holds first, in its order (a memory read as a line is an entry
        # of its own now), then every other candidate in rank order.
        keys = [c.conflict_set if isinstance(c, ConflictGroup) else c.id for c in cards]
        trace.order = [*keys, *(g[0][1] for g in groups if g[0][1] not in keys)]
        trace.returned = len(cards)
        trace.lines = lines
    return SearchResult(cards=cards, format=request.format, memories=read, tokens=tokens)


def _context_route(
    *, ports: Ports, where: IndexFilter, vector: Vector, fused: Mapping[str, Fused],
    weights: RankWeights,
) -> Route:
    """Context expansion: an answer often sits in the turns around the best hit (the
    question, the reply that answers it), so each of the best few hits proposes the
    memories that became valid within minutes of it and best match the query."""
    seeds = sorted(fused, key=lambda mid: -fused[mid].score)[: weights.context_seeds]
    payloads = ports.index.payloads(seeds)
    hits: dict[str, float] = {}
    for rank, mid in enumerate(seeds):
        at = payloads.get(mid, {}).get("valid_from")
        if at is None:
            continue
        t = datetime.fromtimestamp(float(at), tz=UTC)
        span = timedelta(seconds=weights.context_window_s)
        near = replace(where, valid_between=(t - span, t + span))
        # The seed is part of its own episode: it is found here too, so the route lifts
        # an episode around its best hit and never lifts a neighbour past its own seed.
        for h in ports.index.search_dense(vector, where=near, limit=weights.context_per_seed + 1):
            # A neighbour inherits its seed's standing, less for lower seeds.
            hits[h.id] = max(hits.get(h.id, 0.0), fused[mid].score / (rank + 1) + h.score)
    ranked = sorted(hits.items(), key=lambda kv: -kv[1])
    return Route("context", [Hit(i, s) for i, s in ranked], weights.context)


def _names(engine: Engine, scope: Scope) -> list[str]:
    """The names the scope's user goes by (identity memories of the ``name`` slot)."""
    if not scope.user:
        return []
    owner = scope.model_copy(update={"project": "", "session": ""}).key
    with Session(engine) as session:
        rows = session.exec(
            select(Memory.details).where(
                col(Memory.scope_key) == owner,
                col(Memory.subject) == "user",
                col(Memory.attribute) == "name",
                col(Memory.status).in_(CURRENT_STATUSES),
            )
        ).all()
    return [str(d.get("value")) for d in rows if d.get("value")]


def _as_user(query: str, names: list[str]) -> str:
    """Statements call the person "the user"; a query naming them means the same person."""
    for name in names:
        if len(name) >= 2:
            query = re.sub(rf"\b{re.escape(name)}(?:'s)?\b", "the user", query,
                           flags=re.IGNORECASE)
    return query


