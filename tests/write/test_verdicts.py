"""The judge model on the pairs the rule is least sure of (issue 39: "when a chat model is
configured, it judges the uncertain pairs at sleep time, in batches, with a structured
answer").

The pipeline is the real one (rules extractor, gate, resolver, USE embedder); only the chat
model is scripted, as the hosted API it stands for cannot run here. The real local model
answers in the opt-in class at the end.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from support import blas_threads

from sleepmem.core.errors import TransientError
from sleepmem.core.settings import Settings
from sleepmem.models import Memory, MemoryStatus, Scope
from sleepmem.pipelines.ports import Embedder, LLMUsage
from sleepmem.pipelines.semantic import Meaning
from sleepmem.pipelines.types import EventView
from sleepmem.pipelines.write.echo import Output
from sleepmem.pipelines.write.extract.rules import RulesExtractor
from sleepmem.pipelines.write.policy import Policy
from sleepmem.pipelines.write.resolve import Resolver
from sleepmem.pipelines.write.stages import judge
from sleepmem.pipelines.write.verdicts import Pair, Verdict, Verdicts

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
OWNER = Scope(tenant="acme", agent="bot", user="u1")
POLICY = Policy.from_settings(Settings(_env_file=None), extractor="rules")
_PAIR = re.compile(r"^Pair (\d+) \(attribute: ([^)]*)\)$", re.M)


ANSWERS = {"same": (True, True), "both": (False, True), "neither": (False, False)}


class ScriptedJudge:
    """Answers every pair as given for its attribute ("*" for any): "same", "both" (both
    hold) or "neither" (they cannot both hold); records each call."""

    model = "scripted"

    def __init__(self, by_attribute: dict[str, str], *, fail: bool = False) -> None:
        self.by_attribute = by_attribute
        self.fail = fail
        self.calls: list[str] = []

    def complete_json(self, *, system: str, user: str, schema: dict[str, Any]
                      ) -> tuple[dict[str, Any], LLMUsage]:
        self.calls.append(user)
        if self.fail:
            raise TransientError("chat model unavailable: APIConnectionError")
        answers = []
        for n, attribute in _PAIR.findall(user):
            said = self.by_attribute.get(attribute, self.by_attribute.get("*"))
            if said is not None:
                same, both = ANSWERS[said]
                answers.append({"pair": int(n), "same": same, "both_true": both})
        return {"answers": answers}, LLMUsage(1, 100, 20)


@pytest.fixture(scope="module")
def usem() -> Iterator[Embedder]:
    from sleepmem.adapters.embedders import UsemEmbedder

    yield UsemEmbedder(threads=blas_threads())


class Conversation:
    """One scope's memories over consolidation runs, each run judged like the live one."""

    def __init__(self, embedder: Embedder, chat: ScriptedJudge | None) -> None:
        self.embedder, self.chat = embedder, chat
        self.versions: dict[str, Memory] = {}
        self.reasons: list[str] = []
        self.llm_calls = 0
        self.at = T0
        self.n = 0

    def says(self, *texts: str, days_later: int = 30) -> None:
        self.at += timedelta(days=days_later)
        events = []
        for text in texts:
            self.n += 1
            events.append(EventView(
                event_id=f"e{self.n}", scope=Scope(**{**OWNER.model_dump(), "session": "s"}),
                kind="message", role="user", content=text,
                at=self.at + timedelta(minutes=self.n)))
        existing = list(self.versions.values())
        resolver = Resolver(
            scope_key=OWNER.key, existing=existing, all_versions=existing, now=self.at,
            policy=POLICY.resolve, meaning=Meaning(self.embedder),
            verdicts=Verdicts(self.chat) if self.chat is not None else None)
        judged = judge(events, extractor=RulesExtractor(self.embedder), resolver=resolver,
                       policy=POLICY, shown=Output.of_memories(existing),
                       event_sessions={e.event_id: "s" for e in events})
        self.llm_calls += judged.extraction.llm_calls
        self.versions.update(resolver.plan.changed)
        self.versions.update(resolver.plan.new)
        self.reasons += [a.reason for a in resolver.plan.audits]

    def holding(self, text: str) -> list[Memory]:
        return [m for m in self.versions.values()
                if m.status in ("active", "pending_confirmation")
                and text.lower() in m.statement.lower()]


def told(usem: Embedder, chat: ScriptedJudge | None) -> Conversation:
    """A residence said plainly, then another one said plainly a month later."""
    talk = Conversation(usem, chat)
    talk.says("I live in Porto.")
    talk.says("I live in Braga.")
    return talk


class TestWithoutAJudgeTheRuleAsks:
    def test_a_second_residence_said_plainly_is_a_conflict_set(self, usem: Embedder) -> None:
        talk = told(usem, None)
        [porto], [braga] = talk.holding("Porto"), talk.holding("Braga")
        assert porto.status == braga.status == MemoryStatus.pending_confirmation.value
        assert porto.conflict_set == braga.conflict_set is not None
        assert talk.llm_calls == 0


class TestTheJudgesVerdictDecidesTheUncertainPair:
    def test_an_update_supersedes_the_older_value_with_the_judges_reason(
        self, usem: Embedder,
    ) -> None:
        talk = told(usem, ScriptedJudge({"residence": "neither"}))
        assert talk.holding("Porto") == []
        [braga] = talk.holding("Braga")
        assert braga.status == "active" and braga.version == 2
        assert "the judge model read it as a change" in talk.reasons
        assert talk.llm_calls == 1

    def test_same_is_one_memory_mentioned_twice(self, usem: Embedder) -> None:
        talk = told(usem, ScriptedJudge({"residence": "same"}))
        [porto] = talk.holding("Porto")
        assert talk.holding("Braga") == []
        assert porto.status == "active" and porto.mention_count == 2

    def test_both_holding_keeps_both_current_with_no_conflict_set(self, usem: Embedder) -> None:
        talk = told(usem, ScriptedJudge({"residence": "both"}))
        sides = talk.holding("Porto") + talk.holding("Braga")
        assert [m.status for m in sides] == ["active", "active"]
        assert all(m.conflict_set is None for m in sides)

    def test_which_side_to_keep_follows_the_sources_not_the_model(self) -> None:
        """The model says whether both can hold; a source's later word replaces its own,
        and two sources that disagree (or one at one time) are asked about."""
        chat = ScriptedJudge({"*": "neither"})
        later = T0 + timedelta(days=9)
        own = Pair(attribute="plan", older="Is on the Basic plan.", older_at=T0,
                   older_source="user", newer="Is on the Pro plan.", newer_at=later,
                   newer_source="user")
        tool = Pair(attribute="plan", older="Is on the Basic plan.", older_at=T0,
                    older_source="user", newer="Is on the Pro plan (billing).",
                    newer_at=later, newer_source="tool")
        at_once = Pair(attribute="plan", older="Is on the Basic plan.", older_at=T0,
                       older_source="user", newer="Is on the Pro plan!", newer_at=T0,
                       newer_source="user")
        verdicts = Verdicts(chat)
        for pair in (own, tool, at_once):
            verdicts.of(pair)
        assert verdicts.ask() == 3
        assert [verdicts.of(p) for p in (own, tool, at_once)] == [
            Verdict.UPDATE, Verdict.CONTRADICTS, Verdict.CONTRADICTS]


class TestOneThingSaidTwoWays:
    """Related in meaning, yet below the rule's bar for a repeat: the judge decides."""

    SAID = ("I'm allergic to shellfish.", "My dietary restrictions include shellfish.")

    def test_the_rule_alone_keeps_two_memories(self, usem: Embedder) -> None:
        talk = Conversation(usem, None)
        for text in self.SAID:
            talk.says(text)
        assert len(talk.holding("shellfish")) == 2

    def test_the_judge_reads_them_as_one_memory_mentioned_twice(self, usem: Embedder) -> None:
        chat = ScriptedJudge({"*": "same"})
        talk = Conversation(usem, chat)
        for text in self.SAID:
            talk.says(text)
        [allergy] = talk.holding("shellfish")
        assert allergy.mention_count == 2 and len(chat.calls) == 1
        assert "the judge model read it as the same thing" in talk.reasons

    def test_unrelated_facts_far_apart_in_meaning_are_never_asked_about(
        self, usem: Embedder,
    ) -> None:
        chat = ScriptedJudge({"*": "same"})
        talk = Conversation(usem, chat)
        talk.says("I'm allergic to shellfish.")
        talk.says("I play the cello in a quartet.")
        assert chat.calls == [] and len(talk.holding("")) == 2


class TestTheJudgeIsAskedAtSleepTimeInBatches:
    def test_every_uncertain_pair_of_a_batch_goes_to_the_model_in_one_call(
        self, usem: Embedder,
    ) -> None:
        chat = ScriptedJudge({"residence": "neither", "employer": "neither"})
        talk = Conversation(usem, chat)
        talk.says("I live in Porto.", "I work at Acme.")
        assert chat.calls == []  # nothing uncertain yet: no call
        talk.says("I live in Braga.", "I work at Initech.")
        assert len(chat.calls) == 1
        assert chat.calls[0].count("\nPair ") + chat.calls[0].startswith("Pair ") == 2
        assert talk.holding("Porto") == [] and talk.holding("Acme") == []

    def test_a_pair_the_model_leaves_unanswered_keeps_the_rules_decision(
        self, usem: Embedder,
    ) -> None:
        talk = told(usem, ScriptedJudge({}))
        [porto], [braga] = talk.holding("Porto"), talk.holding("Braga")
        assert porto.conflict_set == braga.conflict_set is not None

    def test_a_model_that_fails_leaves_the_rule_to_decide_and_loses_nothing(
        self, usem: Embedder,
    ) -> None:
        chat = ScriptedJudge({"residence": "neither"}, fail=True)
        talk = told(usem, chat)
        assert len(chat.calls) == 1
        [porto], [braga] = talk.holding("Porto"), talk.holding("Braga")
        assert porto.conflict_set == braga.conflict_set is not None


class TestTheQuestionTheModelIsAsked:
    def test_names_each_pairs_attribute_times_and_sources(self) -> None:
        chat = ScriptedJudge({"seat": "neither"})
        verdicts = Verdicts(chat)
        pair = Pair(attribute="seat", older="Prefers window seats.", older_at=T0,
                    older_source="user", newer="Prefers aisle seats.",
                    newer_at=T0 + timedelta(days=9), newer_source="crm")
        assert verdicts.of(pair) is None and list(verdicts.pending.values()) == [pair]
        assert verdicts.ask() == 1
        # Another source disagreeing: asked about, whatever the model thinks of the two.
        assert verdicts.of(pair) is Verdict.CONTRADICTS and not verdicts.pending
        [question] = chat.calls
        assert "Pair 1 (attribute: seat)" in question
        assert "older (2026-03-01, said by user): Prefers window seats." in question
        assert "newer (2026-03-10, said by crm): Prefers aisle seats." in question


LOCAL_URL = os.environ.get("SLEEPMEM_TEST_LLM_URL", "http://127.0.0.1:8091/v1")
LOCAL_MODEL = os.environ.get("SLEEPMEM_TEST_LLM_MODEL", "qwen2.5-coder-1.5b-instruct")


@pytest.mark.llm
class TestTheRealLocalModel:
    def test_answers_every_pair_of_a_batch_in_one_call(self) -> None:
        """The real model's answers parse into a verdict for every pair. How often they are
        right is measured, not asserted: scripts/judge_pairs.py on the labelled pairs."""
        from sleepmem.adapters.llm import OpenAIChatModel

        chat = OpenAIChatModel(base_url=LOCAL_URL, model=LOCAL_MODEL, api_key=SecretStr(""),
                               timeout_s=240.0, max_retries=0)
        pairs = [
            Pair(attribute="residence", older="The user lives in Porto.", older_at=T0,
                 older_source="user", newer="The user's home is in Porto.",
                 newer_at=T0 + timedelta(days=30), newer_source="user"),
            Pair(attribute="seat", older="The user prefers window seats.", older_at=T0,
                 older_source="user",
                 newer="The user wants aisle seats from now on instead of window seats.",
                 newer_at=T0 + timedelta(days=30), newer_source="user"),
        ]
        verdicts = Verdicts(chat)
        for pair in pairs:
            verdicts.of(pair)
        answered = verdicts.ask()
        chat.close()
        found = [verdicts.answers.get(p.key) for p in pairs]
        print(f"\nlocal judge: {found}, {verdicts.usage.tokens} tokens")
        assert answered == len(pairs) and verdicts.usage.calls == 1
        assert verdicts.failures == 0 and all(isinstance(v, Verdict) for v in found)
