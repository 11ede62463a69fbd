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
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from sleepmem.core.errors import ExtractionError
from sleepmem.core.logs import get_logger
from sleepmem.pipelines.language.words import Phrases
from sleepmem.pipelines.ports import ChatModel, Embedder, LLMUsage
from sleepmem.pipelines.text import (
    CHANGE_EN,
    CHANGE_ZH,
    clean_end,
    first_person_en,
    first_person_zh,
    is_zh,
    norm_value,
    sentence_case,
    split_sentences,
    third_person_zh,
)
from sleepmem.pipelines.types import (
    MANY_VALUED_RELATIONS,
    OPEN_SLOT_PREFIX,
    Candidate,
    EventView,
    Extraction,
)
from sleepmem.pipelines.vocab import (
    ATTR_SYNONYMS,
    IDENTITY_ATTRS,
    IDENTITY_PREFIXES,
    IMPORTANCE,
    PREFERENCE_ATTRS,
    PREFERENCE_PREFIXES,
    REDACTED,
)
from sleepmem.pipelines.write.extract.rules import RulesExtractor
from sleepmem.pipelines.write.extract.slots import type_of
from sleepmem.pipelines.write.extract.statements import (
    FACT_RELATIONS,
    SINGLE_VALUED,
    VOCAB_SLOT,
    clean_statement,
    is_one_off,
    is_small_talk,
    open_slot,
    preference_cue,
)
from sleepmem.pipelines.write.extract.turns import Speaker, speaker_of

CandidateType = Literal["identity", "preference", "fact", "task", "event", "procedure"]
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


class LLMCandidate(BaseModel):
    """One candidate as the model must return it."""

    model_config = ConfigDict(extra="ignore")

    event_ids: list[str] = Field(min_length=1)
    type: CandidateType
    statement: str = Field(min_length=1, max_length=2000)
    subject: str = Field(default="user", max_length=200)
    attribute: str = Field(default="", max_length=200)
    value: str = Field(default="", max_length=500)
    change: bool = False
    negated: bool = False
    one_off: bool = False
    inferred: bool = False
    emphasis: bool = False
    forget_topic: str | None = Field(default=None, max_length=200)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    importance: float | None = Field(default=None, ge=0.0, le=1.0)

    @field_validator("event_ids", mode="before")
    @classmethod
    def _one_id_is_a_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("subject", mode="before")
    @classmethod
    def _subject(cls, v: Any) -> Any:
        return "user" if v in (None, "") else v

    @field_validator("attribute", "value", mode="before")
    @classmethod
    def _blank(cls, v: Any) -> Any:
        return "" if v is None else v


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


def _weakest(events: list[EventView]) -> Speaker:
    """A candidate drawn from several events is only as trustworthy as its weakest source.

    An assistant message that merely echoes what the user said ("Got it, Beijing") does
    not count against the user's statement; tool output and observations always do.
    """
    speakers = [speaker_of(e) for e in events]
    direct = [s for s in speakers if s.source in ("user", "system")]
    if direct:
        speakers = [s for s, e in zip(speakers, events, strict=True)
                    if s.source in ("user", "system") or e.kind != "message"]
    return min(speakers, key=lambda s: (s.trust == "high", not s.inferred, s.confidence))


_KNOWN_ATTRS = frozenset(ATTR_SYNONYMS.values()) | IDENTITY_ATTRS | PREFERENCE_ATTRS
_KNOWN_PREFIXES = IDENTITY_PREFIXES + PREFERENCE_PREFIXES + ("condition:", "favorite:")


def _known(attribute: str) -> bool:
    return attribute in _KNOWN_ATTRS or attribute.startswith(_KNOWN_PREFIXES)


def _canonical_type(item_type: str, subject: str, attribute: str, statement: str) -> str:
    """Known user slots have one type whatever the model says (diet is a preference); a
    guess is never identity (which never decays) unless the slot is an identity slot."""
    if item_type in ("event", "task", "procedure") or subject != "user":
        return item_type
    if attribute and _known(attribute):
        return type_of(attribute)
    # Outside the vocabulary the words decide, as in the rules: a liking is a preference.
    return "preference" if item_type == "preference" or preference_cue(statement) else "fact"


def _says_change(events: list[EventView]) -> bool:
    """Whether the source events themselves mark an explicit change (or correct us)."""
    return any(
        e.kind == "feedback" or CHANGE_EN.search(e.content) or CHANGE_ZH.search(e.content)
        for e in events
    )


def _clean(statement: str) -> str:
    """One clean sentence: no greeting or connective in front, sentence case."""
    text = statement.strip()
    zh = is_zh(text)
    return sentence_case(clean_statement(text, zh), zh) if text else text


def _in_their_words(events: list[EventView]) -> str:
    """The user's own turn(s) in the third person, the rules' way ("我…" -> "用户…")."""
    parts = []
    for e in events:
        if not is_zh(e.content) or speaker_of(e).source not in ("user", "system"):
            continue
        text = clean_statement(third_person_zh(e.content.strip()), True)
        if text and "用户" not in text[:6]:
            text = "用户" + text
        parts.append(text)
    return " ".join(p for p in parts if p)


def _open_slot(statement: str) -> tuple[str, str, dict[str, Any]] | None:
    """The rules' open-slot reading of the model's statement (in the first person), so
    two wordings of one relation meet in one slot whichever extractor read them."""
    zh = is_zh(statement)
    first = clean_end(first_person_zh(statement) if zh else first_person_en(statement))
    slot = open_slot(first)
    # "sold the Civic and now drives a Model 3": the state it is in now is said last;
    # each clause is read, and the last one with a relation the reader knows wins.
    clauses = first.translate(_CLAUSE_MARKS_ZH).split("，") if zh else _CLAUSE_EN.split(first)
    if len(clauses) > 1:
        for clause in reversed(clauses):
            clause = clause.strip()
            if not zh and not _I_OR_WE.starts(clause):
                clause = f"I {clause}"
            read = open_slot(clean_end(clause))
            if read is not None and _known_relation(VOCAB_SLOT.get(read.relation,
                                                                   read.attribute)):
                slot = read
                break
    if slot is None:
        return None
    attribute = VOCAB_SLOT.get(slot.relation, slot.attribute)
    details = {} if attribute in VOCAB_SLOT.values() else {
        "open_slot": {"relation": slot.relation, "object": slot.object, "multi": slot.multi}}
    return attribute, slot.object, details


_CLAUSE_EN = re.compile(r"(?i)\s*[,;]\s*(?:and\s+|but\s+)?|\s+(?:and|but)\s+")
_CLAUSE_MARKS_ZH = str.maketrans(",；;", "，，，")
_I_OR_WE = Phrases(["i", "we"])
# What says a statement is short-lived (a task, not a lasting fact): a time it is bound
# to, or an identifier (order, parcel, room, ticket: letters and digits together).
_TIME_BOUND = re.compile(
    r"(?i)\b(?:today|tomorrow|tonight|this\s+(?:morning|afternoon|evening|week|weekend)|"
    r"next\s+(?:week|weekend|month|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)(?!s))\b|"
    r"今天|明天|后天|今晚|下周|这周|本周|下星期"
)
_IDENTIFIER = re.compile(r"(?<![\w-])(?=(?:[\w-]*?\d){3})[A-Za-z\d][\w-]{4,}")


def _short_lived(statement: str, events: list[EventView]) -> bool:
    return bool(_IDENTIFIER.search(statement)) or any(
        _TIME_BOUND.search(e.content) for e in events)


# Relations the rules' reader knows by name; another "relation" it returns is a guess
# from an unfamiliar verb (or a noun the model put where a verb belongs).
_RELATIONS = FACT_RELATIONS | SINGLE_VALUED | MANY_VALUED_RELATIONS | {"dislikes", "prefers"}


def _known_relation(attribute: str) -> bool:
    return attribute in VOCAB_SLOT.values() or (
        attribute.removeprefix(OPEN_SLOT_PREFIX) in _RELATIONS)


def _relation(attribute: str) -> str:
    return "_".join(attribute.lower().replace("-", " ").replace(":", " ").split())


def to_candidate(item: LLMCandidate, events: list[EventView]) -> Candidate | None:
    """The model's candidate in the rules' shape; None for one that must not be kept."""
    speaker = _weakest(events)
    last = max(events, key=lambda e: e.at)
    statement = _clean(item.statement)
    if not statement or REDACTED.search(statement):
        return None  # nothing derived from a secret
    if not is_zh(statement) and any(is_zh(e.content) for e in events):
        # Small models answer in English whatever they are told; a memory keeps the
        # user's language (and words), so a Chinese turn is stated from its own text.
        statement = _in_their_words(events) or statement
    attribute = item.attribute.strip()
    attribute = ATTR_SYNONYMS.get(attribute.lower(), attribute) if attribute else ""
    subject = item.subject.strip().lower() or "user"
    if speaker.person and subject == norm_value(speaker.person):
        # A model may name the speaker where it was asked for "user": read the type and
        # slot as the user's (sleepmem.pipelines.persons names them after the person).
        subject = "user"
    value = "" if item.negated and not item.value.strip() else norm_value(item.value)
    details: dict[str, Any] = {"via": "llm"}
    if item.type == "event":
        attribute = ""
    elif subject == "user" and item.type in ("identity", "preference", "fact") and not (
            attribute and _known(attribute)):
        # Outside the vocabulary: an open slot, read by the rules' relation reader (from
        # the model's relation and object when it named them, else from its statement),
        # so two wordings of one relation meet in one slot whichever extractor read them.
        said = f"I {attribute.replace('_', ' ')} {value}" if attribute and value else ""
        stated, named = _open_slot(statement), _open_slot(said) if said else None
        if stated is not None and named is not None and stated[0] == named[0]:
            attribute, value, extra = named  # agreed relation: the model's object, shorter
        elif stated is not None and _known_relation(stated[0]):
            attribute, value, extra = stated
        elif named is not None and _known_relation(named[0]):
            attribute, value, extra = named
        elif attribute:
            # A relation no reader knows holds many values: the model names relations
            # freely ("family", "friends", "supports"), and read as single-valued each new
            # value would supersede the last one and retire the episodes that name it.
            relation = _relation(attribute)
            attribute, extra = OPEN_SLOT_PREFIX + relation, {}
            if not _known_relation(attribute):
                extra = {"open_slot": {"relation": relation.replace("_", " "),
                                       "object": value, "multi": True}}
        elif stated is not None:
            attribute, value, extra = stated
        else:
            extra = {}
        details.update(extra)
    if speaker.trusted_tool:
        details["trusted_tool"] = True
    if speaker.person:
        details["speaker"] = speaker.person
    confidence = min(item.confidence, speaker.confidence)
    kind = _canonical_type(item.type, subject, attribute, statement)
    if kind in ("fact", "preference") and not _known(attribute) and _short_lived(
            statement, events):
        kind = "task"  # kept for its short life, as the rules keep an episode
    importance = item.importance if item.importance is not None else IMPORTANCE[kind]
    topic = (item.forget_topic or "").strip() or None
    # The words decide a change, as in the rules: a model that over-flags change would let
    # a statement supersede instead of conflict, one that misses it would keep both.
    change = _says_change(events)
    one_off = item.one_off or any(is_one_off(e.content) for e in events)
    return Candidate(
        type="event" if topic else kind,
        statement=statement,
        provenance=[e.event_id for e in events],
        valid_from=last.at,
        scope=last.scope if one_off else last.scope.owner,
        subject=subject,
        attribute=attribute,
        value=value,
        source=speaker.source,
        trust=speaker.trust,
        confidence=round(confidence, 3),
        importance=round(importance, 3),
        change=change,
        negated=item.negated,
        one_off=one_off,
        inferred=speaker.inferred or item.inferred,
        from_tool=speaker.from_tool,
        emphasis=item.emphasis,
        forget_topic=topic,
        details=details,
    )
