"""A user's answer and the turn that asked it read together: "yes, Tuesdays" means
nothing without the question before it."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

from sleepmem.pipelines.text import (
    NEGATIVE_FEEDBACK,
    split_sentences,
)
from sleepmem.pipelines.types import (
    Candidate,
    EventView,
)
from sleepmem.pipelines.write.extract.turns import Understood, as_read

PAIR_GAP = timedelta(hours=1)


PAIR_CONTEXT_CHARS = 300


# The meta fields by which callers who keep several conversations in one scope name the
# conversation (LangGraph's thread, a chat app's conversation or session id).
CONVERSATION_KEYS = ("conversation_id", "thread_id", "session_id", "conversation", "session")



def dispute(text: str, readings: dict[str, Understood]) -> str | None:
    """What feedback says the agent got wrong: the value its contrast denies ("no, it's a
    ferry, not a train": "a train"; 是二中不是一中: 一中), "" when it says so in so many
    words and names none ("you got that wrong", 你记混了), None when it disputes nothing."""
    denied = next((seen.reading.replaces for s in split_sentences(text)
                   if (seen := readings.get(as_read(s))) is not None and seen.reading.replaces),
                  "")
    return denied if denied or NEGATIVE_FEEDBACK.search(text) else None


def contradicts(text: str, readings: dict[str, Understood]) -> bool:
    """Whether feedback says the agent erred (see dispute)."""
    return dispute(text, readings) is not None



def with_previous_turn(events: list[EventView], candidates: list[Candidate],
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
                    and contradicts(b.content, readings or {})):
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
