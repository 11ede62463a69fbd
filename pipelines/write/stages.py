"""extract → gate → resolve → compress: the one stage sequence of consolidation.

Live consolidation runs it over a scope's pending events and then persists the plan;
re-consolidation replays a scope's raw events through it into a shadow set. Both call
:func:`judge` with a :class:`~sleepmem.pipelines.write.policy.Policy`, so a replay of unchanged
events under the same settings decides exactly what the live runs decided.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime

from sleepmem.pipelines import persons
from sleepmem.pipelines.semantic import gist, sentences
from sleepmem.pipelines.types import Candidate, EventView, Extraction, Extractor, Rejection
from sleepmem.pipelines.write import forget_requests
from sleepmem.pipelines.write.compress import Compression, compress
from sleepmem.pipelines.write.echo import Output, strip_events
from sleepmem.pipelines.write.gate import gate
from sleepmem.pipelines.write.policy import Policy
from sleepmem.pipelines.write.resolve import Resolver

StageTimer = Callable[[str], AbstractContextManager[None]]


def _untimed(_name: str) -> AbstractContextManager[None]:
    return nullcontext()


@dataclass(slots=True)
class Judged:
    extraction: Extraction
    compression: Compression
    # Characters of the service's own echo cut from each event before it was read.
    echo: dict[str, int] = field(default_factory=dict)


def _resolve(resolver: Resolver, kept: list[Candidate], rejected: list[Rejection],
             judged_at: Callable[[Candidate], datetime] | None) -> None:
    for rej in rejected:
        resolver.reject(rej)
    for cand in sorted(kept, key=lambda c: c.valid_from):
        if judged_at is not None:
            resolver.now = max(resolver.now, judged_at(cand))
        resolver.apply(cand)


def judge(
    events: list[EventView],
    *,
    extractor: Extractor,
    resolver: Resolver,
    policy: Policy,
    shown: Output,
    event_sessions: Mapping[str, str],
    older_sessions: Callable[[Resolver], Mapping[str, str]] | None = None,
    judged_at: Callable[[Candidate], datetime] | None = None,
    stage: StageTimer = _untimed,
) -> Judged:
    """Run one batch of events through the stages into ``resolver``'s plan.

    ``judged_at`` gives the time a candidate was (or is) judged at: a replay judges each
    candidate at the time the live pipeline did, so expiry and recency come out the same.
    ``event_sessions`` maps event ids to sessions, to find an ended session's fragments;
    ``older_sessions`` adds the sessions behind older memories, looked up only when a
    session ended. ``shown`` is what the service has shown of the scope's memories: its
    echo in a turn is cut before anything reads the turn (DESIGN rule 2), so it never
    becomes a candidate, while the turn's other words are read as before.

    When the resolver has a meaning layer (the run's embedder), forget requests the
    extractor missed are recognised here, and every kept candidate is embedded in one
    batch before the judgement: the same code for every extractor.
    """
    with stage("echo"):
        # The raw events stay as they are (the log is the record); only reading skips
        # what the service said itself.
        events, echo = strip_events(events, shown)
    with stage("extract"):
        extraction = extractor.extract(events)
        persons.own_facts(extraction.candidates, events)
        for cand in extraction.candidates:
            cut = sum(echo.get(e, 0) for e in cand.provenance)
            if cut:
                cand.details["echo_chars"] = cut
    meaning = resolver.meaning
    if meaning is not None:
        with stage("meaning"):
            forget_requests.recognise(extraction.candidates, meaning,
                                      {e.event_id: e.content for e in events})
    with stage("gate"):
        kept, rejected = gate(extraction.candidates, policy=policy.gate)
    if meaning is not None:
        with stage("meaning"):
            texts = [gist(c.statement) for c in kept
                     if c.forget_topic is None and resolver.weighs_meaning(c)]
            meaning.prime([*texts, *(part for t in texts for part in sentences(t))])
    resolver.said.update((e.event_id, e.content) for e in events)
    verdicts = resolver.verdicts
    if verdicts is not None:
        # The batch is tried on a probe, where the rule decides the pairs it is least
        # sure of; the judge model reads them all at once, and the real run uses its
        # answers. The resolver fills candidates in as it judges them (a correction takes
        # its memory's slot), so the probe works on copies.
        with stage("resolve"):
            _resolve(resolver.probe(), copy.deepcopy(kept), [], judged_at)
        if verdicts.pending:
            with stage("verdicts"):
                before = verdicts.usage
                verdicts.ask()
                extraction.llm_calls += verdicts.usage.calls - before.calls
                extraction.llm_tokens += verdicts.usage.tokens - before.tokens
    with stage("resolve"):
        _resolve(resolver, kept, rejected, judged_at)
    with stage("compress"):
        ended = {e.scope.session for e in events if e.kind == "session_end"}
        sessions = dict(event_sessions)
        if ended and older_sessions is not None:
            sessions |= older_sessions(resolver)
        compression = compress(
            resolver, policy=policy.compress, ended_sessions=ended, event_sessions=sessions
        )
    return Judged(extraction=extraction, compression=compression, echo=echo)
