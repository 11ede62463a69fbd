"""What no vocabulary matcher read: a lasting first-person (or named person's) statement
placed by its meaning and kept as a fact or preference with an open slot, never
an episode; others' news as their facts; history kept beside its episode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sleepmem.pipelines.language import Mood, Owner, Reading, Time, read
from sleepmem.pipelines.text import (
    ACK,
    CHANGE_EN,
    CHANGE_ZH,
    clean_end,
    first_person_zh,
    norm_value,
    sentence_case,
    split_clauses,
    strip_discourse,
    third_person_en,
    third_person_zh,
)
from sleepmem.pipelines.types import (
    MANY_VALUED_RELATIONS,
    OPEN_SLOT_PREFIX,
    Candidate,
)
from sleepmem.pipelines.vocab import (
    IMPORTANCE,
    REDACTED,
)
from sleepmem.pipelines.write.extract import turns
from sleepmem.pipelines.write.extract.pairs import contradicts
from sleepmem.pipelines.write.extract.slots import (
    Clause,
    Slot,
    type_of,
)
from sleepmem.pipelines.write.extract.statements import (
    FACT_RELATIONS,
    VOCAB_SLOT,
    OpenSlot,
    clean_statement,
    is_one_off,
    is_small_talk,
    lasting_clauses,
    lasting_first_person,
    open_slot,
    preference_cue,
)
from sleepmem.pipelines.write.extract.turns import Found, Turn, Understood, comma_parts, emphasised


def may_hold(reading: Reading, *, history: bool = False) -> bool:
    """Whether a clause can state something that lasts: its owner, mood and time allow it,
    it names a value and it is not about the talk itself. With ``history`` (a named person
    talking to others), what they did or plan to do counts too (see from_reading)."""
    if reading.owner is Owner.NOBODY or reading.mood is Mood.QUESTION or reading.about_talk or (
            reading.fragment):
        return False
    return (reading.lasting or (history and reading.time in HISTORY) or (
        reading.mood in (Mood.INSTRUCTION, Mood.WISH) and reading.time.value == "lasting")
    ) and bool(reading.value)


# A person's history: what they did ("I went to a support group yesterday") or plan ("we'll
# go camping in June"). Between people (meta.speaker) it is what a later question asks
# about, so it is kept as a fact of theirs beside the turn's episode (read_statements keeps
# the sentence there too). A user telling the assistant of a one-off event keeps it as the
# turn's episode: that user's history is the conversation itself.
HISTORY = frozenset({Time.PAST, Time.FUTURE})


# A named person's clause takes a frame only when its meaning is clearly the frame's: in
# talk between people most clauses are near some attribute by chance (measured with
# `sleepmem eval extraction` on dev8: same-thing share highest here).
PERSON_FRAME_FLOOR = 0.45



def improvised(found: list[Found]) -> bool:
    """Whether no matcher read a sentence, or each one that did named its attribute after
    the sentence's own key word ("my body is …"): then its meaning is placed too."""
    return all(f.slot.details.get("improvised") for f in found)



def framed_found(found: list[Found], seen: Understood, *, person: bool) -> None:
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
    a task for now, unless what it asks for means a preference (see from_reading)."""
    return reading.mood in (Mood.INSTRUCTION, Mood.WISH) and not reading.change and (
        reading.time.value != "habitual")



def _task_for_now(seen: Understood) -> bool:
    """A request for now whose meaning is no clear preference: "book me a flight", "I'm
    requesting the boarding pass", 我需要查一下快递 are tasks; "give me temperatures in
    Celsius" and "I need gluten-free meals" name what the person wants at all times."""
    frame = seen.frame
    return _asks_for_now(seen.reading) and (
        frame is None or frame.type != "preference" or seen.score < FOR_NOW_FLOOR)



def owned_found(found: list[Found], clauses: list[Clause], reading: Reading,
           zh: bool) -> list[Found]:
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



def not_for_the_moment(found: list[Found], reading: Reading) -> list[Found]:
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



def from_reading(turn: Turn, sentence: str, zh: bool, *, feedback: bool) -> Candidate | None:
    """A statement no matcher knew, read by its clause analysis: what the speaker states as
    lasting, or asks for from now on, is a fact or preference whose attribute its meaning
    decides (the frame _read_all found); a question, a hypothetical, a plan, a finished
    event, small talk, one-off requests and another person's news are not."""
    seen = turn.understood(sentence)
    reading, frame = seen.reading, seen.frame
    if not may_hold(reading, history=bool(turn.speaker.person)):
        return None
    # A chat word ("lol", "haha") makes no small talk of what the speaker states about
    # themself ("quit the cafe lol, im doing dog walking now"): its reading holds.
    if (is_small_talk(sentence) and reading.owner is not Owner.SPEAKER) or is_one_off(
            sentence) or ACK.match(sentence):
        return None
    if _task_for_now(seen):
        return None  # "book me a flight" is a task; "give me temperatures in Celsius" is not
    person = turn.speaker.person
    if person and not turns.NAMED_SPEAKERS_AS_FACTS:
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
        # A state said without its "I'm" ("allergic to sesame btw") takes its copula back.
        named = "the user is " if reading.head == "be_" + third.split(" ", 1)[0].lower() else (
            "the user ")
        if comma and rest and len(lead.split()) <= 2:
            third = f"{lead}, {named}{rest}"
        else:
            third = named + third[:1].lower() + third[1:]
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
    elif reading.ended and not history:
        details["ends"] = norm_value(reading.ended)  # "quit the cafe, I walk dogs now"
    disputes = feedback and contradicts(sentence, turn.readings)
    if feedback:
        details["feedback"] = "negative" if disputes else True
    # Feedback that agrees ("Biscuit is my golden retriever, thanks") changes nothing.
    change = (reading.change or disputes or bool(reading.replaces)) and not history
    return turn.candidate(
        Slot(type=kind, subject=subject, attribute=attribute, value=value, head=statement,
             importance=importance, change=change,
             negated=reading.negated and not reading.replaces, details=details),
        statement, emphasis=emphasised(sentence),
    )


# A clause joined by "and" / "而且" is a statement of its own once the join is cut.
_JOINS = ("and", "also", "plus", "as well as", "而且", "并且", "另外", "还有", "同时")



def unjoined(text: str) -> str:
    """The clause without the join that opens it ("and, " / "而且，")."""
    low = text.lower()
    for j in _JOINS:
        if low.startswith(j):
            rest = text[len(j):].lstrip()
            return (rest[1:].lstrip() if rest.startswith(("，", ",")) else rest)
    return text



def split_standalone(found: list[Found], clauses: list[Clause], zh: bool, *,
                      joined: bool = False,
                      elsewhere: Callable[[list[str], set[str]], list[bool]] | None = None,
                      ) -> list[str]:
    """Several facts in one sentence: an unmatched clause that states a lasting fact about
    the speaker on its own ("I always prefer a window seat, and I'm allergic to peanuts")
    is a sentence of its own, not a rider on the matched one (which would type it as the
    allergy is typed). Empty when every unmatched clause depends on a matched one ("I'm
    vegan, so no dairy"). With ``joined`` (nothing matched), a later clause that stands
    alone must also be joined to the sentence by a conjunction: "I relish sci-fi and I
    also appreciate gardening" is two facts, "I'm a morning person, I do my best work at
    6am" one fact and what it means, read whole. ``elsewhere`` says whether a clause with
    no first person ("Name's Tomasz, I'm a marine biologist") states a fact its meaning
    places under another attribute than the matched ones: then it is a fact of its own,
    where "I live in Leeds, the rent is cheap" keeps its second clause with the first
    (it is asked about every such clause at once). English only: a Chinese clause leaves
    its subject to the sentence (是湘潭，不是长沙)."""
    matched = {f.clause_index for f in found}
    unmatched = [i for i, c in enumerate(clauses)
                 if i not in matched and not REDACTED.search(c.raw)]
    own = {i for i in unmatched if lasting_first_person(unjoined(clauses[i].raw))}
    others = [i for i in unmatched if i not in own]
    if elsewhere is not None and found and others:
        own |= {i for i, placed in zip(others, elsewhere(
            [unjoined(clauses[i].raw) for i in others], {f.slot.attribute for f in found}),
            strict=True) if placed}
    alone = sorted(own)
    # A later clause that ends something ("…, I've given up squash") is a fact of its own
    # however it is joined: what it ended is another memory's value, not this one's. Not in
    # Chinese, whose clauses leave their subject to the sentence (这个过时了，我早就离开腾讯，
    # 现在在字节跳动: cut out, the last clause would be nobody's).
    if not alone or (joined and all(clauses[i].raw == unjoined(clauses[i].raw)
                                    for i in alone[1:]) and (zh or not any(
            r.ends for r in read([clauses[i].raw for i in alone if i > 0])))):
        return []
    joiner = "，" if zh else ", "
    rest = joiner.join(c.raw for i, c in enumerate(clauses) if i not in alone)
    return [rest, *(unjoined(clauses[i].raw) for i in alone)]



def reads_first_person(turn: Turn) -> bool:
    """Whether the fallbacks may read the turn's first person as a lasting fact: a user's
    own turn, named or not; never an assistant's, a tool's or an observation's."""
    return not turn.speaker.prefix or bool(turn.speaker.person)



def worth_keeping(turn: Turn, fallback: Candidate, sentence: str) -> bool:
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



def first_person_tail(sentence: str, zh: bool) -> str:
    """The clauses, from the first one on, that state a lasting fact about the speaker in
    a sentence that opens on something else ("The Canon went to my nephew, these days I
    own a Sony"; "这个过时了，我早就离开腾讯，现在在字节跳动"). Empty when there is none."""
    if lasting_first_person(sentence):
        return ""
    parts = split_clauses(clean_end(sentence), zh)
    if len(parts) == 1 and not zh:
        parts = [p for p in comma_parts(clean_end(sentence)) if p]
    joiner = "，" if zh else ", "
    for i in range(1, len(parts)):
        rest = joiner.join(parts[i:])
        if lasting_first_person(rest):
            return rest
    return ""



def unclassified(turn: Turn, sentence: str, zh: bool, *, feedback: bool,
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
            turns.NAMED_SPEAKERS_AS_FACTS and seen.score >= PERSON_FRAME_FLOOR)) and (
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
    elif seen.reading.ended and seen.reading.lasting:
        details["ends"] = norm_value(seen.reading.ended)
    if feedback:
        details["feedback"] = "negative" if contradicts(sentence, turn.readings) else True
    one_off = is_one_off(sentence)
    # The clause analysis reads a change in words no pattern lists ("I have decided to
    # switch to light mode"), as it does for the statements from_reading keeps; not a
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
        statement, emphasis=emphasised(sentence),
    )


# A request that does not say it lasts is a preference only when it clearly means one
# ("give me temperatures in Fahrenheit" 0.71 to the units frame; "book me a flight to Rome"
# 0.35 to the seat frame: scripts/frame_scores.py).
FOR_NOW_FLOOR = 0.5


# The lemmas a parser gives an owning clause's predicate ("I have a corgi", "I've got two").
OWNING_LEMMAS = frozenset({"have", "get", "own", "buy"})


# Low: an unclassified statement must earn its keep through mentions and hits.
UNCLASSIFIED_IMPORTANCE = 0.3
