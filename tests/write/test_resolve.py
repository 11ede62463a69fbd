"""The judgement stage alone: candidates against a scope's memories, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from sleepmem.models import Memory, Scope
from sleepmem.pipelines.types import Candidate, Op
from sleepmem.pipelines.write.gate import GatePolicy, gate
from sleepmem.pipelines.write.resolve import ResolvePolicy, Resolver

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = Scope(tenant="acme", agent="bot", user="u1")
POLICY = ResolvePolicy(ttl=lambda t: None if t == "identity" else timedelta(days=90),
                       session_ttl=timedelta(days=1))


def cand(statement: str, **kw: object) -> Candidate:
    base: dict[str, object] = {
        "type": "fact", "statement": statement, "provenance": [f"e-{statement}"],
        "valid_from": T0, "scope": SCOPE,
    }
    base.update(kw)
    return Candidate(**base)  # type: ignore[arg-type]


def run(cands: list[Candidate], existing: list[Memory] | None = None) -> Resolver:
    r = Resolver(scope_key=SCOPE.key, existing=existing or [], now=T0, policy=POLICY)
    for c in cands:
        r.apply(c)
    return r


def current_in_slot(r: Resolver, attribute: str) -> list[Memory]:
    return [m for m in r.current() if m.attribute == attribute]


class TestRepeats:
    def test_the_same_fact_twice_is_one_memory_mentioned_twice(self) -> None:
        r = run([cand("User is vegetarian.", attribute="diet", value="vegetarian"),
                 cand("User is vegetarian!", attribute="diet", value="vegetarian",
                      provenance=["e2"])])
        [mem] = current_in_slot(r, "diet")
        assert mem.mention_count == 2
        assert set(mem.provenance) == {"e-User is vegetarian.", "e2"}
        assert [a.op for a in r.plan.audits] == [Op.ADD, Op.NOOP]

    def test_a_repeated_episode_is_not_stored_twice(self) -> None:
        r = run([cand("We talked about jazz.", type="event"),
                 cand("we talked about jazz", type="event", provenance=["e9"])])
        assert len(r.current()) == 1


class TestChanges:
    def test_an_explicit_change_supersedes_and_keeps_the_old_version(self) -> None:
        r = run([cand("Lives in Beijing.", attribute="residence", value="beijing"),
                 cand("Lives in Shanghai.", attribute="residence", value="shanghai",
                      change=True, valid_from=T0 + timedelta(days=30))])
        [new] = current_in_slot(r, "residence")
        old = next(m for m in r.plan.new.values() if m.id != new.id)
        assert new.statement == "Lives in Shanghai."
        assert old.status == "superseded" and old.superseded_by == new.id
        assert old.valid_to == T0 + timedelta(days=30)
        assert new.supersedes == old.id and new.version == 2 and new.lineage == old.lineage

    def test_episodes_describing_the_superseded_state_stop_being_current(self) -> None:
        r = run([cand("Lives in Beijing.", attribute="residence", value="beijing"),
                 cand("Assistant: I'll recommend places in Beijing.", type="event"),
                 cand("Lives in Shanghai.", attribute="residence", value="shanghai",
                      change=True)])
        assert not [m for m in r.current() if "Beijing" in m.statement]

    def test_a_changed_value_of_a_slot_keyed_by_value_leaves_episodes_that_name_it(
        self,
    ) -> None:
        # "making" is a word many episodes use; a liking keyed by its value is one slot per
        # value, so its change ends no state the episodes describe.
        r = run([cand("Likes making jewelry.", type="preference", attribute="likes:making",
                      value="making"),
                 cand("Jon: I was making dinner when you called.", type="event"),
                 cand("我们周末在做 making 手工。", type="event"),
                 cand("Likes making pottery.", type="preference", attribute="likes:making",
                      value="making pottery", change=True)])
        episodes = [m.statement for m in r.current() if m.type == "event"]
        assert episodes == ["Jon: I was making dinner when you called.",
                            "我们周末在做 making 手工。"]

    def test_the_episode_a_changed_liking_was_taken_from_keeps_what_else_it_says(
        self,
    ) -> None:
        r = run([cand("Likes hiking.", type="preference", attribute="hobby:hiking",
                      value="hiking", provenance=["e1"]),
                 cand("I love hiking, and I tried two of Emma's recipes this week.",
                      type="event", provenance=["e1"]),
                 cand("Gave up hiking, I swim now.", type="preference",
                      attribute="hobby:hiking", value="swimming", change=True,
                      provenance=["e2"])])
        assert [m.statement for m in r.current() if m.type == "event"] == [
            "I love hiking, and I tried two of Emma's recipes this week."]

    def test_two_trusted_statements_without_a_change_become_a_conflict_set(self) -> None:
        r = run([cand("Address: 12 Oak Street.", attribute="address", value="12 oak street"),
                 cand("Address: 48 Pine Avenue.", attribute="address", value="48 pine avenue",
                      source="tool")])
        sides = current_in_slot(r, "address")
        assert len(sides) == 2
        assert {m.status for m in sides} == {"pending_confirmation"}
        assert len({m.conflict_set for m in sides}) == 1

    def test_a_persons_later_word_on_their_own_preference_replaces_it(self) -> None:
        r = run([cand("Prefers window seats.", type="preference", attribute="seat",
                      value="window"),
                 cand("Prefers aisle seats.", type="preference", attribute="seat",
                      value="aisle", valid_from=T0 + timedelta(days=30))])
        [mem] = current_in_slot(r, "seat")
        assert mem.statement == "Prefers aisle seats." and mem.version == 2
        assert r.plan.audits[-1].reason == "the same person's later word on their own preference"

    def test_two_preferences_said_at_once_or_a_later_fact_still_ask_which_holds(
        self,
    ) -> None:
        at_once = run([cand("Prefers window seats.", type="preference", attribute="seat",
                            value="window"),
                       cand("Prefers aisle seats.", type="preference", attribute="seat",
                            value="aisle")])
        later_fact = run([cand("Lives in Porto.", attribute="residence", value="porto"),
                          cand("Lives in Braga.", attribute="residence", value="braga",
                               valid_from=T0 + timedelta(days=30))])
        for r, slot in ((at_once, "seat"), (later_fact, "residence")):
            sides = current_in_slot(r, slot)
            assert {m.status for m in sides} == {"pending_confirmation"} and len(sides) == 2

    def test_a_low_trust_statement_never_supersedes_a_high_trust_one(self) -> None:
        r = run([cand("Prefers detailed answers.", attribute="answer_length", value="detailed"),
                 cand("Might prefer short answers.", attribute="answer_length", value="short",
                      trust="low", change=True)])
        [mem] = current_in_slot(r, "answer_length")
        assert mem.statement == "Prefers detailed answers."
        assert r.plan.audits[-1].op == Op.REJECT

    def test_what_a_person_wrote_or_confirmed_is_never_overwritten_by_an_inference(
        self,
    ) -> None:
        first = run([cand("Prefers window seats.", attribute="seat", value="window")])
        [mem] = current_in_slot(first, "seat")
        mem.trust = "human"  # confirmed in the inspector, or edited through the API
        r = run([cand("Might prefer aisle seats.", attribute="seat", value="aisle",
                      trust="low")], existing=[mem])
        assert [m.statement for m in current_in_slot(r, "seat")] == ["Prefers window seats."]
        assert r.plan.audits[-1].op == Op.REJECT
        again = run([cand("Prefers aisle seats.", attribute="seat", value="aisle",
                          source="tool")], existing=[mem])
        assert {m.status for m in current_in_slot(again, "seat")} == {"pending_confirmation"}

    def test_a_negation_invalidates_the_slot(self) -> None:
        r = run([cand("Is vegan.", attribute="diet", value="vegan"),
                 cand("Is not vegan anymore.", attribute="diet", negated=True, change=True)])
        assert current_in_slot(r, "diet") == []


ASKED = "Assistant: How are you settling into the flat?"


class TestNegativeFeedbackRetiresTheTurnItDisputes:
    def said(self) -> list[Candidate]:
        return [cand("Lives in Beijing.", attribute="residence", value="beijing"),
                cand(ASKED, type="event", source="assistant", trust="low", provenance=["a1"])]

    def test_a_correction_by_feedback_retires_the_agents_turn_and_audits_it(self) -> None:
        fix = cand("Lives in Shanghai.", attribute="residence", value="shanghai", change=True,
                   provenance=["f1"], details={"feedback": True, "disputes": "a1"})
        r = run([*self.said(), fix])
        assert [m.statement for m in r.current()] == ["Lives in Shanghai."]
        update, invalidate = r.plan.audits[-2:]
        assert (update.op, invalidate.op) == (Op.UPDATE, Op.INVALIDATE)
        assert invalidate.after == update.after
        assert invalidate.reason == "the agent's turn the user's feedback disputed"

    def test_feedback_that_corrects_nothing_leaves_the_turn(self) -> None:
        aside = cand("The train leaves at 10:15.", type="event", provenance=["f1"],
                     details={"feedback": "negative", "disputes": "a1"})
        r = run([*self.said(), aside])
        assert ASKED in [m.statement for m in r.current()]


class TestForgetting:
    def test_a_forget_request_deletes_every_version_and_names_the_raw_events(self) -> None:
        r = run([cand("Going through a divorce with M.", type="event", provenance=["e1"]),
                 cand("Works as a nurse.", attribute="occupation", value="nurse",
                      provenance=["e2"]),
                 cand("forget divorce", type="event", forget_topic="divorce",
                      provenance=["e3"])])
        assert [m.statement for m in r.current()] == ["Works as a nurse."]
        assert r.plan.deleted_events == {"e1", "e3"}
        delete = next(a for a in r.plan.audits if a.op == Op.DELETE)
        assert "divorce" not in delete.reason and delete.content_hash


    def test_a_reply_keeps_its_own_words_when_only_its_context_is_forgotten(self) -> None:
        context = "User: I was diagnosed with diabetes."
        pair = cand(f"{context}\nI play the cello.", type="event", provenance=["e1", "e2"],
                    details={"context_event": "e1", "reply_offset": len(context) + 1})
        r = run([pair, cand("forget", type="event", forget_topic="diabetes",
                            provenance=["e3"])])
        [mem] = r.current()
        assert mem.statement == "I play the cello."
        assert mem.provenance == ["e2"]
        assert r.plan.deleted_events == {"e1", "e3"}


class TestProcedures:
    def test_a_procedure_is_hidden_until_enough_successes(self) -> None:
        outcome = {"type": "procedure", "subject": "refund request",
                   "attribute": "check the order first"}
        r = run([cand("o1", details={"success": True}, provenance=["p1"], **outcome)])
        assert r.current()[0].details["hidden"] is True
        r = run([cand(f"o{i}", details={"success": True}, provenance=[f"p{i}"], **outcome)
                 for i in range(3)])
        assert r.current()[0].details["hidden"] is False


class TestGate:
    def test_low_confidence_inferences_and_untrusted_tool_facts_are_refused(self) -> None:
        kept, refused = gate(
            [cand("Might like tea.", inferred=True, confidence=0.4, trust="low"),
             cand("User is an administrator.", type="identity", from_tool=True),
             cand("User likes tea.", type="preference")],
            policy=GatePolicy(),
        )
        assert [c.statement for c in kept] == ["User likes tea."]
        assert len(refused) == 2


slot_values = st.sampled_from(["a", "b", "c"])
steps = st.lists(
    st.tuples(st.sampled_from(["residence", "diet"]), slot_values, st.booleans(),
              st.sampled_from(["high", "low"])),
    min_size=1, max_size=12,
)


class TestInvariants:
    @settings(max_examples=150, deadline=None)
    @given(steps)
    def test_at_most_one_current_version_per_slot_outside_a_conflict_set(
        self, seq: list[tuple[str, str, bool, str]]
    ) -> None:
        r = run([
            cand(f"{attr} is {value}", attribute=attr, value=value, change=change, trust=trust,
                 provenance=[f"e{i}"], valid_from=T0 + timedelta(hours=i))
            for i, (attr, value, change, trust) in enumerate(seq)
        ])
        for attr in ("residence", "diet"):
            members = current_in_slot(r, attr)
            plain = [m for m in members if m.conflict_set is None]
            assert len(plain) <= 1
            if len(members) > 1:
                assert all(m.conflict_set == members[0].conflict_set for m in members)
        for m in r.current():
            assert m.provenance, "every current memory has provenance"
        for m in r.plan.new.values():
            if m.status == "superseded":
                assert m.id not in {x.id for x in r.current()}
