"""A turn being read: who speaks it (the user, a named person, the assistant, a tool),
what its sentences are understood to say, and the candidates it makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sleepmem.pipelines.language import Reading, normalised, read
from sleepmem.pipelines.ports import Embedder
from sleepmem.pipelines.text import (
    EMPHASIS_EN,
    EMPHASIS_ZH,
)
from sleepmem.pipelines.types import (
    Candidate,
    EventView,
)
from sleepmem.pipelines.vocab import (
    IMPORTANCE,
)
from sleepmem.pipelines.write.extract.frames import Frame
from sleepmem.pipelines.write.extract.slots import (
    Slot,
)


@dataclass(slots=True)
class Found:
    slot: Slot
    clause_index: int
    attached: list[int] = field(default_factory=list)



@dataclass(frozen=True, slots=True)
class Speaker:
    """Who is speaking and how much their words are worth."""

    source: str
    trust: str
    confidence: float
    inferred: bool
    from_tool: bool = False
    trusted_tool: bool = False
    prefix: str = ""

    @property
    def person(self) -> str:
        """The named user speaking (``meta.speaker``), else "": with several people in one
        scope (a group chat), each corrects only their own words."""
        return self.prefix if self.source == "user" else ""



def _meta_float(meta: dict[str, Any], key: str, default: float) -> float:
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return max(0.0, min(1.0, float(value)))



def truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "yes", "1"))



def speaker_of(event: EventView) -> Speaker:
    meta = event.meta
    named = str(meta.get("speaker") or "").strip()
    if event.kind == "tool_result" or event.role == "tool":
        trusted = truthy(meta.get("trusted")) or truthy(meta.get("verified"))
        label = str(meta.get("source") or meta.get("tool") or "").strip()
        prefix = named or (f"Tool ({label})" if label else "Tool")
        return Speaker("tool", "high" if trusted else "low",
                       _meta_float(meta, "confidence", 1.0 if trusted else 0.5), False,
                       from_tool=True, trusted_tool=trusted, prefix=prefix)
    if event.kind == "observation":
        who = named or ("Assistant observation" if event.role != "user" else "Observation")
        return Speaker(event.role or "assistant", "low", _meta_float(meta, "confidence", 0.5),
                       True, prefix=who)
    if event.role == "assistant":
        return Speaker("assistant", "low", _meta_float(meta, "confidence", 1.0), False,
                       prefix=named or "Assistant")
    if event.role == "system":
        return Speaker("system", "high", _meta_float(meta, "confidence", 1.0), False,
                       prefix=named or "System")
    return Speaker("user", "high", _meta_float(meta, "confidence", 1.0), False,
                   prefix=named)



# How a sentence's readings are placed by meaning (sentences.placed): handed in, since the
# matchers that decide what needs placing sit above the turn.
Placer = Callable[[list[Reading], Embedder | None, set[str]], dict[str, "Understood"]]


class Turn:
    """Builds the candidates of one event."""

    def __init__(self, event: EventView, speaker: Speaker, *, place: Placer,
                 readings: dict[str, Understood] | None = None,
                 embedder: Embedder | None = None) -> None:
        self.event = event
        self.speaker = speaker
        self.out: list[Candidate] = []
        self.readings = readings if readings is not None else {}
        self.embedder = embedder
        self.place = place

    def reading(self, sentence: str) -> Reading:
        return self.understood(sentence).reading

    def understood(self, sentence: str) -> Understood:
        """The clause analysis of ``sentence``: read in the batch, or now if it was made
        from another sentence since ("I prefer coffee now, I've given up tea" read as two),
        placed by meaning as the batch places a sentence."""
        return self.understood_all([sentence])[0]

    def understood_all(self, sentences: list[str]) -> list[Understood]:
        """The clause analyses of several sentences, those not read in the batch read and
        placed together: one parse and one embedder call."""
        missing = [s for s in dict.fromkeys(sentences) if s not in self.readings]
        if missing:
            told = set(missing) if self.speaker.person and NAMED_SPEAKERS_AS_FACTS else set()
            self.readings.update(self.place(read(missing), self.embedder, told))
        return [self.readings[s] for s in sentences]

    def candidate(self, slot_or_type: Slot | str, statement: str, **kw: Any) -> Candidate:
        ev, sp = self.event, self.speaker
        if isinstance(slot_or_type, Slot):
            s = slot_or_type
            fields: dict[str, Any] = {
                "type": s.type, "subject": s.subject, "attribute": s.attribute,
                "value": s.value, "change": s.change, "negated": s.negated,
                "one_off": s.one_off, "forget_topic": s.forget_topic,
                "importance": s.importance if s.importance is not None
                else IMPORTANCE.get(s.type, 0.5),
                "details": dict(s.details),
            }
        else:
            fields = {"type": slot_or_type, "importance": IMPORTANCE["event"], "details": {}}
        fields.update(kw)
        if sp.trusted_tool:
            fields["details"]["trusted_tool"] = True
        if sp.person:
            fields["details"]["speaker"] = sp.person
        one_off = bool(fields.get("one_off"))
        return Candidate(
            statement=statement,
            provenance=[ev.event_id],
            valid_from=ev.at,
            scope=ev.scope if one_off else ev.scope.owner,
            source=sp.source,
            trust=sp.trust,
            confidence=fields.pop("confidence", sp.confidence),
            inferred=fields.pop("inferred", sp.inferred),
            from_tool=sp.from_tool,
            **fields,
        )



def prefixed(prefix: str, text: str) -> str:
    return f"{prefix}: {text}" if prefix else text



def emphasised(text: str) -> bool:
    return bool(EMPHASIS_EN.search(text) or EMPHASIS_ZH.search(text))



@dataclass(frozen=True, slots=True)
class Understood:
    """A sentence's clause analysis and the attribute its meaning is nearest, if any."""

    reading: Reading
    frame: Frame | None
    score: float


# Whether a named person's words no matcher reads (meta.speaker: people talking to each
# other, LoCoMo's shape) become their facts: lasting ones by meaning, past events and plans
# as history, others' news as those people's facts, each beside the turn's episode.
# Measured on LoCoMo dev8 (2026-12-06): `sleepmem eval extraction` coverage 0.658, same
# thing 0.520, unmatched 0.164 (off: 0.066 / 0.051 / 0.090). Evidence recall at 500 /
# 1,000 / 1,500 / 2,000 tokens (`sleepmem eval locomo`, same run) 0.790 / 0.856 / 0.885 /
# 0.901 on, 0.781 / 0.855 / 0.885 / 0.900 off, once an open slot's supersession stopped
# retiring the episodes that carry the turns (resolve.update.retire_episodes). A switch, not a
# setting: the tests that pin the episodes-only reading turn it off, on this module, so the
# other extract modules read it as ``turns.NAMED_SPEAKERS_AS_FACTS``, never a copy.
NAMED_SPEAKERS_AS_FACTS = True


PATH_MARKS = str.maketrans("._-", "   ")



def comma_parts(text: str) -> list[str]:
    """The text cut at each comma or semicolon, the white space around the cut dropped."""
    parts = text.replace(";", ",").split(",")
    last = len(parts) - 1
    return [(p if i == 0 else p.lstrip()) if i == last else
            (p if i == 0 else p.lstrip()).rstrip() for i, p in enumerate(parts)]



def dialled(text: str) -> str:
    return "".join(c for c in text if c.isdecimal() or c == "+")


def as_read(sentence: str) -> str:
    """A sentence as extraction reads it: in its language's standard spelling ("im veggie"
    -> "I'm veggie"), and "tl;dr" would split it at its semicolon."""
    return normalised(sentence).replace("tl;dr", "tldr").replace("TL;DR", "TLDR")
