"""How a candidate and a memory read, word by word: the pure functions every decision
of the resolver shares.

The words a candidate was said in and the markers in them (a correction, a change, an
addition, negative feedback); a memory's value and whether a text mentions it; which
slots hold one value at a time; what a tool's field is named; the clause reading of one
sentence (:func:`reading`, its head and value, memoised). Nothing here looks at the
scope: that is :mod:`.pairs`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sleepmem.models import Memory, Trust
from sleepmem.pipelines.language import Reading, has_cjk, is_han, read
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.memories import norm_text
from sleepmem.pipelines.text import NEGATIVE_FEEDBACK
from sleepmem.pipelines.types import OPEN_SLOT_PREFIX, TOOL_PREFIX, Candidate, is_many_valued

# Memories that never absorb a restatement: compressed summaries and procedure statistics.
_NOT_RESTATABLE = ("summary", "procedure")

# Strong correction markers only: "now" or "these days" also open plain statements
# ("I'm now learning Spanish too"), and a correction by meaning retires a memory.
_CORRECTION = re.compile(
    r"(?i)\b(?:actually|not\b.{0,30}\bany ?more|no longer|that'?s (?:wrong|not (?:right|true))|"
    r"correction|instead|sold|switched|changed|gave up|quit|stopped|used to)\b"
    r"|其实|不对|错了|更正|纠正|不再|已经不|改成|换成|卖了|不是.{1,8}了"
)

# The markers that are verbs of change, and a negation just before one ("I won't quit",
# "we never switched", "didn't sell"): a negated change is none.
_CHANGE_VERBS = frozenset({"sold", "switched", "changed", "gave up", "quit", "stopped"})
_NEGATION_BEFORE = re.compile(
    r"(?i)\b(?:not|never|won'?t|wouldn'?t|don'?t|doesn'?t|didn'?t|can'?t|cannot|couldn'?t|"
    r"haven'?t|hasn'?t|hadn'?t|shouldn'?t|will not|do not|did not)\s+(?:\w+\s+)?$"
)

# Types a change of another slot may update (never an episode, summary or procedure).
CHANGEABLE = ("fact", "preference", "identity")

# Words that say a value joins the others rather than replacing them.
# "too" before a word is a degree ("too much space"), not an addition; "还是" is "still".
ADDITIVE = re.compile(
    r"(?i)\btoo\b(?!\s+(?!now\b|these\b|nowadays\b|lately\b|today\b)[a-z])"
    r"|\b(?:also|as well|in addition|besides)\b|也|还(?!是|没)")


def as_said(statement: str, details: dict[str, object]) -> str:
    """The words as the user said them, where the clause analysis kept them: "my loyalty
    level" meets "your loyalty program", which its third person ("the assistant's") hides."""
    said = details.get("said")
    return said if isinstance(said, str) else statement


def last_turn(statement: str) -> str:
    return statement.rsplit("\n", 1)[-1]


def own_turn(statement: str, speaker: object) -> str:
    """The last turn without its speaker's name (shared by both sides, it says nothing)."""
    return unprefixed(last_turn(statement), speaker)


def unprefixed(words: str, speaker: object) -> str:
    """``words`` without the "Name: " the speaker's turns are stored under."""
    return words.removeprefix(f"{speaker}: ") if speaker else words


def corrects(text: str) -> bool:
    """Whether ``text`` carries a correction marker that is not negated: "I won't quit"
    or "we never switched" keep what was said."""
    return any(
        not (m.group(0).lower() in _CHANGE_VERBS and _NEGATION_BEFORE.search(text[: m.start()]))
        for m in _CORRECTION.finditer(text)
    )


def disputes(cand: Candidate) -> bool:
    """Whether ``cand`` comes from feedback the extractor judged negative: an episode of
    it says so, and anything said in reply to the agent's turn names that turn."""
    return cand.details.get("feedback") == "negative" or bool(cand.details.get("disputes"))


def corrective(cand: Candidate) -> bool:
    """Whether ``cand`` corrects something said: feedback, a correction marker,
    feedback the extractor judged negative (where a contrast's denied value is what it
    corrects, see Feedback.corrected), or a contrast told in words that say someone got
    it wrong ("记错啦，是四楼不是七楼" in a plain message)."""
    last = last_turn(cand.statement)
    return bool(cand.details.get("feedback")) or disputes(cand) or corrects(last) or (
        bool(cand.details.get("replaces")) and NEGATIVE_FEEDBACK.search(last))


def tooled(attribute: str, source: str) -> bool:
    """Whether a memory or candidate is a tool's field: under its key path, or a known
    attribute a tool filled."""
    return attribute.startswith(TOOL_PREFIX) or (source == "tool" and bool(attribute))


def quotes_state(episode: Memory, old: Memory, value: str) -> bool:
    """Whether an episode is a reply that carries, as the turn it answers, the very
    statement of a superseded state ("User: I live in Berlin. / Assistant: Nice to meet
    you"): kept, it would put the old state back in front of every question about it."""
    offset = episode.details.get("reply_offset")
    context = episode.details.get("context_event")
    return isinstance(offset, int) and context in old.provenance and mentions(
        episode.statement[:offset], value)


@lru_cache(maxsize=4096)
def reading(sentence: str) -> Reading:
    """The clause reading of one sentence (its head, value, what it ranks below)."""
    [out] = read([sentence])
    return out


def said_words(cand: Candidate) -> str:
    """The words ``cand`` was said in: the sentence read ("said"), else the statement's last
    turn. Its markers ("actually", "now") are the speaker's, not the rewrite's."""
    said = cand.details.get("said")
    return said if isinstance(said, str) and said else last_turn(cand.statement)


def marks_correction(cand: Candidate) -> bool:
    return cand.change or corrects(said_words(cand))


def shifts(cand: Candidate) -> bool:
    """Whether ``cand`` says something changed (a correction, a time shift such as "these
    days" or "from now on", feedback on what was remembered) rather than adding to it."""
    last = said_words(cand)
    changed = cand.change or bool(cand.details.get("feedback")) or corrects(last)
    return changed and not ADDITIVE.search(last)


def restates_own_taste(members: list[Memory], cand: Candidate) -> bool:
    """Whether ``cand`` is its speaker's later word on a preference only they stated. A
    taste is theirs to change, and saying another value later is changing it: the two
    disagree over time, not as two sources do at one time (a user and a trusted tool,
    DESIGN rule 2's conflict set). Facts keep the conflict: a second value said without a
    change may be a mistake or a second one the slot cannot hold."""
    speaker = cand.details.get("speaker")
    return cand.type == "preference" and cand.source == "user" and all(
        m.type == "preference" and m.source == "user" and m.details.get("speaker") == speaker
        and m.valid_from < cand.valid_from and not set(m.provenance) & set(cand.provenance)
        for m in members)


def content_words(text: str) -> list[str]:
    """Words that name something: Latin words of three letters or more, CJK bigrams."""
    return [t for t in tokens(text) if len(t) >= (2 if is_han(t) else 3)]


def holds_both(mem: Memory, cand: Candidate) -> bool:
    """Whether one statement carries both slots' values ("works at Initech as a QA
    engineer" holds the employer and the occupation): then the other kind of slot is no
    reason to keep them apart, the meaning decides."""
    new, old = norm_text(cand.value), value_of(mem)
    return (len(new) >= 2 and mentions(mem.statement, new)) or (
        len(old) >= 2 and mentions(cand.statement, old))


def may_restate(m: Memory) -> bool:
    """Whether a memory is of a kind a candidate may restate (see Pairs.restatable):
    not a summary or procedure, nor an episode that is never embedded (weighs_meaning)."""
    if m.type in _NOT_RESTATABLE:
        return False
    return not (m.type == "event" and (m.source not in ("user", "system", "tool")
                                       or (m.trust == Trust.low.value and m.source != "tool")
                                       or m.details.get("chitchat")))


def slot_kind(attribute: str) -> str:
    return attribute.split(":", 1)[0]


def is_open(attribute: str) -> bool:
    """Open slots and tool key paths: named by the extractor, not by the vocabulary."""
    return attribute.startswith(("rel:", TOOL_PREFIX))


def key_words(attribute: str) -> list[str]:
    return tokens(attribute.removeprefix(TOOL_PREFIX).replace(".", " ").replace("_", " "))


def leaf_words(attribute: str) -> list[str]:
    """The words of a tool field's own name, the last segment of its key path that is not
    a list index ("tool:orders.0.status" -> ["status"])."""
    parts = [p for p in attribute.removeprefix(TOOL_PREFIX).split(".") if not p.isdigit()]
    return (parts[-1] if parts else "").replace("_", " ").split()


def named(members: list[Memory], cand: Candidate) -> list[Memory]:
    """The members a change names: by ``details['replaces']`` or by value in its words."""
    replaces = norm_text(str(cand.details.get("replaces") or ""))
    if replaces:
        return [m for m in members if value_of(m) == replaces]
    return [m for m in members if len(value_of(m)) >= 2 and mentions(cand.statement, value_of(m))]


def value_of(mem: Memory) -> str:
    return norm_text(str(mem.details.get("value") or mem.statement))


def exclusive(mem: Memory) -> bool:
    """Whether the memory's slot holds one value at a time. A key that names its value
    ("likes:tea", "hobby:hiking") is one slot per value, so never one of them."""
    if not mem.attribute:
        return False
    if mem.attribute.startswith(OPEN_SLOT_PREFIX):
        return not is_many_valued(mem.attribute, mem.details)
    return ":" not in mem.attribute


def mentions(statement: str, needle: str) -> bool:
    """Whether ``statement`` talks about ``needle`` (a normalised value or topic)."""
    if has_cjk(needle):
        return needle in norm_text(statement)
    need = _token_set(needle)
    return bool(need) and need <= _token_set(statement)


@lru_cache(maxsize=16384)
def _token_set(text: str) -> frozenset[str]:
    # Memoised: a batch asks about the same statements for every candidate.
    return frozenset(tokens(text))


def only_in_context(mem: Memory, topic: str) -> bool:
    offset = int(mem.details.get("reply_offset") or 0)
    return offset > 0 and not mentions(mem.statement[offset:], topic)
