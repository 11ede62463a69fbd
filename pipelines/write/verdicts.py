"""The judge model's verdicts on the pairs the offline rule is least sure of.

The resolver decides most pairs by a calibrated rule. One decision it cannot make well from
attribute, value and time alone: two trusted statements of one slot that disagree with no
marker of a change. The rule makes them a conflict set, which asks the user; a reader of
both sentences can often tell that the newer one replaces the older, that the two say the
same thing, or that both hold at once.

When a chat model is configured, such pairs are asked of it at sleep time, never on the
request path: the resolver runs over the batch once and records the pairs it would have
asked about (:meth:`Verdicts.of` answers None, and the rule decides), the stage then sends
every recorded pair in a few calls with a structured answer (:meth:`Verdicts.ask`), and the
resolver runs over the batch again with the answers. A pair the model did not answer, or
any failure of the model, leaves the rule's decision: a judge can only refine it.

The model answers two yes/no questions per pair (the same thing? can both hold?); which
side to keep when both cannot hold is not its to say: a source's later word replaces its
own, two sources that disagree are asked about (DESIGN rule 2).

How good a judge a model is, is measured with ``scripts/judge_pairs.py`` on the labelled
pairs of tests/semantic_pairs.py. The local Qwen2.5-Coder-1.5B reads almost every pair as
the same thing (2026-12-06: precision 0.633, recall 1.0 on 38 + 42 pairs; the embedder's
rule has precision 0.95 or more): with a model that small, set ``SLEEPMEM_LLM_JUDGE=false``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from sleepmem.core.errors import SleepmemError
from sleepmem.core.logs import get_logger
from sleepmem.pipelines.ports import ChatModel, LLMUsage

log = get_logger("sleepmem.verdicts")

# Pairs per call: a small model keeps a short numbered list straight.
BATCH = 12


class Verdict(StrEnum):
    SAME = "same"  # both say one thing: a mention of the older
    UPDATE = "update"  # the newer replaces the older
    CONTRADICTS = "contradicts"  # both cannot hold, and nothing says which: ask
    UNRELATED = "unrelated"  # both hold at once


@dataclass(frozen=True, slots=True)
class Pair:
    """An older memory and a newer statement about one slot, as the model sees them."""

    attribute: str
    older: str
    older_at: datetime
    older_source: str
    newer: str
    newer_at: datetime
    newer_source: str

    @property
    def key(self) -> tuple[str, str, str]:
        # Texts, not memory ids: the second pass must find the first pass's answers,
        # and a memory written in the batch gets its id anew in each pass.
        return (self.attribute, self.older, self.newer)


SYSTEM = (
    "A memory service holds an older statement about a person; a newer statement is about "
    "the same thing. For every numbered pair answer two yes/no questions:\n"
    "- same: do the two statements say the same thing, in any words or language?\n"
    "- both_true: can both statements be true of the person at the same time?\n"
    "Examples:\n"
    '"drives a red Volvo" / "their car is a Volvo, a red one": same=true, both_true=true\n'
    '"works as a dentist" / "works as a pilot": same=false, both_true=false\n'
    '"has a parrot" / "has a hamster": same=false, both_true=true\n'
    '"takes the bus to work" / "cycles to work every day": same=false, both_true=false\n'
    'Reply with JSON: {"answers": [{"pair": <number>, "same": <true|false>, '
    '"both_true": <true|false>}]}.'
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answers": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "pair": {"type": "integer"},
                    "same": {"type": "boolean"},
                    "both_true": {"type": "boolean"},
                },
                "required": ["pair", "same", "both_true"],
            },
        }
    },
    "required": ["answers"],
}


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    pair: int
    same: bool
    both_true: bool

    def verdict(self, pair: Pair) -> Verdict:
        """Which one to keep is not the model's to say: a source's later word replaces
        its own earlier one, and two sources that disagree are asked about (DESIGN rule 2)."""
        if self.same:
            return Verdict.SAME
        if self.both_true:
            return Verdict.UNRELATED
        if pair.newer_source == pair.older_source and pair.newer_at > pair.older_at:
            return Verdict.UPDATE
        return Verdict.CONTRADICTS


class _Answers(BaseModel):
    model_config = ConfigDict(extra="ignore")
    answers: list[_Answer]


def render(pairs: list[Pair]) -> str:
    lines = []
    for i, p in enumerate(pairs, 1):
        lines.append(
            f"Pair {i} (attribute: {p.attribute})\n"
            f"  older ({p.older_at:%Y-%m-%d}, said by {p.older_source}): {p.older}\n"
            f"  newer ({p.newer_at:%Y-%m-%d}, said by {p.newer_source}): {p.newer}")
    return "\n".join(lines)


@dataclass(slots=True)
class Verdicts:
    """The model's answers for one batch, and the pairs still to ask."""

    chat: ChatModel
    batch: int = BATCH
    answers: dict[tuple[str, str, str], Verdict] = field(default_factory=dict)
    pending: dict[tuple[str, str, str], Pair] = field(default_factory=dict)
    usage: LLMUsage = field(default_factory=LLMUsage)
    failures: int = 0

    def of(self, pair: Pair) -> Verdict | None:
        """The model's verdict on ``pair``, or None (recorded, to be asked) for the rule."""
        found = self.answers.get(pair.key)
        if found is None:
            self.pending.setdefault(pair.key, pair)
        return found

    def ask(self) -> int:
        """Ask the model about every pending pair; returns how many it answered."""
        pairs = list(self.pending.values())
        self.pending.clear()
        answered = 0
        for start in range(0, len(pairs), self.batch):
            chunk = pairs[start:start + self.batch]
            try:
                data, usage = self.chat.complete_json(
                    system=SYSTEM, user=render(chunk), schema=SCHEMA)
                self.usage = self.usage + usage
                parsed = _Answers.model_validate(data)
            except (SleepmemError, PydanticValidationError) as exc:
                # The rule's decision stands for these pairs; the batch goes on.
                self.failures += 1
                log.warning("verdicts_failed", pairs=len(chunk), error=type(exc).__name__)
                continue
            for answer in parsed.answers:
                if 1 <= answer.pair <= len(chunk):
                    pair = chunk[answer.pair - 1]
                    self.answers[pair.key] = answer.verdict(pair)
                    answered += 1
        return answered


__all__ = ["Pair", "Verdict", "Verdicts"]
