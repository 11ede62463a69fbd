"""Turns that are kept as they were said: episodes of the user's words, the assistant's
replies, observations and outcomes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sleepmem.pipelines.text import (
    ACK,
    ASSISTANT_ACK,
    clean_end,
    first_person_en,
    first_person_zh,
    is_zh,
    norm_value,
    split_sentences,
)
from sleepmem.pipelines.types import (
    Candidate,
)
from sleepmem.pipelines.write.extract.sentences import as_event, read_statements
from sleepmem.pipelines.write.extract.slots import (
    Slot,
)
from sleepmem.pipelines.write.extract.turns import Turn


def assistant_candidates(turn: Turn, text: str) -> list[Candidate]:
    sentences = split_sentences(text)
    if all(ASSISTANT_ACK.match(clean_end(s) + ".") or ACK.match(s) for s in sentences):
        return []
    return [as_event(turn, text)]


def observation_candidates(turn: Turn, text: str) -> list[Candidate]:
    rewrite: Callable[[str], str] = first_person_zh if is_zh(text) else first_person_en
    out = read_statements(turn, text, rewrite=rewrite)
    structured = [c for c in out if c.type != "event"]
    for c in structured:
        c.inferred = True
        c.trust = "low"
        c.statement = c.statement.replace("The user", "The user (observed)", 1) if (
            c.statement.startswith("The user")) else c.statement
    # The observation itself is kept whole as an (inferred) episode.
    return [*structured, as_event(turn, text)]


_OUTCOME = re.compile(
    r"^\s*(?P<trigger>[^:：\n]{1,200}?)\s*[:：]\s*(?P<action>.+?)\s*(?:->|→|=>)\s*"
    r"(?P<result>success(?:ful)?|succeeded|ok|passed|worked|resolved|failure|failed|fail|"
    r"error|成功|失败)\s*(?P<note>.*)$",
    re.IGNORECASE | re.DOTALL,
)


_FAILED = ("failure", "failed", "fail", "error", "失败")


def outcome_candidates(turn: Turn) -> list[Candidate]:
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
        return [as_event(turn, ev.content)] if ev.content.strip() else []
    subject = norm_value(trigger)
    attribute = norm_value(action)
    details: dict[str, Any] = {"success": bool(success)}
    return [turn.candidate(
        Slot(type="procedure", attribute=attribute, value="", head="", subject=subject,
             importance=0.6, details=details),
        f"When {trigger}: {clean_end(action)}.",
    )]
