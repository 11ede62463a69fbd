"""``context(scope, query, budget_tokens)``: what an agent puts in its prompt for a turn.

The stable prefix (identity, standing preferences, active procedures) comes first and
stays byte-identical until one of its memories changes; the dynamic part (the session's
checkpoint, open conflict sets, memories relevant to the query via the normal hybrid
search) fills what the budget leaves. Every memory returned counts as a retrieval hit,
recorded with one XADD like a search.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sleepmem.core.errors import NotFoundError
from sleepmem.core.logs import get_logger
from sleepmem.core.tokens import TOKENIZER, count_tokens
from sleepmem.models import SearchRequest
from sleepmem.models.cards import SEARCH_K_MAX, ConflictGroup, MemoryCard
from sleepmem.models.working import Checkpoint, ContextRequest, ContextResult
from sleepmem.pipelines.context import (
    digest,
    open_conflicts,
    pack_dynamic,
    pack_prefix,
    prefix_memories,
)
from sleepmem.pipelines.read.retrieve import search
from sleepmem.reader import rank_weights
from sleepmem.resources import Resources
from sleepmem.working import WorkingMemory, parse

log = get_logger("sleepmem.context")

MAX_CONFLICT_SETS = 5
# Prefix memories also match queries; ask search for a few more than k so that, once they
# are left out of the dynamic part, k relevant ones remain.
SEARCH_HEADROOM = 5
MIN_LINE_TOKENS = 6


class ContextBuilder:
    def __init__(self, resources: Resources, *, working: WorkingMemory | None = None) -> None:
        self.res = resources
        self.working = working or WorkingMemory(resources)

    def build(self, request: ContextRequest | Mapping[str, Any]) -> ContextResult:
        started = time.perf_counter()
        req = parse(ContextRequest, request)
        res, settings = self.res, self.res.settings
        ports = res.ports()
        now = ports.clock()
        scope = req.scope
        budget = req.budget_tokens
        # Read before any memory is: the hits are written only if no erasure began since.
        epoch = res.hits.epoch()

        prefix_budget = int(budget * settings.context_prefix_share)
        # A rendered line costs at least MIN_LINE_TOKENS (its id reference alone does):
        # rows past what the budget could ever hold are not worth loading.
        wanted = min(settings.context_prefix_max_items, prefix_budget // MIN_LINE_TOKENS + 1)
        lines = prefix_memories(engine=res.engine, scope=scope, now=now, limit=wanted)
        prefix, dropped_prefix = pack_prefix(lines, budget=prefix_budget, count=count_tokens)
        in_prefix = {i.id for i in prefix.items}

        checkpoint: Checkpoint | None = None
        if scope.session:
            try:
                checkpoint = self.working.get(scope)
            except NotFoundError:
                checkpoint = None

        k = req.k or settings.context_k
        found = search(
            engine=res.engine, ports=ports,
            # The headroom never takes a search past its own limit (k=100 asked 105).
            request=SearchRequest(query=req.query, scope=scope,
                                  k=min(k + SEARCH_HEADROOM, SEARCH_K_MAX), format=req.format),
            weights=rank_weights(res),
        )
        conflicts = open_conflicts(engine=res.engine, scope=scope, now=now,
                                   limit=MAX_CONFLICT_SETS)
        seen_sets = {g.conflict_set for g in conflicts}
        relevant: list[MemoryCard] = []
        wanted_left = k  # memories, as search counts them: a passage each one it joins
        for card in found.cards:
            if isinstance(card, ConflictGroup):
                if card.conflict_set not in seen_sets:
                    conflicts.append(card)
                    seen_sets.add(card.conflict_set)
            elif card.id not in in_prefix and 1 + len(card.joined) <= wanted_left:
                relevant.append(card)
                wanted_left -= 1 + len(card.joined)

        remaining = max(0, budget - prefix.tokens - 1)
        dynamic, dropped_dynamic = pack_dynamic(
            budget=remaining,
            checkpoint_budget=int(budget * settings.context_checkpoint_share),
            count=count_tokens, checkpoint=checkpoint, conflicts=conflicts, relevant=relevant,
        )
        # A passage card was read whole: the memories it joined were retrieved too.
        joined = {c.id: c.joined for c in relevant}
        hits = [h for i in (*prefix.items, *dynamic.items) if i.id
                for h in (i.id, *joined.get(i.id, ()))]
        res.hits.record(hits, at=now, epoch=epoch)
        shown = {i.id for i in dynamic.items}
        result = ContextResult(
            prefix=prefix,
            prefix_digest=digest(prefix.text),
            dynamic=dynamic,
            conflicts=[g for g in conflicts if g.sides[0].id in shown],
            checkpoint_version=checkpoint.version if checkpoint is not None else None,
            tokens=prefix.tokens + dynamic.tokens,
            budget_tokens=budget,
            dropped=dropped_prefix + dropped_dynamic,
            tokenizer=TOKENIZER,
            format=req.format,
        )
        log.debug("context", tenant=scope.tenant, tokens=result.tokens, budget=budget,
                  items=len(hits), ms=round((time.perf_counter() - started) * 1e3, 2))
        return result
