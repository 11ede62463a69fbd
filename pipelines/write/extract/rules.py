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
import json
import re
import time
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from itertools import pairwise
from typing import Any

from sleepmem.core.logs import get_logger
from sleepmem.pipelines.language import Mood, Owner, Reading, Time, normalised, read
from sleepmem.pipelines.language.words import Phrases
from sleepmem.pipelines.ports import Embedder
from sleepmem.pipelines.text import (
    ACK,
    ASSISTANT_ACK,
    CHANGE_EN,
    CHANGE_ZH,
    CHITCHAT,
    CONNECTOR,
    EMPHASIS_EN,
    EMPHASIS_ZH,
    FILLER_CLAUSE,
    HEDGE_EN,
    IMPERATIVE_START,
    INSTRUCTION,
    NEGATIVE_FEEDBACK,
    ONE_OFF_EN,
    ONE_OFF_ZH,
    clean_end,
    first_person_en,
    first_person_zh,
    is_discourse,
    is_zh,
    norm_value,
    sentence_case,
    singular,
    split_clauses,
    split_sentences,
    strip_discourse,
    third_person_en,
    third_person_zh,
)
from sleepmem.pipelines.types import (
    MANY_VALUED_RELATIONS,
    OPEN_SLOT_PREFIX,
    TOOL_PREFIX,
    Candidate,
    EventView,
    Extraction,
)
from sleepmem.pipelines.vocab import (
    ATTR_SYNONYMS,
    FAMILY_EN,
    FAMILY_ZH,
    IMPORTANCE,
    REDACTED,
    SECRET_WORDS,
)
from sleepmem.pipelines.write.extract.en_facts import (
    m_contact,
    m_employment,
    m_my_x_is,
    m_project,
    m_residence,
    m_task,
    m_tools,
)
from sleepmem.pipelines.write.extract.en_person import (
    m_age,
    m_allergy,
    m_answer_style,
    m_birthday,
    m_condition,
    m_diet,
    m_family,
    m_instruction,
    m_likes,
    m_name,
    m_nationality,
)
from sleepmem.pipelines.write.extract.frames import Frame, frames_of
from sleepmem.pipelines.write.extract.slots import (
    TECH_ALIASES,
    Clause,
    Matcher,
    Slot,
    m_forget,
    m_tech,
    type_of,
)
from sleepmem.pipelines.write.extract.statements import (
    FACT_RELATIONS,
    VOCAB_SLOT,
    OpenSlot,
    clean_statement,
    implied_subject,
    is_one_off,
    is_small_talk,
    lasting_clauses,
    lasting_first_person,
    open_slot,
    preference_cue,
    uninvert,
)
from sleepmem.pipelines.write.extract.zh import (
    mz_age,
    mz_allergy,
    mz_answer_style,
    mz_birthday,
    mz_condition,
    mz_diet,
    mz_employment,
    mz_family,
    mz_instruction,
    mz_likes,
    mz_my_x_is,
    mz_name,
    mz_project,
    mz_residence,
    mz_task,
    mz_tools,
)

# A request that does not say it lasts is a preference only when it clearly means one
# ("give me temperatures in Fahrenheit" 0.71 to the units frame; "book me a flight to Rome"
# 0.35 to the seat frame: scripts/frame_scores.py).
FOR_NOW_FLOOR = 0.5
# The lemmas a parser gives an owning clause's predicate ("I have a corgi", "I've got two").
OWNING_LEMMAS = frozenset({"have", "get", "own", "buy"})
# Low: an unclassified statement must earn its keep through mentions and hits.
UNCLASSIFIED_IMPORTANCE = 0.3
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

# Priority order: the first matcher that yields slots for a clause wins it.
EN_MATCHERS: tuple[tuple[tuple[str, ...], Matcher], ...] = (
    (("forget", "delete", "erase", "remove", "wipe", "purge", "scrub", "clear", "drop",
      "discard", "get rid", "keep", "store", "save", "remember", "retain", "unlearn"),
     m_forget),
    (("allergic", "allerg"), m_allergy),
    (("vegan", "vegetarian", "veggie", "pesc", "keto", "paleo", "halal", "kosher", "free",
      "plant", "carb", "flexitarian", "carnivore", "omnivore", "eat", "meat", "fish",
      "dairy", "diet", "fruitarian"), m_diet),
    (("have", "got", "suffer", "diagnos", "struggle", "i'm", "i am", "live with"),
     m_condition),
    (("name", "call me", "called", "go by", "i'm", "i am", "this is"), m_name),
    (("i'm", "i am", "i have", "citizen", "national", "passport"), m_nationality),
    (("i'm", "i am", "turned", "age", "im "), m_age),
    (("birthday", "born", "bday", "date of birth"), m_birthday),
    (tuple(FAMILY_EN), m_family),
    (("@", "phone", "mobile", "cell", "number", "call me", "text me", "reach me", "address",
      "ship", "send", "deliver", "mail", "post", "live at"), m_contact),
    (("move", "moved", "relocat", "live", "living", "reside", "based", "located", "settled",
      "from", "grew up", "raised", "home", "emigrat", "immigrat"), m_residence),
    (("answer", "repl", "respon", "explanation", "message", "write", "talk", "speak",
      "communicate", "english", "chinese", "french", "german", "spanish", "japanese",
      "short", "brief", "concise", "succinct", "terse", "detail", "thorough", "depth",
      "long", "verbose", "wordy", "conclusion", "tl;dr", "tldr", "bullet", "table",
      "markdown", "list", "formal", "casual", "friendly", "professional", "tone", "direct",
      "blunt", "spell", "summar", "gist", "point", "output"), m_answer_style),
    (("work", "job", "employ", "joined", "occupation", "profession", "role", "title",
      "position", "retired", "freelanc", "intern", "i'm a", "i am a", "i'm an", "i am an",
      "i'm the", "i am the", "company", "started"), m_employment),
    (tuple(sorted({a.split()[0] for a in TECH_ALIASES} | {"k8s"})), m_tech),
    (("port", "hosted", "deployed", "version", "running", "reachable", "runs"), m_project),
    (("order", "ticket", "booking", "tracking", "confirmation", "reservation", "case",
      "invoice", "flight", "policy", "claim", "shipment", "parcel", "package", "refund",
      "return", "rma", "incident", "issue", "pr", "pull request", "reference", "account",
      "appointment", "meeting", "interview", "call", "exam", "due", "deadline",
      "surgery", "check", "presentation", "membership", "customer", "application"), m_task),
    (("favourite", "favorite", "hobby", "hobbies", "pastime", "passion", "free time",
      "spare time", "love", "like", "enjoy", "adore", "into", "fan of", "dig", "prefer",
      "hate", "dislike", "detest", "loathe", "stand", "bear", "care for", "sick of",
      "tired of"), m_likes),
    (("use", "using", "rely on", "work with", "code in", "write in", "program in",
      "switched", "moved to", "my "), m_tools),
    (("always", "never", "from now on", "going forward", "future", "every time",
      "each time", "whenever", "by default", "from today", "just", "only", "once",
      "for this", "for today", "this time"), m_instruction),
    (("my ",), m_my_x_is),
)
ZH_MATCHERS: tuple[tuple[tuple[str, ...], Matcher], ...] = (
    (("忘", "删", "清除", "清掉", "抹", "去掉", "记", "保存", "保留"), m_forget),
    (("过敏",), mz_allergy),
    (("素", "吃"), mz_diet),
    (("病", "症", "炎", "哮喘", "高血压", "乳糖", "失眠", "贫血"), mz_condition),
    (("叫", "名字", "是"), mz_name),
    (("岁",), mz_age),
    (("生日", "出生"), mz_birthday),
    (tuple(FAMILY_ZH), mz_family),
    (("搬", "迁", "移居", "住", "生活在", "定居", "安家", "老家", "家乡", "人"), mz_residence),
    (("回答", "回复", "答复", "回应", "交流", "沟通", "说", "讲", "写", "聊", "简", "短", "详细",
      "具体", "展开", "深入", "举例", "清楚", "结论", "列表", "要点", "表格", "markdown",
      "Markdown", "编号", "代码"), mz_answer_style),
    (("是", "当", "做", "工作", "职业", "上班", "任职", "实习"), mz_employment),
    (tuple(sorted({a.split()[0] for a in TECH_ALIASES} | {"k8s", "K8s"})), m_tech),
    (("端口",), mz_project),
    (("号",), mz_task),
    (("喜欢", "爱", "迷上", "钟爱", "偏爱", "讨厌", "受不了", "反感", "烦", "爱好", "兴趣"),
     mz_likes),
    (("用",), mz_tools),
    (("我的",), mz_my_x_is),
    (("以后", "今后", "从现在", "每次", "总是", "永远", "务必", "一律", "这次", "这一次", "本次",
      "暂时", "临时"), mz_instruction),
)




def _compiled(
    table: tuple[tuple[tuple[str, ...], Matcher], ...],
) -> tuple[tuple[re.Pattern[str] | None, Matcher], ...]:
    """One alternation per matcher: a single scan of the clause instead of a substring test
    per trigger word (the hot loop of extraction)."""
    return tuple(
        (re.compile("|".join(re.escape(t) for t in triggers)) if triggers else None, matcher)
        for triggers, matcher in table
    )


_EN_TABLE = _compiled(EN_MATCHERS)
_ZH_TABLE = _compiled(ZH_MATCHERS)


# ---------------------------------------------------------------------------------------
# Turns
# ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Found:
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


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "yes", "1"))


def speaker_of(event: EventView) -> Speaker:
    meta = event.meta
    named = str(meta.get("speaker") or "").strip()
    if event.kind == "tool_result" or event.role == "tool":
        trusted = _truthy(meta.get("trusted")) or _truthy(meta.get("verified"))
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


class _Turn:
    """Builds the candidates of one event."""

    def __init__(self, event: EventView, speaker: Speaker,
                 readings: dict[str, Understood] | None = None,
                 embedder: Embedder | None = None) -> None:
        self.event = event
        self.speaker = speaker
        self.out: list[Candidate] = []
        self.readings = readings if readings is not None else {}
        self.embedder = embedder

    def reading(self, sentence: str) -> Reading:
        return self.understood(sentence).reading

    def understood(self, sentence: str) -> Understood:
        """The clause analysis of ``sentence``: read in the batch, or now if it was made
        from another sentence since ("I prefer coffee now, I've given up tea" read as two),
        placed by meaning as the batch places a sentence."""
        if sentence not in self.readings:
            told = {sentence} if self.speaker.person and NAMED_SPEAKERS_AS_FACTS else set()
            self.readings.update(_placed(read([sentence]), self.embedder, told))
        return self.readings[sentence]

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


def _prefixed(prefix: str, text: str) -> str:
    return f"{prefix}: {text}" if prefix else text


def _emphasis(text: str) -> bool:
    return bool(EMPHASIS_EN.search(text) or EMPHASIS_ZH.search(text))


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
        _with_previous_turn(events, candidates, readings)
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
        turn = _Turn(event, speaker_of(event), readings, self._embedder)
        if event.kind == "outcome":
            return _outcome(turn)
        if event.kind == "tool_result" or event.role == "tool":
            return _tool(turn)
        text = event.content.strip()
        if not text:
            return []
        if event.kind == "observation":
            return _observation(turn, text)
        if event.role == "assistant":
            return _assistant(turn, text)
        return _statements(turn, text, feedback=event.kind == "feedback")


# -- turns, by who speaks -----------------------------------------------------------------


def _statements(turn: _Turn, text: str, *, feedback: bool = False,
                rewrite: Callable[[str], str] | None = None) -> list[Candidate]:
    """Structured candidates from a first-person turn, plus one event for the rest."""
    out: list[Candidate] = []
    remainder: list[str] = []
    structured_any = False
    queue = split_sentences(text)
    while queue:
        sentence = queue.pop(0)
        zh = is_zh(sentence)
        sentence = said_as = _as_read(sentence)
        found, clauses = _match_sentence(sentence, zh, rewrite)
        if not found and rewrite is None and not turn.speaker.prefix and (
                pieces := _split_standalone(found, clauses, zh, joined=True)):
            queue[:0] = [p for p in pieces if p]
            continue
        if not found and rewrite is None and _reads_first_person(turn) and (
                not REDACTED.search(sentence)) and (tail := _first_person_tail(sentence, zh)) and (
                _kept(turn, unsure := _unclassified(turn, sentence, zh, feedback=feedback,
                                                    slot_from=tail), sentence)):
            # One memory for the sentence, its slot read from the clause that states it.
            out.extend(_each_value(turn, unsure, sentence, zh))
            structured_any = True
            if turn.speaker.person:
                remainder.append(sentence)  # between people the episode keeps it too
            continue
        if found and rewrite is None and not turn.speaker.prefix and (
                pieces := _split_standalone(found, clauses, zh)):
            queue[:0] = pieces
            continue
        if not found and rewrite is None and (plain := uninvert(sentence)) is not None:
            found, clauses = _match_sentence(plain, zh, None)
            sentence = plain if found else sentence
        if not found and rewrite is None and _reads_first_person(turn) and (
                (said := implied_subject(sentence)) != sentence):
            found, clauses = _match_sentence(said, zh, None)
            # Chinese with its 我 put back counts only where a matcher reads it: the fail-safe
            # below would take any subject-less clause for a lasting fact.
            sentence = said if found or not zh else sentence
        if not found and rewrite is None and _reads_first_person(turn) and (
            not REDACTED.search(sentence) and lasting_first_person(sentence)
        ) and _kept(turn, unsure := _unclassified(turn, sentence, zh, feedback=feedback),
                    sentence):
            # Fail safe: what no matcher knows but the user states about themself is kept
            # at its type's default lifetime, with low importance, not as an episode.
            out.extend(_each_value(turn, unsure, sentence, zh))
            structured_any = True
            if turn.speaker.person:
                remainder.append(sentence)  # between people the episode keeps it too
            continue
        if found and rewrite is None and _reads_first_person(turn):
            found = _owned(found, clauses, turn.reading(sentence), zh)
            found = _not_for_the_moment(found, turn.reading(sentence))
            # Its meaning is the sentence's as said: a reordered one ("coffee is my go-to
            # choice" -> "my go-to choice is coffee") was placed under its own words.
            _framed_found(found, turn.understood(said_as), person=bool(turn.speaker.person))
        if not found and rewrite is None and _reads_first_person(turn) and (
                not REDACTED.search(sentence)) and (
                read_as := _from_reading(turn, sentence, zh, feedback=feedback)) is not None:
            out.extend(_each_value(turn, read_as, sentence, zh))
            structured_any = True
            if turn.speaker.person:
                # Between people the turn's episode keeps the sentence too: a reply
                # answers it and the conversation's passages read as it was said.
                remainder.append(sentence)
            continue
        if not found:
            kept = [c for c in split_clauses(sentence, zh) if not REDACTED.search(c)]
            if len(kept) == len(split_clauses(sentence, zh)):
                remainder.append(sentence)
            elif kept:
                remainder.append(("，" if zh else ", ").join(kept))
            continue
        structured_any = True
        change = bool((CHANGE_ZH if zh else CHANGE_EN).search(sentence)) or feedback
        one_off = bool((ONE_OFF_ZH if zh else ONE_OFF_EN).search(sentence)) or (
            rewrite is None and turn.reading(sentence).time is Time.ONE_OFF)
        emphasis = _emphasis(sentence)
        hedged = bool(HEDGE_EN.search(sentence)) and not zh
        for f in found:
            slot = f.slot
            statement = _compose(slot, f, clauses, zh)
            imp = slot.importance if slot.importance is not None else IMPORTANCE[slot.type]
            kw: dict[str, Any] = {
                "change": slot.change or (change and slot.forget_topic is None),
                "one_off": one_off and slot.type in ("preference",),
                "emphasis": emphasis,
                "importance": round(min(1.0, imp + (0.15 if emphasis else 0.0)), 3),
            }
            if hedged and not turn.speaker.inferred:
                kw["confidence"] = min(turn.speaker.confidence, 0.8)
            if feedback:
                slot.details["feedback"] = True
            out.append(turn.candidate(slot, statement, **kw))
    out = _merge_same_slot(out)
    rest = _joined(remainder)
    if rest and not ACK.match(rest):
        event = _event(turn, rest if structured_any else text, feedback=feedback)
        if (is_one_off(rest) or _asks_for_the_moment(turn, remainder)) and not (
                event.details.get("chitchat")):
            # A one-off request stays in its session, short-lived, whatever it asks for.
            event.one_off = True
            event.scope = turn.event.scope
        out.append(event)
    return out


def _each_value(turn: _Turn, cand: Candidate, sentence: str, zh: bool) -> list[Candidate]:
    """A reading of a sentence no matcher read that states several values of an attribute
    holding many ("pottery and chess are hobbies of mine"): one memory per value, in the
    same attribute, each with its own recency. Values of an attribute that holds one ("I
    commute by bus and train") are one value together; a matcher's own slots already say
    how many values they hold."""
    each = turn.reading(sentence).each
    slot = cand.details.get("open_slot") or {}
    if len(each) < 2 or not slot.get("multi") or turn.speaker.prefix or cand.details.get(
            "history"):
        return [cand]
    out = []
    for piece in each:
        value = norm_value(turn.reading(piece).value)
        if not value:
            return [cand]
        out.append(replace(cand, statement=_of_the_user(piece, zh), value=value, details={
            **cand.details, "said": piece, "open_slot": {**slot, "object": value}}))
    return out


def _of_the_user(sentence: str, zh: bool) -> str:
    """A first-person sentence as a memory states it: in the third person, tidied."""
    body = clean_end(strip_discourse(clean_statement(sentence.strip(), zh)))
    third = third_person_zh(body) if zh else third_person_en(body)
    return sentence_case(clean_statement(third, zh), zh)


def _asks_for_the_moment(turn: _Turn, sentences: list[str]) -> bool:
    """Whether the turn's words ask for something for this moment only ("I'm only
    needing an aisle seat for now"): a wish or request whose time is one-off."""
    if turn.speaker.source != "user" or turn.speaker.person:
        return False
    readings = [turn.reading(s) for s in sentences]
    return any(r.time is Time.ONE_OFF and r.mood in (Mood.INSTRUCTION, Mood.WISH)
               for r in readings)


def _joined(sentences: list[str]) -> str:
    """Sentences as one text again: Chinese ones without the space English needs."""
    out = ""
    for s in sentences:
        s = s.strip()
        if out and s and not (is_zh(out[-1]) or is_zh(s[0])):
            out += " "
        out += s
    return out


def _as_read(sentence: str) -> str:
    """A sentence as extraction reads it: in its language's standard spelling ("im veggie"
    -> "I'm veggie"), and "tl;dr" would split it at its semicolon."""
    return normalised(sentence).replace("tl;dr", "tldr").replace("TL;DR", "TLDR")


@dataclass(frozen=True, slots=True)
class Understood:
    """A sentence's clause analysis and the attribute its meaning is nearest, if any."""

    reading: Reading
    frame: Frame | None
    score: float


def _read_all(events: list[EventView], embedder: Embedder | None) -> dict[str, Understood]:
    """Every sentence of every user and feedback turn, read in one batch per language;
    those that could hold a fact are placed by meaning in one embedder call."""
    sentences: list[str] = []
    told: set[str] = set()  # said by a named person (meta.speaker): their history counts
    for event in events:
        if event.role == "user" and event.kind in ("message", "feedback") and (
                text := event.content.strip()):
            said = [_as_read(s) for s in split_sentences(text)]
            sentences.extend(said)
            if speaker_of(event).person and NAMED_SPEAKERS_AS_FACTS:
                told.update(said)
    return _placed(read(list(dict.fromkeys(sentences))), embedder, told)


def _placed(readings: list[Reading], embedder: Embedder | None,
            told: set[str]) -> dict[str, Understood]:
    """Each reading with the frame its meaning is nearest, for those that could hold a
    fact, in one embedder call (``told``: sentences whose history counts)."""
    # Only what no matcher reads needs its meaning placed: the embedder is the cost here.
    holding = [r for r in readings if _may_hold(r, history=r.text in told)
               and _improvised(_match_sentence(r.text, is_zh(r.text), None)[0])]
    # Judged on the clause that holds, not the whole sentence: what else the sentence says
    # ("…, the lease started Monday") only blurs its meaning.
    framed = dict(zip([r.text for r in holding],
                      frames_of(embedder, [r.clause or r.text for r in holding]),
                      strict=True)) if embedder is not None and holding else {}
    return {r.text: Understood(r, *framed.get(r.text, (None, 0.0))) for r in readings}


def _may_hold(reading: Reading, *, history: bool = False) -> bool:
    """Whether a clause can state something that lasts: its owner, mood and time allow it,
    it names a value and it is not about the talk itself. With ``history`` (a named person
    talking to others), what they did or plan to do counts too (see _from_reading)."""
    if reading.owner is Owner.NOBODY or reading.mood is Mood.QUESTION or reading.about_talk or (
            reading.fragment):
        return False
    return (reading.lasting or (history and reading.time in HISTORY) or (
        reading.mood in (Mood.INSTRUCTION, Mood.WISH) and reading.time.value == "lasting")
    ) and bool(reading.value)


# A person's history: what they did ("I went to a support group yesterday") or plan ("we'll
# go camping in June"). Between people (meta.speaker) it is what a later question asks
# about, so it is kept as a fact of theirs beside the turn's episode (_statements keeps
# the sentence there too). A user telling the assistant of a one-off event keeps it as the
# turn's episode: that user's history is the conversation itself.
HISTORY = frozenset({Time.PAST, Time.FUTURE})
# Whether a named person's words no matcher reads (meta.speaker: people talking to each
# other, LoCoMo's shape) become their facts: lasting ones by meaning, past events and plans
# as history, others' news as those people's facts, each beside the turn's episode.
# Measured on LoCoMo dev8 (2026-12-06): `sleepmem eval extraction` coverage 0.658, same
# thing 0.520, unmatched 0.164 (off: 0.066 / 0.051 / 0.090). Evidence recall at 500 /
# 1,000 / 1,500 / 2,000 tokens (`sleepmem eval locomo`, same run) 0.790 / 0.856 / 0.885 /
# 0.901 on, 0.781 / 0.855 / 0.885 / 0.900 off, once an open slot's supersession stopped
# retiring the episodes that carry the turns (resolve._retire_episodes). A switch, not a
# setting: the tests that pin the episodes-only reading turn it off.
NAMED_SPEAKERS_AS_FACTS = True
# A named person's clause takes a frame only when its meaning is clearly the frame's: in
# talk between people most clauses are near some attribute by chance (measured with
# `sleepmem eval extraction` on dev8: same-thing share highest here).
PERSON_FRAME_FLOOR = 0.45


def _improvised(found: list[_Found]) -> bool:
    """Whether no matcher read a sentence, or each one that did named its attribute after
    the sentence's own key word ("my body is …"): then its meaning is placed too."""
    return all(f.slot.details.get("improvised") for f in found)


def _framed_found(found: list[_Found], seen: Understood, *, person: bool) -> None:
    """An improvised attribute gives way to the attribute the sentence means, when its
    meaning is clear ("my body is sensitive to latex" is an allergy, not a "body")."""
    frame = seen.frame
    clear = frame is not None and not (person and seen.score < PERSON_FRAME_FLOOR)
    for f in found:
        if f.slot.details.pop("improvised", None) and frame is not None and clear:
            f.slot.type, f.slot.importance = frame.type, IMPORTANCE[frame.type]
            f.slot.attribute = frame.slot
            f.slot.details.update(type_by="frame", frame=round(seen.score, 3))


def _asks_for_now(reading: Reading) -> bool:
    """A request with no word that it lasts ("book me a flight", "give me the forecast"):
    a task for now, unless what it asks for means a preference (see _from_reading)."""
    return reading.mood in (Mood.INSTRUCTION, Mood.WISH) and not reading.change and (
        reading.time.value != "habitual")


def _task_for_now(seen: Understood) -> bool:
    """A request for now whose meaning is no clear preference: "book me a flight", "I'm
    requesting the boarding pass", 我需要查一下快递 are tasks; "give me temperatures in
    Celsius" and "I need gluten-free meals" name what the person wants at all times."""
    frame = seen.frame
    return _asks_for_now(seen.reading) and (
        frame is None or frame.type != "preference" or seen.score < FOR_NOW_FLOOR)


def _owned(found: list[_Found], clauses: list[Clause], reading: Reading,
           zh: bool) -> list[_Found]:
    """What the clause analysis says of a sentence a matcher read: a hypothetical ("if I
    ever move to Oslo") fills nothing, and another person's fact ("my brother moved to
    Chengdu") is theirs, never a change of the speaker's own slot."""
    if reading.owner is Owner.NOBODY:
        return [f for f in found if f.slot.forget_topic is not None]
    if reading.owner is Owner.OTHER and reading.other:
        subject = _other_subject(reading.other, zh)
        for f in found:
            if f.slot.subject == "user" and f.slot.attribute in OWN_STATE and (
                    reading.other.lower() in clauses[f.clause_index].raw.lower()) and not (
                    first_person_zh(clauses[f.clause_index].raw.replace("我" + reading.other, ""))
                    if zh else _says_i(clauses[f.clause_index].raw)):
                f.slot.subject = subject
                f.slot.change = False
    return found


def _not_for_the_moment(found: list[_Found], reading: Reading) -> list[_Found]:
    """A sentence bound to the moment ("for this recipe only, …, my grandma is cooking
    it"; "I'm in Tokyo this week") states no lasting fact or identity: those slots go, and
    the sentence stays the turn's one-off episode. Preferences stay, marked one-off."""
    if reading.time is not Time.ONE_OFF or reading.change:
        return found
    return [f for f in found if f.slot.type not in ("fact", "identity")
            or f.slot.forget_topic is not None]


# The speaker's own state, which another person's news must never change: "my brother
# moved to Chengdu" is not the user's move. Slots that name a relative already (a child's
# school, a partner's job) keep the reading their matcher gave.
OWN_STATE = frozenset({"residence", "employer", "occupation", "diet", "answer_language",
                       "answer_length", "answer_format", "answer_tone", "nationality",
                       "hometown"})


def _says_i(clause: str) -> bool:
    """Whether an English clause speaks in the first person."""
    return any(w in ("i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "our", "us")
               for w in clause.lower().replace(",", " ").split())


def _other_subject(other: str, zh: bool) -> str:
    """The subject of another person's fact: a relation is the speaker's ("user's sister",
    用户的哥哥), a name is the person's own."""
    word = norm_value(other)
    if other[:1].isupper():
        return word
    return f"用户的{word}" if zh else f"user's {word}"


def _from_reading(turn: _Turn, sentence: str, zh: bool, *, feedback: bool) -> Candidate | None:
    """A statement no matcher knew, read by its clause analysis: what the speaker states as
    lasting, or asks for from now on, is a fact or preference whose attribute its meaning
    decides (the frame _read_all found); a question, a hypothetical, a plan, a finished
    event, small talk, one-off requests and another person's news are not."""
    seen = turn.understood(sentence)
    reading, frame = seen.reading, seen.frame
    if not _may_hold(reading, history=bool(turn.speaker.person)):
        return None
    if is_small_talk(sentence) or is_one_off(sentence) or ACK.match(sentence):
        return None
    if _task_for_now(seen):
        return None  # "book me a flight" is a task; "give me temperatures in Celsius" is not
    person = turn.speaker.person
    if person and not NAMED_SPEAKERS_AS_FACTS:
        return None
    history = bool(person) and not reading.lasting and reading.time in HISTORY
    subject = "user"
    if reading.owner is Owner.OTHER:
        # Another person's news, told to the assistant, stays the speaker's episode (the
        # entity graph reads who is who from its words); told between people, it is a
        # fact of that person. Either way it never fills the speaker's own slots.
        if not person or not reading.other:
            return None
        subject = _other_subject(reading.other, zh)
    if person and seen.score < PERSON_FRAME_FLOOR:
        frame = None
    if reading.owner is Owner.IMPLICIT and (frame is None or feedback):
        # No person said: the speaker's only when its meaning places it, and never in
        # feedback, which is judged against the memory it answers (resolve).
        return None
    body = clean_end(strip_discourse(clean_statement(sentence.strip(), zh)))
    if not body:
        return None
    third = third_person_zh(body) if zh else third_person_en(body)
    if zh and reading.owner is Owner.SPEAKER and "用户" not in third:
        third = "用户" + third  # 每天早上画鸟: Chinese leaves the speaker out; a memory names them
    elif not zh and reading.owner is Owner.SPEAKER and reading.mood is Mood.STATEMENT and (
            "the user" not in third.lower()):
        # "Quit coffee last week": casual English leaves its "I" out; a memory names them,
        # after an opening interjection ("phew, unpacked …").
        lead, comma, rest = third.partition(", ")
        if comma and rest and len(lead.split()) <= 2:
            third = f"{lead}, the user {rest}"
        else:
            third = "the user " + third[:1].lower() + third[1:]
    statement = sentence_case(clean_statement(third, zh), zh)
    kind = "preference" if reading.mood in (Mood.INSTRUCTION, Mood.WISH) or (
        preference_cue(body)) else "fact"
    value = norm_value(reading.value)
    details: dict[str, Any] = {
        "reading": {"owner": reading.owner.value, "mood": reading.mood.value,
                    "time": reading.time.value, "head": reading.head},
        "said": sentence,
    }
    importance = UNCLASSIFIED_IMPORTANCE
    if history:
        # What happened or is planned is one of many: it updates nothing and is updated
        # by nothing but its own correction.
        details.update(history=True, type_by="reading")
        relation, multi, kind = reading.head or "did", True, "fact"
        attribute = OPEN_SLOT_PREFIX + relation
        value = norm_value(body)
    elif frame is not None:
        kind, importance = frame.type, IMPORTANCE[frame.type]
        details.update(type_by="frame", frame=round(seen.score, 3))
        attribute = frame.slot
        relation, multi = frame.attribute, frame.multi
    else:
        # Fail safe: a lasting statement of the speaker's own that no attribute fits is a
        # fact (or preference) in an open slot named by its head, never an episode.
        details.update(unclassified=True, type_by="reading" if reading.mood in (
            Mood.INSTRUCTION, Mood.WISH) else "grammar")
        relation = reading.head or "state"  # a clause with no verb the reader knows
        attribute = OPEN_SLOT_PREFIX + relation
        multi = relation.split("_")[0] + "s" in MANY_VALUED_RELATIONS
    details["open_slot"] = {"relation": relation, "object": value, "multi": multi}
    if reading.replaces:
        details["replaces"] = norm_value(reading.replaces)
    if reading.ends and reading.value and not history:
        details["ends"] = norm_value(reading.value)  # "done with running"
    disputes = feedback and _contradicts(sentence, turn.readings)
    if feedback:
        details["feedback"] = "negative" if disputes else True
    # Feedback that agrees ("Biscuit is my golden retriever, thanks") changes nothing.
    change = (reading.change or disputes or bool(reading.replaces)) and not history
    return turn.candidate(
        Slot(type=kind, subject=subject, attribute=attribute, value=value, head=statement,
             importance=importance, change=change,
             negated=reading.negated and not reading.replaces, details=details),
        statement, emphasis=_emphasis(sentence),
    )


# A clause joined by "and" / "而且" is a statement of its own once the join is cut.
_JOINS = ("and", "also", "plus", "as well as", "而且", "并且", "另外", "还有", "同时")


def _unjoined(text: str) -> str:
    """The clause without the join that opens it ("and, " / "而且，")."""
    low = text.lower()
    for j in _JOINS:
        if low.startswith(j):
            rest = text[len(j):].lstrip()
            return (rest[1:].lstrip() if rest.startswith(("，", ",")) else rest)
    return text


def _split_standalone(found: list[_Found], clauses: list[Clause], zh: bool, *,
                      joined: bool = False) -> list[str]:
    """Several facts in one sentence: an unmatched clause that states a lasting fact about
    the speaker on its own ("I always prefer a window seat, and I'm allergic to peanuts")
    is a sentence of its own, not a rider on the matched one (which would type it as the
    allergy is typed). Empty when every unmatched clause depends on a matched one ("I'm
    vegan, so no dairy"). With ``joined`` (nothing matched), a later clause that stands
    alone must also be joined to the sentence by a conjunction: "I relish sci-fi and I
    also appreciate gardening" is two facts, "I'm a morning person, I do my best work at
    6am" one fact and what it means, read whole."""
    matched = {f.clause_index for f in found}
    alone = [i for i, c in enumerate(clauses) if i not in matched and not REDACTED.search(c.raw)
             and lasting_first_person(_unjoined(c.raw))]
    # A later clause that ends something ("…, I've given up squash") is a fact of its own
    # however it is joined: what it ended is another memory's value, not this one's. Not in
    # Chinese, whose clauses leave their subject to the sentence (这个过时了，我早就离开腾讯，
    # 现在在字节跳动: cut out, the last clause would be nobody's).
    if not alone or (joined and all(clauses[i].raw == _unjoined(clauses[i].raw)
                                    for i in alone[1:]) and (zh or not any(
            r.ends for r in read([clauses[i].raw for i in alone if i > 0])))):
        return []
    joiner = "，" if zh else ", "
    rest = joiner.join(c.raw for i, c in enumerate(clauses) if i not in alone)
    return [rest, *(_unjoined(clauses[i].raw) for i in alone)]


def _reads_first_person(turn: _Turn) -> bool:
    """Whether the fallbacks may read the turn's first person as a lasting fact: a user's
    own turn, named or not; never an assistant's, a tool's or an observation's."""
    return not turn.speaker.prefix or bool(turn.speaker.person)


def _kept(turn: _Turn, fallback: Candidate, sentence: str) -> bool:
    """A fallback reading is kept unless the sentence asks for a task for now and states
    no taste ("I'm requesting the boarding pass", 我需要查找快递信息; not "I prefer prose
    answers"): its episode carries it. A named person's is kept only when it fills a
    slot the vocabulary knows (where they live or work, …: "我离开华星了，现在在云帆上班").
    Their other first-person words stay episodes, which carry the person's name and the
    turn around them; a scope several people share is a conversation, where most of
    those words are talk, not lasting facts."""
    if _task_for_now(turn.understood(sentence)) and not preference_cue(sentence):
        return False
    return not turn.speaker.person or not fallback.details.get("unclassified")


def _first_person_tail(sentence: str, zh: bool) -> str:
    """The clauses, from the first one on, that state a lasting fact about the speaker in
    a sentence that opens on something else ("The Canon went to my nephew, these days I
    own a Sony"; "这个过时了，我早就离开腾讯，现在在字节跳动"). Empty when there is none."""
    if lasting_first_person(sentence):
        return ""
    parts = split_clauses(clean_end(sentence), zh)
    if len(parts) == 1 and not zh:
        parts = [p for p in _comma_parts(clean_end(sentence)) if p]
    joiner = "，" if zh else ", "
    for i in range(1, len(parts)):
        rest = joiner.join(parts[i:])
        if lasting_first_person(rest):
            return rest
    return ""


def _unclassified(turn: _Turn, sentence: str, zh: bool, *, feedback: bool,
                  slot_from: str = "") -> Candidate:
    """A first-person lasting statement no matcher knows: a low-importance fact or
    preference with an open slot, so it lives its type's default lifetime and a later
    change of the same relation can supersede it."""
    body = clean_end(strip_discourse(clean_statement(sentence.strip(), zh)))
    third = third_person_zh(body) if zh else third_person_en(body)
    statement = sentence_case(clean_statement(third, zh), zh)
    slot = None
    if slot_from:
        body_of_slot = clean_end(strip_discourse(clean_statement(slot_from.strip(), zh)))
        clauses = split_clauses(body_of_slot, zh) if zh else lasting_clauses(
            body_of_slot, marker=True) or split_clauses(body_of_slot, zh)
    else:
        clauses = split_clauses(body, zh) if zh else lasting_clauses(
            body, marker=True) or split_clauses(body, zh)
    for clause in reversed(clauses):
        slot = open_slot(clause)
        if slot is not None:
            break
    if slot is not None and slot.relation == "owns" and not zh and (
            head := turn.understood(clause).reading.head) and (
            head.split("_")[0] not in OWNING_LEMMAS):
        # "have" the parser reads as an auxiliary ("I have decided to switch …") owns
        # nothing: the clause's own predicate and value say what it is about.
        slot = None
    seen = turn.understood(sentence)
    kind = "preference" if preference_cue(body) else "fact"
    details: dict[str, Any] = {"unclassified": True, "type_by": "grammar"}
    attribute = ""
    importance = UNCLASSIFIED_IMPORTANCE
    if slot is not None:
        details["open_slot"] = {"relation": slot.relation, "object": slot.object,
                                "multi": slot.multi}
        if kind == "fact" and slot.relation in FACT_RELATIONS:
            details["type_by"] = "relation"  # the verb says it: no need to ask the embedder
        attribute = VOCAB_SLOT.get(slot.relation, slot.attribute)
        if attribute in VOCAB_SLOT.values():
            # The relation is a known slot said in words no matcher knew: it is that
            # slot (so "i live in lisbon btw" repeats "I live in Lisbon").
            kind = type_of(attribute)
            importance = IMPORTANCE[kind]
            details.pop("unclassified")
    # A preference by meaning alone must be clearly one: "I'm an avid vegetarian" is a
    # diet (0.91), "we deploy every Friday" only near a schedule preference (0.45).
    if "unclassified" in details and seen.frame is not None and (not turn.speaker.person or (
            NAMED_SPEAKERS_AS_FACTS and seen.score >= PERSON_FRAME_FLOOR)) and (
            seen.frame.type != "preference" or kind == "preference"
            or seen.reading.mood is Mood.WISH or seen.score >= FOR_NOW_FLOOR) and (
            # A name is the speaker's only when a clause of theirs gives it ("everyone
            # calls me Dan"), not "my manager's name is Divya".
            not seen.frame.proper or slot is not None):
        # No matcher knew it, but its meaning is an attribute's ("我对青霉素有反应" is an
        # allergy): it fills that attribute, at that attribute's type and importance.
        frame = seen.frame
        kind, importance = frame.type, IMPORTANCE[frame.type]
        attribute = frame.slot
        value = slot.object if slot else norm_value(seen.reading.value)
        # A name is the clause's value, and so is what an end ended ("gave up tea" ended
        # the tea, not "up tea").
        if (frame.proper or seen.reading.ends) and seen.reading.value:
            value = norm_value(seen.reading.value)
            slot = OpenSlot(frame.attribute, value, frame.multi)
        details = {"type_by": "frame", "frame": round(seen.score, 3),
                   "open_slot": {"relation": frame.attribute, "object": value,
                                 "multi": frame.multi}}
    if seen.reading.replaces:
        details["replaces"] = norm_value(seen.reading.replaces)  # "是湘潭，不是长沙"
    if seen.reading.ends and seen.reading.value and seen.reading.lasting:
        details["ends"] = norm_value(seen.reading.value)  # "I've given up squash"
    if feedback:
        details["feedback"] = "negative" if _contradicts(sentence, turn.readings) else True
    one_off = is_one_off(sentence)
    # The clause analysis reads a change in words no pattern lists ("I have decided to
    # switch to light mode"), as it does for the statements _from_reading keeps; not a
    # denied one ("we didn't switch banks after all"). Chinese reads any finished state
    # change as one (我养了一只狗), which would make a restatement a change: there the
    # change words alone decide.
    change = bool((CHANGE_ZH if zh else CHANGE_EN).search(sentence)) or feedback or bool(
        seen.reading.replaces) or (not zh and seen.reading.change and seen.reading.lasting
                                   and not seen.reading.negated) or (
        seen.reading.ends and seen.reading.lasting)
    return turn.candidate(
        Slot(type=kind, attribute=attribute, value=slot.object if slot else "", head=statement,
             importance=importance,
             change=change or (slot is not None and slot.relation == "moves_to"),
             one_off=one_off, details=details),
        statement, emphasis=_emphasis(sentence),
    )


def _match_sentence(
    sentence: str, zh: bool, rewrite: Callable[[str], str] | None
) -> tuple[list[_Found], list[Clause]]:
    clauses: list[Clause] = []
    found: list[_Found] = []
    matched: list[int] = []
    table = _ZH_TABLE if zh else _EN_TABLE
    for i, raw in enumerate(split_clauses(clean_end(sentence), zh)):
        text = rewrite(raw) if rewrite else raw
        stripped = strip_discourse(text).strip() or text
        clause = Clause(text=stripped, raw=raw, low=stripped.lower(), zh=zh)
        clauses.append(clause)
        if FILLER_CLAUSE.match(raw) or REDACTED.search(raw):
            continue  # a clause that carried a secret derives nothing
        for trigger, matcher in table:
            if trigger is not None and trigger.search(clause.low) is None:
                continue
            slots = matcher(clause)
            if slots:
                found.extend(_Found(s, i) for s in slots)
                matched.append(i)
                break
    if not found:
        return [], clauses
    # Unmatched clauses belong to the nearest matched clause of the sentence (preceding
    # first): "I'm vegan, so no dairy" is one memory, invalidated together.
    for i, clause in enumerate(clauses):
        if i in matched or FILLER_CLAUSE.match(clause.raw):
            continue
        before = [j for j in matched if j < i]
        owner = before[-1] if before else min(matched)
        for f in found:
            if f.clause_index == owner:
                f.attached.append(i)
    return found, clauses


def _compose(slot: Slot, f: _Found, clauses: list[Clause], zh: bool) -> str:
    if slot.forget_topic is not None:
        return slot.head
    head = strip_discourse(slot.head) if slot.from_clause else slot.head
    raw = clauses[f.clause_index].raw
    attached = [j for j in (f.attached if slot.attach else ())
                if not REDACTED.search(clauses[j].raw) and not is_small_talk(clauses[j].raw)
                and not is_discourse(clauses[j].raw)]
    if (f.clause_index > 0 and slot.from_clause and not zh and any(
            j < f.clause_index for j in attached) and (m := CONNECTOR.opening(raw))):
        head = f"{m.lower()} {head[:1].lower()}{head[1:]}"
    if zh and f.clause_index > 0:
        head = _unjoined(head) or head  # "而且用户对花生过敏" -> "用户对花生过敏"
    if zh and slot.subject == "user" and slot.from_clause and "用户" not in head[:6]:
        head = "用户" + head  # Chinese drops the subject; the statement must not
    parts: list[tuple[int, str]] = [(f.clause_index, head)]
    for j in attached:  # a clause about a secret, or a greeting, is not worth keeping
        other = clauses[j].raw
        parts.append((j, third_person_zh(other) if zh else third_person_en(other)))
    parts.sort(key=lambda p: p[0])
    joiner = "，" if zh else ", "
    text = joiner.join(clean_end(p) for _, p in parts if clean_end(p))
    return sentence_case(clean_statement(text, zh), zh)


def _merge_same_slot(cands: list[Candidate]) -> list[Candidate]:
    """Two clauses of one turn saying the same thing are one candidate, not a repeat."""
    out: list[Candidate] = []
    index: dict[tuple[str, str, str, bool], Candidate] = {}
    for c in cands:
        if not c.attribute:
            out.append(c)
            continue
        key = (c.subject, c.attribute, c.value, c.negated)
        prev = index.get(key)
        if prev is None:
            index[key] = c
            out.append(c)
            continue
        if c.statement not in prev.statement:
            tail = c.statement[0].lower() + c.statement[1:]
            prev.statement = f"{clean_end(prev.statement)}; {tail}"
        prev.importance = max(prev.importance, c.importance)
        prev.emphasis = prev.emphasis or c.emphasis
        prev.change = prev.change or c.change
    return out


_OWN_WORDS = Phrases(["my", "i'm", "i am", "i have", "i've", "我的"])
_ASKS_YOU = Phrases(["can you", "could you", "would you", "will you"], loose=True)
_PATH_MARKS = str.maketrans("._-", "   ")


def _comma_parts(text: str) -> list[str]:
    """The text cut at each comma or semicolon, the white space around the cut dropped."""
    parts = text.replace(";", ",").split(",")
    last = len(parts) - 1
    return [(p if i == 0 else p.lstrip()) if i == last else
            (p if i == 0 else p.lstrip()).rstrip() for i, p in enumerate(parts)]


def _dialled(text: str) -> str:
    return "".join(c for c in text if c.isdecimal() or c == "+")


def _event(turn: _Turn, text: str, *, feedback: bool = False,
           importance: float | None = None) -> Candidate:
    text = text.strip()
    chit = (bool(CHITCHAT.search(text)) and len(text) < 160 and not _OWN_WORDS.search(
        text)) or (bool(CHITCHAT.search(text)) and len(text) < 60)
    details: dict[str, Any] = {}
    if chit:
        imp = 0.1
        details["chitchat"] = True
    elif importance is not None:
        imp = importance
    elif text.endswith(("?", "？")) or _ASKS_YOU.starts(text):
        imp = 0.3
    else:
        imp = 0.45 if len(text) > 200 else 0.4
    emphasis = _emphasis(text) and not chit
    if emphasis:
        imp = min(1.0, imp + 0.15)
    if feedback:
        details["feedback"] = "negative" if _contradicts(text, turn.readings) else True
    return turn.candidate("event", _prefixed(turn.speaker.prefix, text),
                          importance=round(imp, 3), emphasis=emphasis, details=details)


def _assistant(turn: _Turn, text: str) -> list[Candidate]:
    sentences = split_sentences(text)
    if all(ASSISTANT_ACK.match(clean_end(s) + ".") or ACK.match(s) for s in sentences):
        return []
    return [_event(turn, text)]


def _observation(turn: _Turn, text: str) -> list[Candidate]:
    rewrite: Callable[[str], str] = first_person_zh if is_zh(text) else first_person_en
    out = _statements(turn, text, rewrite=rewrite)
    structured = [c for c in out if c.type != "event"]
    for c in structured:
        c.inferred = True
        c.trust = "low"
        c.statement = c.statement.replace("The user", "The user (observed)", 1) if (
            c.statement.startswith("The user")) else c.statement
    # The observation itself is kept whole as an (inferred) episode.
    return [*structured, _event(turn, text)]


_OUTCOME = re.compile(
    r"^\s*(?P<trigger>[^:：\n]{1,200}?)\s*[:：]\s*(?P<action>.+?)\s*(?:->|→|=>)\s*"
    r"(?P<result>success(?:ful)?|succeeded|ok|passed|worked|resolved|failure|failed|fail|"
    r"error|成功|失败)\s*(?P<note>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_FAILED = ("failure", "failed", "fail", "error", "失败")


def _outcome(turn: _Turn) -> list[Candidate]:
    ev = turn.event
    meta = ev.meta
    trigger = str(meta.get("trigger") or "").strip()
    action = str(meta.get("action") or "").strip()
    success: bool | None = None
    if isinstance(meta.get("success"), bool):
        success = bool(meta["success"])
    m = _OUTCOME.match(ev.content or "")
    if m:
        trigger = trigger or m.group("trigger").strip()
        action = action or m.group("action").strip()
        if success is None:
            success = not m.group("result").lower().startswith(_FAILED)
    if not trigger or not action:
        return [_event(turn, ev.content)] if ev.content.strip() else []
    subject = norm_value(trigger)
    attribute = norm_value(action)
    details: dict[str, Any] = {"success": bool(success)}
    return [turn.candidate(
        Slot(type="procedure", attribute=attribute, value="", head="", subject=subject,
             importance=0.6, details=details),
        f"When {trigger}: {clean_end(action)}.",
    )]


# -- tool output ---------------------------------------------------------------------------

_PROFILE_KEYS = {k: v for k, v in ATTR_SYNONYMS.items() if "_" in k or " " not in k}
_PROFILE_LABEL = {"address": "address", "billing_address": "billing address",
                  "residence": "city of residence", "employer": "employer",
                  "occupation": "job title", "name": "name", "email": "email",
                  "phone": "phone number", "birthday": "birthday", "timezone": "timezone",
                  "age": "age", "nationality": "nationality", "hometown": "hometown",
                  "native_language": "native language", "diet": "diet",
                  "gender": "gender", "pronouns": "pronouns", "nickname": "nickname"}
_USER_KEYS = ("user", "user_id", "userid", "customer_id", "uid")


def _tool(turn: _Turn) -> list[Candidate]:
    content = turn.event.content.strip()
    if not content:
        return []
    data = _json(content)
    if data is not None:
        trusted = turn.speaker.trusted_tool or _json_verified(data)
        facts: list[Candidate] = []
        if trusted:
            sp = turn.speaker
            turn.speaker = Speaker(sp.source, "high", sp.confidence if sp.trusted_tool else 1.0,
                                   False, from_tool=True, trusted_tool=True, prefix=sp.prefix)
            facts = _profile_facts(turn, data)
        if facts:
            return facts
        summary = _json_summary(data)
        return [_event(turn, summary, importance=0.2)] if summary else []
    kept: list[str] = []
    for sentence in split_sentences(content):
        if INSTRUCTION.search(sentence) or IMPERATIVE_START.starts(sentence, lstrip=True):
            continue
        if REDACTED.search(sentence) and len(REDACTED.sub("", sentence).split()) <= 3:
            continue
        kept.append(sentence)
    text = " ".join(kept).strip()
    if not text:
        return []
    dropped = len(kept) < len(split_sentences(content))
    if turn.speaker.trusted_tool:
        # Trusted tool text about "the customer" is read like an observation: same
        # matchers, first person; the gate lets it through because the tool is trusted.
        rewrite: Callable[[str], str] = first_person_zh if is_zh(text) else first_person_en
        found = [c for c in _statements(turn, text, rewrite=rewrite) if c.type != "event"]
        return [*found, _event(turn, text, importance=0.3)]
    cand = _event(turn, text, importance=0.3)
    if dropped:
        cand.details["instructions_dropped"] = True
    return [cand]


def _json(content: str) -> Any:
    if not content.startswith(("{", "[")):
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None


def _json_verified(data: Any) -> bool:
    if isinstance(data, dict):
        if _truthy(data.get("verified")) or _truthy(data.get("trusted")):
            return True
        return any(_json_verified(v) for v in data.values() if isinstance(v, dict | list))
    if isinstance(data, list):
        return any(_json_verified(v) for v in data[:20])
    return False


def _flat_value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(_flat_value(v) for v in value.values() if v not in (None, ""))
    if isinstance(value, list):
        return ", ".join(_flat_value(v) for v in value if v not in (None, ""))
    return str(value).strip()


def _profile_facts(turn: _Turn, data: Any, depth: int = 0, path: str = "") -> list[Candidate]:
    """Every scalar field of trusted JSON as a candidate fact (DESIGN: trusted tool output).

    Fields the vocabulary knows (address, email, …) fill the same slot as the user's own
    words; every other scalar gets its key path as an open attribute (``tool:<path>``,
    see sleepmem.pipelines.types), so a trusted source that disagrees with the user on
    any field can form a conflict set. Envelope fields (ids, timestamps, trust markers)
    and anything secret are skipped.
    """
    if depth > 4:
        return []
    out: list[Candidate] = []
    if isinstance(data, list):
        for i, item in enumerate(data[:20]):
            out.extend(_profile_facts(turn, item, depth + 1, f"{path}.{i}" if path else str(i)))
        return out
    if not isinstance(data, dict):
        return out
    owner = next((str(data[k]) for k in _USER_KEYS if k in data and isinstance(data[k], str)),
                 None)
    if owner is not None and turn.event.scope.user and owner != turn.event.scope.user:
        return out  # a profile of somebody else
    source = turn.speaker.prefix.removeprefix("Tool").strip(" ()") or "a tool"
    for key, value in data.items():
        here = f"{path}.{key}" if path else str(key)
        if isinstance(value, dict) and key.lower() not in _PROFILE_KEYS:
            out.extend(_profile_facts(turn, value, depth + 1, here))
            continue
        attr = _PROFILE_KEYS.get(key.lower())
        if attr is None and key.lower() == "allergies" and isinstance(value, list):
            for item in value:
                allergen = singular(norm_value(str(item)))
                out.append(turn.candidate(
                    Slot(type="identity", attribute=f"allergy:{allergen}", value=allergen,
                         head="", importance=0.95),
                    f"The user is allergic to {item} (according to {source}).",
                ))
            continue
        if attr is None:
            if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
                out.extend(_profile_facts(turn, value, depth + 1, here))
            elif (fact := _tool_field(turn, here, key, value, source, root=not path)):
                out.append(fact)
            continue
        if value in (None, "", [], {}):
            continue
        text = _flat_value(value)
        if not text or REDACTED.search(text) or SECRET_WORDS.search(key):
            continue
        label = "shipping address" if "shipping" in key.lower() or "delivery" in key.lower() \
            else _PROFILE_LABEL.get(attr, attr)
        norm = _dialled(text) if attr == "phone" else norm_value(text)
        if attr == "residence":
            statement = f"The user lives in {text} (according to {source})."
        else:
            statement = f"The user's {label} is {text} (according to {source})."
        out.append(turn.candidate(
            Slot(type=type_of(attr), attribute=attr, value=norm, head="", importance=0.6,
                 details={"tool_key": key}),
            statement,
        ))
    return out


# Envelope fields of a tool reply: about the call, not about the user.
_ENVELOPE_KEYS = frozenset({"ok", "success", "error", "code", "id", "request_id", "ts",
                            "timestamp", "verified", "trusted", "auth", "etag", "version",
                            "took_ms", "latency_ms", "page", "next", "cursor"})


def _tool_field(turn: _Turn, path: str, key: str, value: Any, source: str, *,
                root: bool) -> Candidate | None:
    """One scalar (or list of scalars) field of trusted JSON as a ``tool:<path>`` fact."""
    low = key.lower()
    if low in _ENVELOPE_KEYS or low in _USER_KEYS or low.endswith("_id") or (
            root and low == "status") or SECRET_WORDS.search(low.replace("_", " ")):
        return None
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, int | float | str):
        text = str(value).strip()
    elif isinstance(value, list) and value and all(
            isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        text = ", ".join(str(v).strip() for v in value[:20])
    else:
        return None
    if not text or len(text) > 300 or REDACTED.search(text) or INSTRUCTION.search(text):
        return None
    label = " ".join(
        w for w in path.translate(_PATH_MARKS).split() if w and not w.isdigit()
    ).lower() or low
    # "renews on is 2026-12-01" reads badly: a label ending in a verb or preposition
    # takes a colon instead of "is".
    verb = ": " if _LABEL_NO_IS.search(label) else " is "
    return turn.candidate(
        Slot(type="fact", attribute=f"{TOOL_PREFIX}{path}", value=norm_value(text), head="",
             importance=0.5, details={"tool_key": path}),
        f"The user's {label}{verb}{text} (according to {source}).",
    )


_LABEL_NO_IS = re.compile(r"(?i)\b(?:on|at|in|by|to|for|of|from|until|is|are|has|have|was|"
                          r"ed|s)$|\w+(?:ed|s)$")


_BORING_KEYS = frozenset({"status", "ok", "success", "code", "id", "request_id", "ts",
                          "timestamp", "auth", "token", "error"})


def _json_summary(data: Any) -> str:
    leaves: list[str] = []

    def walk(node: Any, path: str, depth: int) -> None:
        if len(leaves) >= 12 or depth > 4:
            return
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(node, list):
            for v in node[:5]:
                walk(v, path, depth + 1)
        elif node not in (None, ""):
            text = str(node)
            key = path.rsplit(".", 1)[-1].lower()
            if REDACTED.search(text) or SECRET_WORDS.search(key) or INSTRUCTION.search(text):
                return
            if key in _BORING_KEYS:
                return
            leaves.append(f"{path}: {text[:200]}")

    walk(data, "", 0)
    return "; ".join(leaves)


PAIR_GAP = timedelta(hours=1)
PAIR_CONTEXT_CHARS = 300
# The meta fields by which callers who keep several conversations in one scope name the
# conversation (LangGraph's thread, a chat app's conversation or session id).
CONVERSATION_KEYS = ("conversation_id", "thread_id", "session_id", "conversation", "session")


def _contradicts(text: str, readings: dict[str, Understood]) -> bool:
    """Whether feedback says the agent erred: in so many words ("you got that wrong", 你记混
    了), or by a contrast that denies a value ("no, it's a ferry, not a train", 是二中不是一中)."""
    return bool(NEGATIVE_FEEDBACK.search(text)) or any(
        (seen := readings.get(_as_read(s))) is not None and bool(seen.reading.replaces)
        for s in split_sentences(text))


def _with_previous_turn(events: list[EventView], candidates: list[Candidate],
                        readings: dict[str, Understood] | None = None) -> None:
    """Remember a reply together with the turn it answers.

    "Five years already!" means nothing alone; it answers "How long have you been
    married?". An episode whose event follows another message of the same conversation within
    PAIR_GAP carries that turn too, in its statement and in its provenance, so both what
    it says and where it came from stay true (and a forget request that names the topic
    finds the pair).

    A turn of another conversation answers nothing here, however close in time: a new
    conversation's first message would otherwise carry the last words of the one before.
    """
    ordered = sorted(events, key=lambda e: e.at)
    previous: dict[str, tuple[str, str]] = {}
    disputed: dict[str, str] = {}
    for a, b in pairwise(ordered):
        if (a.scope == b.scope and a.kind == "message" and b.at - a.at < PAIR_GAP
                and _same_conversation(a, b)):
            who = a.meta.get("speaker") or ("Assistant" if a.role == "assistant" else "User")
            text = a.content.strip()
            if len(text) > PAIR_CONTEXT_CHARS:
                text = text[:PAIR_CONTEXT_CHARS].rsplit(" ", 1)[0] + " …"
            if text:
                previous[b.event_id] = (a.event_id, f"{who}: {text}")
            if (a.role == "assistant" and b.kind == "feedback"
                    and _contradicts(b.content, readings or {})):
                disputed[b.event_id] = a.event_id
    for cand in candidates:
        # Whatever negative feedback says (a fact, an episode), it disputes the agent's turn
        # it answers: resolving it retires that turn when it corrects a memory.
        if cand.provenance and cand.provenance[-1] in disputed:
            cand.details["disputes"] = disputed[cand.provenance[-1]]
        if cand.type != "event" or cand.forget_topic is not None or len(cand.provenance) != 1:
            continue
        if cand.details.get("chitchat") or cand.provenance[0] not in previous:
            continue
        pid, context = previous[cand.provenance[0]]
        cand.statement = f"{context}\n{cand.statement}"
        cand.provenance = [pid, cand.provenance[0]]
        # Where the reply starts: a forget request about the context alone strips the
        # context instead of deleting the reply with it.
        cand.details["context_event"] = pid
        cand.details["reply_offset"] = len(context) + 1


def _same_conversation(a: EventView, b: EventView) -> bool:
    """No conversation marker the two events both carry names two different ones."""
    return all(
        str(a.meta[k]) == str(b.meta[k])
        for k in CONVERSATION_KEYS
        if a.meta.get(k) is not None and b.meta.get(k) is not None
    )
