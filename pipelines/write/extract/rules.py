"""Offline rule-based extraction, English and Chinese: raw events in, memory candidates out.

Sleep-time consolidation must never wait on a model, so this extractor is the default. It
favours precision: a clause that fits no pattern is kept as an event (searchable, short
lived) rather than guessed into a slot, because a wrong slot can supersede a right memory.

How a message turn is read: sentences, then clauses (on ", so", ", I", "，" ...). Each
clause is tried against the matchers of its language in priority order (first match
wins). Clauses that match nothing but sit in a sentence with a match are attached to that
candidate's statement ("I'm vegan, so no dairy please" stays one memory, and is
invalidated with it). Sentences with no match at all become one event for the turn.
All patterns are compiled at import: no per-call compilation on the hot loop.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections import Counter
from typing import Any

from sleepmem.core.logs import get_logger
from sleepmem.pipelines.language import read
from sleepmem.pipelines.ports import Embedder
from sleepmem.pipelines.text import (
    split_sentences,
)
from sleepmem.pipelines.types import (
    Candidate,
    EventView,
    Extraction,
)
from sleepmem.pipelines.write.extract import turns
from sleepmem.pipelines.write.extract.events import (
    assistant_candidates,
    observation_candidates,
    outcome_candidates,
)
from sleepmem.pipelines.write.extract.pairs import with_previous_turn
from sleepmem.pipelines.write.extract.sentences import placed, read_statements
from sleepmem.pipelines.write.extract.statements import (
    preference_cue,
)
from sleepmem.pipelines.write.extract.tools import tool_candidates
from sleepmem.pipelines.write.extract.turns import Turn, Understood, as_read, speaker_of

# What each lasting type sounds like; an unclassified statement takes the nearest one's
# type (and so its default lifetime). Identity is not offered: a guess never becomes a
# memory that never decays.
TYPE_PROTOTYPES: dict[str, tuple[str, ...]] = {
    "preference": (
        "The user prefers window seats.", "The user likes spicy food.",
        "The user would rather have tea than coffee.", "The user wants short answers.",
        "用户喜欢安静的餐厅。", "用户更喜欢坐靠窗的位置。",
    ),
    "fact": (
        "The user is learning to play the guitar.", "The user owns a bicycle.",
        "The user works at a hospital.", "The user drives a Toyota.",
        "The user volunteers at a library.", "用户最近在学法语。", "用户养了一只狗。",
    ),
}


# ---------------------------------------------------------------------------------------
# Turns
# ---------------------------------------------------------------------------------------


# Prototype vectors per embedder instance: an extractor is built per consolidation run,
# the embedder lives as long as its process; embedding the prototypes once per embedder
# keeps the per-batch cost to the statements themselves.
_PROTOTYPE_CACHE: weakref.WeakKeyDictionary[Embedder, tuple[list[str], Any]] = (
    weakref.WeakKeyDictionary()
)


def _prototypes_for(embedder: Embedder) -> tuple[list[str], Any]:
    try:
        cached = _PROTOTYPE_CACHE.get(embedder)
    except TypeError:  # not weak-referenceable: embed per extractor instead
        cached = None
    if cached is None:
        kinds = [k for k, texts in TYPE_PROTOTYPES.items() for _ in texts]
        texts = [t for ts in TYPE_PROTOTYPES.values() for t in ts]
        cached = (kinds, embedder.embed(texts))
        with contextlib.suppress(TypeError):
            _PROTOTYPE_CACHE[embedder] = cached
    return cached


class RulesExtractor:
    """Pattern-based extractor for English and Chinese; no model, no network."""

    name = "rules"

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._log = get_logger("sleepmem.extract.rules")
        self._embedder = embedder
        self._prototypes: tuple[list[str], Any] | None = None

    def extract(self, events: list[EventView]) -> Extraction:
        t0 = time.perf_counter()
        readings = _read_all(events, self._embedder)
        candidates: list[Candidate] = []
        for event in events:
            candidates.extend(self.extract_event(event, readings))
        with_previous_turn(events, candidates, readings)
        self._type_by_meaning(candidates)
        kinds = Counter(c.type for c in candidates)
        self._log.info(
            "extract.rules",
            events=len(events),
            candidates=len(candidates),
            by_type=dict(kinds),
            forget_requests=sum(1 for c in candidates if c.forget_topic is not None),
            read=len(readings),
            by_reading=sum(1 for c in candidates if "reading" in c.details),
            ms=round((time.perf_counter() - t0) * 1000, 2),
        )
        return Extraction(candidates=candidates, extractor=self.name)

    def _type_by_meaning(self, candidates: list[Candidate]) -> None:
        """Unclassified statements without a grammatical cue take the type of the nearest
        prototype (one batched embedder call per extraction; prototypes embedded once)."""
        todo = [c for c in candidates if c.details.get("type_by") == "grammar"
                and not preference_cue(c.statement) and not c.one_off]
        if not todo or self._embedder is None:
            return
        if self._prototypes is None:
            self._prototypes = _prototypes_for(self._embedder)
        kinds, protos = self._prototypes
        vectors = self._embedder.embed([c.statement for c in todo])
        sims = vectors @ protos.T
        for cand, row in zip(todo, sims, strict=True):
            best: dict[str, float] = {}
            for kind, sim in zip(kinds, row, strict=True):
                best[kind] = max(best.get(kind, -1.0), float(sim))
            cand.type = max(best, key=lambda k: best[k])
            cand.details["type_by"] = "meaning"

    # -- per kind ----------------------------------------------------------------------
    def extract_event(self, event: EventView,
                      readings: dict[str, Understood] | None = None) -> list[Candidate]:
        if event.kind == "session_end":
            return []
        turn = Turn(event, speaker_of(event), place=placed, readings=readings,
                    embedder=self._embedder)
        if event.kind == "outcome":
            return outcome_candidates(turn)
        if event.kind == "tool_result" or event.role == "tool":
            return tool_candidates(turn)
        text = event.content.strip()
        if not text:
            return []
        if event.kind == "observation":
            return observation_candidates(turn, text)
        if event.role == "assistant":
            return assistant_candidates(turn, text)
        return read_statements(turn, text, feedback=event.kind == "feedback")


# -- turns, by who speaks -----------------------------------------------------------------


def _read_all(events: list[EventView], embedder: Embedder | None) -> dict[str, Understood]:
    """Every sentence of every user and feedback turn, read in one batch per language;
    those that could hold a fact are placed by meaning in one embedder call."""
    sentences: list[str] = []
    told: set[str] = set()  # said by a named person (meta.speaker): their history counts
    for event in events:
        if event.role == "user" and event.kind in ("message", "feedback") and (
                text := event.content.strip()):
            said = [as_read(s) for s in split_sentences(text)]
            sentences.extend(said)
            if speaker_of(event).person and turns.NAMED_SPEAKERS_AS_FACTS:
                told.update(said)
    return placed(read(list(dict.fromkeys(sentences))), embedder, told)


# -- tool output ---------------------------------------------------------------------------


