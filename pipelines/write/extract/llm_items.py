"""What the model proposed, as candidates: its types and attributes mapped onto the known
slots (or an open slot from its own relation), its statement cleaned and in the user's
words where they can be found, and kept short-lived when it names a time or an id."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sleepmem.pipelines.language.words import Phrases
from sleepmem.pipelines.text import (
    CHANGE_EN,
    CHANGE_ZH,
    clean_end,
    first_person_en,
    first_person_zh,
    is_zh,
    norm_value,
    sentence_case,
    third_person_zh,
)
from sleepmem.pipelines.types import (
    MANY_VALUED_RELATIONS,
    OPEN_SLOT_PREFIX,
    Candidate,
    EventView,
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
from sleepmem.pipelines.write.extract.slots import type_of
from sleepmem.pipelines.write.extract.statements import (
    FACT_RELATIONS,
    SINGLE_VALUED,
    VOCAB_SLOT,
    clean_statement,
    is_one_off,
    open_slot,
    preference_cue,
)
from sleepmem.pipelines.write.extract.turns import Speaker, speaker_of

CandidateType = Literal["identity", "preference", "fact", "task", "event", "procedure"]

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
    speaker = weakest(events)
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



def weakest(events: list[EventView]) -> Speaker:
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
