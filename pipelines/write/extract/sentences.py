"""A message turn read sentence by sentence: each clause tried against its language's
matchers in priority order, what no matcher reads handed to the fallback, and what is left
kept as the turn's episode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from sleepmem.pipelines.language import Mood, Owner, Reading, Time
from sleepmem.pipelines.language.words import Phrases
from sleepmem.pipelines.ports import Embedder
from sleepmem.pipelines.text import (
    ACK,
    CHANGE_EN,
    CHANGE_ZH,
    CHITCHAT,
    CONNECTOR,
    FILLER_CLAUSE,
    HEDGE_EN,
    ONE_OFF_EN,
    ONE_OFF_ZH,
    clean_end,
    is_discourse,
    is_zh,
    norm_value,
    sentence_case,
    split_clauses,
    split_sentences,
    strip_discourse,
    third_person_en,
    third_person_zh,
)
from sleepmem.pipelines.types import (
    Candidate,
)
from sleepmem.pipelines.vocab import (
    IMPORTANCE,
    REDACTED,
)
from sleepmem.pipelines.write.extract.fallback import (
    first_person_tail,
    framed_found,
    from_reading,
    improvised,
    may_hold,
    not_for_the_moment,
    owned_found,
    reads_first_person,
    split_standalone,
    unclassified,
    unjoined,
    worth_keeping,
)
from sleepmem.pipelines.write.extract.forget_topic import clean_forget_topic
from sleepmem.pipelines.write.extract.frames import frames_of
from sleepmem.pipelines.write.extract.matchers import EN_TABLE, ZH_TABLE
from sleepmem.pipelines.write.extract.pairs import dispute
from sleepmem.pipelines.write.extract.slots import (
    Clause,
    Slot,
)
from sleepmem.pipelines.write.extract.statements import (
    clean_statement,
    implied_subject,
    is_one_off,
    is_small_talk,
    lasting_first_person,
    uninvert,
)
from sleepmem.pipelines.write.extract.turns import (
    Found,
    Turn,
    Understood,
    as_read,
    emphasised,
    prefixed,
)


def read_statements(turn: Turn, text: str, *, feedback: bool = False,
                rewrite: Callable[[str], str] | None = None) -> list[Candidate]:
    """Structured candidates from a first-person turn, plus one event for the rest."""
    out: list[Candidate] = []
    remainder: list[str] = []
    structured_any = False
    queue = split_sentences(text)
    while queue:
        sentence = queue.pop(0)
        zh = is_zh(sentence)
        sentence = said_as = as_read(sentence)
        found, clauses = _match_sentence(sentence, zh, rewrite)
        if not found and rewrite is None and not turn.speaker.prefix and (
                pieces := split_standalone(found, clauses, zh, joined=True)):
            queue[:0] = [p for p in pieces if p]
            continue
        if not found and rewrite is None and reads_first_person(turn) and (
                not REDACTED.search(sentence)) and (tail := first_person_tail(sentence, zh)) and (
                worth_keeping(turn, unsure := unclassified(turn, sentence, zh, feedback=feedback,
                                                    slot_from=tail), sentence)):
            # One memory for the sentence, its slot read from the clause that states it.
            out.extend(_each_value(turn, unsure, sentence, zh))
            structured_any = True
            if turn.speaker.person:
                remainder.append(sentence)  # between people the episode keeps it too
            continue
        if found and rewrite is None and not turn.speaker.prefix and (
                pieces := split_standalone(found, clauses, zh,
                                           elsewhere=None if zh else partial(
                                               _placed_elsewhere, turn))):
            queue[:0] = pieces
            continue
        if not found and rewrite is None and (plain := uninvert(sentence)) is not None:
            found, clauses = _match_sentence(plain, zh, None)
            sentence = plain if found else sentence
        if not found and rewrite is None and reads_first_person(turn) and (
                (said := implied_subject(sentence)) != sentence):
            found, clauses = _match_sentence(said, zh, None)
            # Chinese with its 我 put back counts only where a matcher reads it: the fail-safe
            # below would take any subject-less clause for a lasting fact.
            sentence = said if found or not zh else sentence
        if not found and rewrite is None and reads_first_person(turn) and (
            not REDACTED.search(sentence) and lasting_first_person(sentence)
        ) and worth_keeping(turn, unsure := unclassified(turn, sentence, zh, feedback=feedback),
                    sentence):
            # Fail safe: what no matcher knows but the user states about themself is kept
            # at its type's default lifetime, with low importance, not as an episode.
            out.extend(_each_value(turn, unsure, sentence, zh))
            structured_any = True
            if turn.speaker.person:
                remainder.append(sentence)  # between people the episode keeps it too
            continue
        if found and rewrite is None and reads_first_person(turn):
            found = owned_found(found, clauses, turn.reading(sentence), zh)
            found = not_for_the_moment(found, turn.reading(sentence))
            # Its meaning is the sentence's as said: a reordered one ("coffee is my go-to
            # choice" -> "my go-to choice is coffee") was placed under its own words.
            framed_found(found, turn.understood(said_as), person=bool(turn.speaker.person))
            contrasted(found, turn.reading(sentence))
        if not found and rewrite is None and reads_first_person(turn) and (
                not REDACTED.search(sentence)) and (
                read_as := from_reading(turn, sentence, zh, feedback=feedback)) is not None:
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
        emphasis = emphasised(sentence)
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
        event = as_event(turn, rest if structured_any else text, feedback=feedback)
        if (is_one_off(rest) or _asks_for_the_moment(turn, remainder)) and not (
                event.details.get("chitchat")):
            # A one-off request stays in its session, short-lived, whatever it asks for.
            event.one_off = True
            event.scope = turn.event.scope
        out.append(event)
    return out


def _each_value(turn: Turn, cand: Candidate, sentence: str, zh: bool) -> list[Candidate]:
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


def contrasted(found: list[Found], reading: Reading) -> None:
    """A sentence a matcher read as one fact that also says what it is not ("我是安检员，
    不是行李员", "it's Porto now, not Lisbon"): the value it denies is what it replaces,
    as the clause analysis's own candidates carry it (fallback.from_reading)."""
    denied = norm_value(reading.replaces)
    if len(found) == 1 and denied and denied != norm_value(found[0].slot.value):
        found[0].slot.details.setdefault("replaces", denied)


def _of_the_user(sentence: str, zh: bool) -> str:
    """A first-person sentence as a memory states it: in the third person, tidied."""
    body = clean_end(strip_discourse(clean_statement(sentence.strip(), zh)))
    third = third_person_zh(body) if zh else third_person_en(body)
    return sentence_case(clean_statement(third, zh), zh)


def _asks_for_the_moment(turn: Turn, sentences: list[str]) -> bool:
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


def _placed_elsewhere(turn: Turn, clauses: list[str], slots: set[str]) -> list[bool]:
    """Whether each clause states, as a whole clause of the speaker's or of no one's, what
    its meaning places under an attribute other than ``slots``."""
    return [seen.frame is not None and seen.frame.slot not in slots and not (
        seen.reading.fragment) and seen.reading.owner in (Owner.SPEAKER, Owner.IMPLICIT)
        and seen.reading.holds for seen in turn.understood_all(clauses)]


def placed(readings: list[Reading], embedder: Embedder | None,
            told: set[str]) -> dict[str, Understood]:
    """Each reading with the frame its meaning is nearest, for those that could hold a
    fact, in one embedder call (``told``: sentences whose history counts)."""
    # Only what no matcher reads needs its meaning placed: the embedder is the cost here.
    holding = [r for r in readings if may_hold(r, history=r.text in told)
               and improvised(_match_sentence(r.text, is_zh(r.text), None)[0])]
    # Judged on the clause that holds, not the whole sentence: what else the sentence says
    # ("…, the lease started Monday") only blurs its meaning.
    framed = dict(zip([r.text for r in holding],
                      frames_of(embedder, [r.clause or r.text for r in holding]),
                      strict=True)) if embedder is not None and holding else {}
    return {r.text: Understood(r, *framed.get(r.text, (None, 0.0))) for r in readings}


def _match_sentence(
    sentence: str, zh: bool, rewrite: Callable[[str], str] | None
) -> tuple[list[Found], list[Clause]]:
    clauses: list[Clause] = []
    found: list[Found] = []
    matched: list[int] = []
    table = ZH_TABLE if zh else EN_TABLE
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
            if zh:
                slots = _topic_said_before(slots, clauses[i - 1] if i else None)
            if slots:
                found.extend(Found(s, i) for s in slots)
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


def _topic_said_before(slots: list[Slot], before: Clause | None) -> list[Slot]:
    """Chinese says a forget request's topic first and asks after it ("备孕看医生的那些事，
    麻烦全删了"): a request whose own words leave no topic of two characters takes the
    clause before it as its topic; with none there, it is no request."""
    for slot in slots:
        if slot.forget_topic is not None and len(slot.forget_topic) < 2 and before is not None:
            slot.forget_topic = clean_forget_topic(before.raw) or slot.forget_topic
            slot.head = f"{before.raw}，{slot.head}"
    return [s for s in slots if s.forget_topic != ""]


def _compose(slot: Slot, f: Found, clauses: list[Clause], zh: bool) -> str:
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
        head = unjoined(head) or head  # "而且用户对花生过敏" -> "用户对花生过敏"
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


def as_event(turn: Turn, text: str, *, feedback: bool = False,
           importance: float | None = None) -> Candidate:
    text = text.strip()
    # Feedback that says the agent erred is a correction however it is said: a chat word
    # ("it's Pappas, not Petrakis lol") makes no small talk of it.
    denied = dispute(text, turn.readings) if feedback else None
    negative = denied is not None
    chit = not negative and ((bool(CHITCHAT.search(text)) and len(text) < 160 and not (
        _OWN_WORDS.search(text))) or (bool(CHITCHAT.search(text)) and len(text) < 60))
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
    emphasis = emphasised(text) and not chit
    if emphasis:
        imp = min(1.0, imp + 0.15)
    if feedback:
        details["feedback"] = "negative" if negative else True
        # What the feedback denies names the memory it corrects ("finance, not accounting").
        if denied:
            details["replaces"] = norm_value(denied)
    return turn.candidate("event", prefixed(turn.speaker.prefix, text),
                          importance=round(imp, 3), emphasis=emphasis, details=details)
