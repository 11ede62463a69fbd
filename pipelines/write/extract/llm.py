"""LLM extraction: the rules read every event, a chat model reads what they could not.

Rules first, model for the rest (``route="rules_first"``, the default): the deterministic
reader owns what code does better than a small model, and the model is asked only about
the user statements the vocabulary did not recognise, one call per batch of a scope's
such events. ``route="model_first"`` asks the model about every message that code does
not own and keeps the rules' reading only where the model finds nothing lasting.

Owned by code in both routes, never sent to the model: outcomes (structured meta), tool
output (trusted JSON is parsed field by field; untrusted text may carry injected
instructions), forget requests, sentences that carried a secret (nothing may be derived
from them), one-off requests (they stay in their session) and small talk.

The model proposes what to remember (type, slot, value, statement, change / negation /
one-off flags); the trust facts it cannot be trusted with (who spoke, whether a tool was
trusted, which scope) come from the events themselves, and its output is post-processed
into the candidate shape the rules produce (vocabulary slots, ``rel:<relation>`` open
slots, clean third-person statements), so dedup, open slots, forget matching and
conflicts are the same code for both. Anything the output gets wrong in form (not JSON,
missing fields, ids not in the batch) raises ExtractionError so the batch stays pending
and the failure is audited, never half-applied.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from sleepmem.core.errors import ExtractionError
from sleepmem.core.logs import get_logger
from sleepmem.pipelines.ports import ChatModel, Embedder, LLMUsage
from sleepmem.pipelines.text import (
    split_sentences,
)
from sleepmem.pipelines.types import (
    Candidate,
    EventView,
    Extraction,
)
from sleepmem.pipelines.vocab import (
    REDACTED,
)
from sleepmem.pipelines.write.extract.llm_items import LLMCandidate, to_candidate
from sleepmem.pipelines.write.extract.rules import RulesExtractor
from sleepmem.pipelines.write.extract.statements import (
    is_one_off,
    is_small_talk,
)
from sleepmem.pipelines.write.extract.turns import speaker_of

Route = Literal["rules_first", "model_first"]
ROUTES: tuple[Route, ...] = ("rules_first", "model_first")

SYSTEM_PROMPT = """\
You read chat events and extract what an assistant should remember long-term about the
user. Reply with JSON {"candidates": [...]}; each candidate has event_ids, type, statement.
type (by what the statement IS, it sets how long it is kept):
- identity: who the user is: name, age, birthday, nationality, allergy, health condition,
  family member. Never for tastes or habits.
- preference: what the user likes, wants or prefers: tastes, diet, seats, tone/length/
  language of answers, things to avoid.
- fact: what is true about the user for a while: where they live or work, their job, what
  they own, use, drive, learn, play, practise, do regularly, their projects and tools.
- task: short-lived numbers and plans: order/ticket/booking numbers, appointments.
- event: something that happened once; opinions about the conversation.
statement: ONE clean third-person sentence in the event's language, no greeting, no
"and"/"so" at the start ("The user drives a Volvo." / "用户在学日语。").
subject: "user" (default), or the named project/service/thing the fact is about.
attribute: a known slot when one fits: residence, employer, occupation, address, email,
phone, name, age, birthday, nationality, diet, answer_length, answer_language,
answer_format, answer_tone, allergy:<x>, family:<relation>, likes:<topic>, hobby:<x>,
order_number; otherwise the
relation verb in third person: owns, drives, uses, learns, plays, practises, prefers,
speaks, volunteers_at, studies_at. value: the object, short and lowercase.
change=true only when the user says something changed or corrects an earlier fact.
negated=true (value "") when something stopped being true.
One event may hold several facts: give one candidate per fact. Greetings, thanks and
questions to the assistant give no candidates. Never invent facts the text does not say.
Example events:
{"id":"e1","role":"user","text":"hey! these days I mostly commute by ferry, and I adopted
a tortoise last spring"}
{"id":"e2","role":"user","text":"我现在在学做陶艺，周末也去动物收容所做志愿者。"}
Example reply: {"candidates":[
{"event_ids":["e1"],"type":"fact","attribute":"commutes_by","value":"ferry",
"statement":"The user commutes by ferry."},
{"event_ids":["e1"],"type":"fact","attribute":"owns","value":"tortoise",
"statement":"The user has a tortoise (adopted last spring)."},
{"event_ids":["e2"],"type":"fact","attribute":"learns","value":"陶艺",
"statement":"用户在学做陶艺。"},
{"event_ids":["e2"],"type":"fact","attribute":"volunteers_at","value":"动物收容所",
"statement":"用户周末去动物收容所做志愿者。"}]}"""

# A compact schema: the small local models read every token of it on every call.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["candidates"],
    "properties": {
        "candidates": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["event_ids", "type", "statement"],
                "properties": {
                    "event_ids": {"type": "array", "items": {"type": "string"}},
                    "type": {"enum": ["identity", "preference", "fact", "task", "event",
                                      "procedure"]},
                    "statement": {"type": "string"},
                    "subject": {"type": "string"},
                    "attribute": {"type": "string"},
                    "value": {"type": "string"},
                    "change": {"type": "boolean"},
                    "negated": {"type": "boolean"},
                    "one_off": {"type": "boolean"},
                },
            },
        }
    },
}


class LLMOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    candidates: list[LLMCandidate]


class LLMExtractor:
    """Extractor backed by a chat model, with the rules as the deterministic reader."""

    name = "llm"

    def __init__(
        self,
        chat: ChatModel,
        *,
        batch_events: int,
        embedder: Embedder | None = None,
        route: Route = "rules_first",
    ) -> None:
        if batch_events < 1:
            raise ValueError("batch_events must be at least 1")
        if route not in ROUTES:
            raise ValueError(f"route must be one of {ROUTES}, not {route!r}")
        self.chat = chat
        self.batch_events = batch_events
        self.route = route
        self._rules = RulesExtractor(embedder=embedder)
        self._log = get_logger("sleepmem.extract.llm")

    def extract(self, events: list[EventView]) -> Extraction:
        t0 = time.perf_counter()
        # The rules read every event first (one pass, no I/O): their reading is what code
        # owns, what decides whether the model is asked, and the fallback.
        read: dict[str, list[Candidate]] = {}
        for cand in self._rules.extract(events).candidates:
            read.setdefault(cand.provenance[-1], []).append(cand)
        ask = [e for e in events if self._asks_model(e, read.get(e.event_id, []))]
        proposed: dict[str, list[Candidate]] = {}
        usage = LLMUsage()
        batches = 0
        for batch in self._batches(ask):
            batches += 1
            found, used = self._extract_batch(batch)
            for cand in found:  # a candidate drawn from several events covers each
                for event_id in cand.provenance:
                    proposed.setdefault(event_id, []).append(cand)
            usage = usage + used
        asked = {e.event_id for e in ask}
        candidates: list[Candidate] = []
        seen: set[int] = set()
        for event in events:
            own = read.get(event.event_id, [])
            if event.event_id not in asked:
                candidates.extend(own)
                continue
            for cand in merge(own, proposed.get(event.event_id, []), route=self.route):
                if id(cand) not in seen:
                    seen.add(id(cand))
                    candidates.append(cand)
        from_model = sum(1 for c in candidates if c.details.get("via") == "llm")
        self._log.info(
            "extract.llm",
            model=self.chat.model,
            route=self.route,
            events=len(events),
            asked=len(ask),
            batches=batches,
            llm_calls=usage.calls,
            llm_tokens=usage.tokens,
            candidates=len(candidates),
            from_model=from_model,
            ms=round((time.perf_counter() - t0) * 1000, 1),
        )
        return Extraction(
            candidates=candidates,
            extractor=self.name,
            model=self.chat.model,
            llm_calls=usage.calls,
            llm_tokens=usage.tokens,
        )

    def _asks_model(self, event: EventView, own: list[Candidate]) -> bool:
        """Whether the model reads this event (see the module docstring for who owns what)."""
        if event.kind not in ("message", "feedback", "observation") or not event.content.strip():
            return False  # outcomes, session ends, tool output: parsed, never asked
        if REDACTED.search(event.content) or is_one_off(event.content):
            return False
        if any(c.forget_topic is not None or c.one_off or c.details.get("forget")
               for c in own):
            return False
        if not own or all(c.details.get("chitchat") for c in own) or all(
                is_small_talk(s) for s in split_sentences(event.content)):
            return False  # acknowledgements and small talk
        if self.route == "model_first":
            return True
        # Rules first: only a user's own statements the rules could not structure: read as
        # an episode, or as an unclassified statement without even an open slot.
        if event.role not in ("user", "system") or event.kind == "observation":
            return False
        return any(_unread(c) for c in own)

    def _batches(self, events: list[EventView]) -> Iterator[list[EventView]]:
        """Events grouped by consolidation scope, in order, at most batch_events each."""
        groups: dict[str, list[EventView]] = {}
        for event in events:
            groups.setdefault(event.scope.owner.key, []).append(event)
        for group in groups.values():
            for i in range(0, len(group), self.batch_events):
                yield group[i : i + self.batch_events]

    def _extract_batch(self, batch: list[EventView]) -> tuple[list[Candidate], LLMUsage]:
        # Short local ids: small models copy "e3" faithfully, 32-hex uuids less so.
        by_id = {f"e{i + 1}": event for i, event in enumerate(batch)}
        data, usage = self.chat.complete_json(
            system=SYSTEM_PROMPT, user=render_events(by_id), schema=OUTPUT_SCHEMA
        )
        try:
            output = LLMOutput.model_validate(data)
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise ExtractionError(
                f"LLM output does not match the schema ({exc.error_count()} errors; "
                f"first at {where or 'top level'}: {first.get('msg', '')})"
            ) from None
        out: list[Candidate] = []
        for item in output.candidates:
            unknown = [i for i in item.event_ids if i not in by_id]
            if unknown:
                raise ExtractionError(
                    f"LLM output cites event ids that are not in the batch: {unknown[:5]}"
                )
            cand = to_candidate(item, [by_id[i] for i in dict.fromkeys(item.event_ids)])
            if cand is not None:
                out.append(cand)
        return out, usage


def _unread(cand: Candidate) -> bool:
    """A statement the rules kept without structure, and that is worth a model's look."""
    if cand.details.get("reading") is not None:
        # The clause analysis placed it by grammar and the embedder: with a model at hand,
        # its reading is the better one (merge lets the model's replace it).
        return True
    if cand.details.get("unclassified"):
        return "open_slot" not in cand.details
    if cand.type != "event" or cand.details.get("chitchat"):
        return False
    # An episode keeps the turn it answers in front (rules' pairing): judge its own words.
    own = cand.statement[cand.details.get("reply_offset", 0):].strip()
    sentences = split_sentences(own)
    if not sentences or all(is_small_talk(s) for s in sentences):
        return False
    return not own.endswith(("?", "？"))


def merge(own: list[Candidate], proposed: list[Candidate], *, route: Route) -> list[Candidate]:
    """One event's candidates from the rules' reading and the model's proposal.

    Fail safe: when the model proposes nothing lasting, the rules' reading stands whole
    (their fallback already keeps an unrecognised statement at its type's lifetime). The
    rules' vocabulary slots are high precision: rules first, they win a slot both name;
    model first, the model's reading replaces theirs. The rules' unclassified statements
    give way to what the model read from the same words. Rules first, an episode stays
    beside the facts drawn from it: a derived fact is superseded when a later one takes
    its slot, and the turn must not vanish from current memory with it (on a LoCoMo
    conversation with the local model, dropping episodes left 134 current memories for
    419 turns and halved recall@10).
    """
    lasting = [c for c in proposed if c.type != "event" or c.forget_topic is not None]
    if not lasting:
        return own
    if route == "model_first":
        return lasting
    known = [c for c in own if c.type != "event" and not c.details.get("unclassified")
             and c.details.get("reading") is None]
    taken = {(c.subject, c.attribute) for c in known if c.attribute}
    values = {c.value for c in known if c.value}
    extra = [c for c in lasting
             if (c.subject, c.attribute) not in taken and not (c.value and c.value in values)]
    # A turn the model reads as a forget request keeps no episode: its words may hold
    # what is to be forgotten.
    forgets = any(c.forget_topic is not None for c in lasting)
    episodes = [] if forgets else [
        c for c in own if c.type == "event" and not c.details.get("unclassified")]
    # What the clause analysis had read gives way to the model's reading, and its words
    # go back to the turn's episode, which must outlive the facts drawn from it.
    if not forgets:
        episodes += [_said_as_episode(c) for c in own if c.details.get("reading") is not None]
    return known + episodes + extra


def _said_as_episode(cand: Candidate) -> Candidate:
    """The episode of the words a candidate of the clause analysis was read from."""
    said = str(cand.details.get("said") or cand.statement)
    speaker = cand.details.get("speaker")
    details = {k: v for k, v in cand.details.items() if k in ("speaker", "feedback")}
    return replace(cand, type="event", attribute="", value="", subject="user", change=False,
                   negated=False, importance=0.4, details=details,
                   statement=f"{speaker}: {said}" if speaker else said)


def render_events(by_id: dict[str, EventView]) -> str:
    """The batch as one JSON line per event, with the trust facts the model may need."""
    lines = []
    for local_id, event in by_id.items():
        row: dict[str, Any] = {
            "id": local_id,
            "at": event.at.isoformat(),
            "role": event.role,
            "kind": event.kind,
            "text": event.content,
        }
        if event.kind == "tool_result" or event.role == "tool":
            row["trusted"] = speaker_of(event).trusted_tool
        if event.kind == "observation" and "confidence" in event.meta:
            row["confidence"] = event.meta["confidence"]
        if event.meta.get("speaker"):
            row["speaker"] = str(event.meta["speaker"])
        lines.append(json.dumps(row, ensure_ascii=False))
    return "Events:\n" + "\n".join(lines)


