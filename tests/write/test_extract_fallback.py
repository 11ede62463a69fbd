"""Fail safe, not fail cheap: what no matcher recognises is still judged by what it is.

Small talk is positively recognised; a first-person lasting statement nobody wrote a rule
for is kept as a low-importance fact or preference with an open slot, findable for its
type's whole default lifetime; one-off requests stay in their session in any phrasing;
statements start clean; a sentence that carried a secret derives nothing.
"""

from __future__ import annotations

import string
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import blas_threads

from sleepmem.core.settings import Settings
from sleepmem.evals.scenarios import StoryFormatError, run_story
from sleepmem.models.scope import Scope
from sleepmem.pipelines.ports import Embedder
from sleepmem.pipelines.types import Candidate, EventView
from sleepmem.pipelines.write.extract.fallback import UNCLASSIFIED_IMPORTANCE
from sleepmem.pipelines.write.extract.rules import RulesExtractor

SCOPE = Scope(tenant="acme", agent="assistant", user="u42", session="s1")
AT = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)

# Verbs no vocabulary matcher handles, and made-up objects no rule can know.
VERBS = ("I'm learning to play the", "I collect old", "I volunteer at the", "I restore vintage",
         "I knit", "I brew my own", "I'm training for the", "I keep", "I grow")
ZH_VERBS = ("我最近在学", "我平时练", "我养了", "我一直在收集")
WORD = st.text(alphabet=string.ascii_lowercase, min_size=5, max_size=9)


def extract(content: str, **kw: Any) -> list[Candidate]:
    event = EventView(event_id="ev1", scope=SCOPE, kind=kw.get("kind", "message"),
                      role=kw.get("role", "user"), content=content, at=AT,
                      meta=kw.get("meta", {}))
    return RulesExtractor().extract([event]).candidates


class TestUnrecognisedStatements:
    @settings(max_examples=40, deadline=None)
    @given(verb=st.sampled_from(VERBS), obj=WORD)
    def test_an_unrecognised_first_person_statement_is_a_lasting_low_importance_memory(
        self, verb: str, obj: str
    ) -> None:
        (c,) = extract(f"{verb} {obj}s.")
        assert c.type in ("fact", "preference")
        assert c.importance == UNCLASSIFIED_IMPORTANCE
        assert c.statement.startswith("The user")
        assert c.attribute.startswith("rel:") and obj in c.value
        assert c.details["open_slot"]["relation"] == c.attribute.removeprefix("rel:")

    @settings(max_examples=15, deadline=None)
    @given(verb=st.sampled_from(ZH_VERBS),
           obj=st.sampled_from(("日语", "书法", "古琴", "邮票", "一只猫")))
    def test_the_same_holds_in_chinese(self, verb: str, obj: str) -> None:
        (c,) = extract(f"{verb}{obj}。")
        assert c.type in ("fact", "preference") and c.statement.startswith("用户")
        assert obj in c.statement

    def test_two_wordings_of_one_relation_meet_in_one_open_slot(self) -> None:
        (a,) = extract("I drive a Honda Civic to work every day.")
        (b,) = extract("I sold my Civic, I drive a Model 3 now.")
        (z,) = extract("我把高尔夫卖了，现在开特斯拉。")
        assert a.attribute == b.attribute == z.attribute == "rel:drives"
        assert (a.value, b.value, z.value) == ("honda civic to work", "model 3", "特斯拉")
        assert b.change and z.change and not a.change
        assert a.details["open_slot"]["multi"] is False

    def test_a_preference_is_typed_preference_never_identity(self) -> None:
        for text in ("I always prefer window seats.", "Oh and also, I prefer window seats.",
                     "I'd rather have aisle seats from now on."):
            (c,) = extract(text)
            assert c.type == "preference", text

    @pytest.mark.parametrize("text", [
        "I'm going to Paris next week.", "I am happy with the answer.", "I like that idea.",
        "I think it will rain.", "I lived in Paris when I was a student.",
        "We should meet on Thursday.", "I need you to book a table.",
    ])
    def test_plans_moods_reactions_requests_and_past_states_stay_episodes(self, text: str) -> None:
        assert [c.type for c in extract(text)] == ["event"]


class TestSmallTalkIsRecognised:
    @pytest.mark.parametrize("text", ["Hello!", "Lovely sunny weather today, isn't it?",
                                      "谢谢你，辛苦了！", "Good morning!", "哈哈"])
    def test_greetings_thanks_and_weather_are_chitchat(self, text: str) -> None:
        cands = extract(text)
        assert all(c.type == "event" and c.details.get("chitchat") for c in cands), cands


    @pytest.mark.parametrize("text", ["haha i collect vinyl records these days",
                                      "lol i teach swimming to kids on weekends now"])
    def test_a_chat_word_makes_no_small_talk_of_what_the_speaker_states(self, text: str) -> None:
        kinds = [c.type for c in extract(text)]
        assert kinds and "event" not in kinds, kinds

    def test_an_end_said_before_what_holds_now_retires_the_ended_value(self) -> None:
        (c,) = extract("quit the choir, im learning the drums now")
        assert c.type in ("fact", "preference") and c.details.get("ends") == "choir", c


class TestOneOffRequests:
    @pytest.mark.parametrize("text", [
        "Just this once, book me an aisle seat.",
        "For today only, keep the answers under three sentences.",
        "Skip the summary at the end, only this time.",
        "Answer in French just for now.",
        "这次用英文回复我吧。",
        "今天先用表格给我列出来吧。",
        "这一次简短回答就行。",
    ])
    def test_a_one_off_request_stays_in_its_session(self, text: str) -> None:
        cands = extract(text)
        assert cands and all(c.one_off and c.scope.session == "s1" for c in cands), cands


class TestCleanStatements:
    @pytest.mark.parametrize(("text", "start"), [
        ("Hello, my name is Carla.", "The user's name is Carla"),
        ("And I'm allergic to shellfish.", "The user is allergic"),
        ("So yeah, I'm a vegetarian now.", "The user is a vegetarian"),
        ("嗯，我叫小王。", "用户"),
        ("对了，我最近在学日语。", "用户最近在学日语"),
    ])
    def test_greetings_and_connectives_never_lead_a_statement(self, text: str, start: str) -> None:
        structured = [c for c in extract(text) if c.type != "event"]
        assert structured and structured[0].statement.startswith(start), structured

    def test_a_sentence_that_carried_a_secret_invents_no_fact(self) -> None:
        cands = extract("Here's the AWS key for the deploy bot: [REDACTED:aws_key], keep it handy.")
        assert not [c for c in cands if c.type != "event"]
        kept = extract("My OpenAI key is [REDACTED:api_key], I use OpenAI for my side project.")
        assert [c.value for c in kept if c.type != "event"] == ["openai"]


class TestForgetRequestsInOtherWords:
    @pytest.mark.parametrize(("text", "topic"), [
        ("Don't keep any record of my knee surgery, please.", "knee surgery"),
        ("Erase the stuff about my debt from your memory.", "debt"),
        ("把我看心理医生的事从记忆里删掉吧。", "看心理医生"),
        ("前男友的事情你全部忘掉吧。", "前男友"),
        ("请不要再记住我的病史了。", "病史"),
    ])
    def test_the_topic_is_what_remains_without_the_request_words(
        self, text: str, topic: str
    ) -> None:
        assert [c.forget_topic for c in extract(text)] == [topic]

    @pytest.mark.parametrize(("text", "topic"), [
        ("备孕看医生的那些事，麻烦全删了，不想留任何记录。", "备孕看医生"),
        ("离职仲裁那件事，都忘掉吧。", "离职仲裁"),
    ])
    def test_a_chinese_topic_said_before_the_request_is_its_topic(
        self, text: str, topic: str
    ) -> None:
        # "麻烦全删了" names no topic of its own: Chinese says it first.
        assert [c.forget_topic for c in extract(text) if c.forget_topic] == [topic]

    @pytest.mark.parametrize("text", ["Forget it.", "I forget things easily.", "我忘了带钥匙。"])
    def test_other_uses_of_forget_are_not_requests(self, text: str) -> None:
        assert all(c.forget_topic is None for c in extract(text))


# -- end to end: findable for the type's default lifetime ---------------------------------------


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    from sleepmem.adapters.embedders import UsemEmbedder

    return UsemEmbedder(threads=blas_threads())


def _story(path: Path, content: str, days: int, word: str) -> None:
    at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    path.write_text(
        'name = "unrecognised-lasts"\nabout = "generated"\n'
        'scope = { tenant = "p", user = "u", agent = "a" }\n'
        f'[[step]]\nemit = {{ at = "{at}", session = "s1", role = "user", '
        f'content = "{content}" }}\n'
        "[[step]]\nconsolidate = true\n"
        f'[[step]]\ncheck = {{ active = "{word}", not_type = "event", '
        f'expires_after = "{days - 1}d" }}\n'
        f'[[step]]\nadvance = "{days - 1}d"\n[[step]]\nsweep = true\n'
        f'[[step]]\ncheck = {{ search = "{word}", top = ["{word}"] }}\n',
        encoding="utf-8",
    )


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verb=st.sampled_from(VERBS), obj=WORD)
def test_an_unrecognised_statement_is_findable_for_its_types_default_lifetime(
    verb: str, obj: str, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ttl = Settings(_env_file=None).ttl("fact")
    assert ttl is not None and Settings(_env_file=None).ttl("preference") == ttl
    path = tmp_path_factory.mktemp("story") / "story.toml"
    _story(path, f"{verb} {obj}s.", ttl // timedelta(days=1), obj)
    result = run_story(path, embedder=embedder)
    assert result.error is None, result.error
    assert result.passed, [c.detail for c in result.checks if not c.passed]


def test_the_runner_refuses_unknown_keys_naming_file_and_step(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text('name = "x"\n[[step]]\ncheck = { active = "a", mentoins = 2 }\n',
                    encoding="utf-8")
    with pytest.raises(StoryFormatError, match=r"typo\.toml step 1.*mentoins"):
        run_story(path)


class TestGateOnSecrets:
    def test_a_structured_statement_that_still_shows_a_redaction_is_refused(self) -> None:
        from sleepmem.pipelines.write.gate import GatePolicy, gate

        base = dict(provenance=["e1"], valid_from=AT, scope=SCOPE.owner)
        leaked = Candidate(type="fact", statement="Tech stack — backend: AWS [REDACTED:aws_key].",
                           attribute="backend", value="aws", **base)  # type: ignore[arg-type]
        episode = Candidate(type="event", statement="Here is the key [REDACTED:aws_key].",
                            **base)  # type: ignore[arg-type]
        kept, rejected = gate([leaked, episode], policy=GatePolicy())
        assert kept == [episode]
        assert [r.reason for r in rejected] == [
            "structured statement derived from a secret-bearing sentence"]


class TestTypeByMeaning:
    def test_a_statement_without_a_grammatical_cue_takes_its_nearest_prototypes_type(
        self, embedder: Embedder
    ) -> None:
        calls: list[int] = []

        class Counting:
            name, dim = embedder.name, embedder.dim

            def embed(self, texts: Any, *, kind: Any = "document") -> Any:
                calls.append(len(texts))
                return embedder.embed(texts, kind=kind)

        counting = Counting()
        events = [EventView(event_id=f"e{i}", scope=SCOPE, kind="message", role="user",
                            content=text, at=AT, meta={})
                  for i, text in enumerate(["I'm a morning person.", "I'm an early riser.",
                                            "I drive a Honda Civic."])]
        first = RulesExtractor(embedder=counting).extract(events).candidates  # type: ignore[arg-type]
        after_first = len(calls)
        again = RulesExtractor(embedder=counting).extract(events[:1]).candidates  # type: ignore[arg-type]
        # By meaning: the nearest type prototype, or the nearest attribute's (a frame).
        by_meaning = [c for c in first if c.details.get("type_by") in ("meaning", "frame")]
        assert len(by_meaning) == 3 and all(c.type in ("fact", "preference") for c in by_meaning)
        # The verb alone would make the Civic a fact; its meaning also says which attribute
        # it fills, so a later car supersedes it.
        [civic] = [c for c in first if "Civic" in c.statement]
        assert (civic.type, civic.attribute, civic.details["type_by"]) == (
            "fact", "vehicle", "frame")
        assert again[0].type == first[0].type
        # Prototypes (of attributes, of types) once per embedder; then each extraction is
        # one batch of what no matcher read (its attribute) and one of what is left (type).
        # (One batch when the sentence's frame already gave its type.)
        assert calls[0] > 2 and calls[after_first:] in ([1], [1, 1])


class TestANameSaidInOtherWords:
    """"My name is" is one way to say it: the name frame's meaning reads the others, and
    the value is the name the parser found, not the clause's whole object."""

    @pytest.mark.parametrize("said, name", [
        ("I call myself Priya.", "priya"),
        ("Everyone calls me Teodor.", "teodor"),
    ])
    def test_is_the_speakers_name_identity(self, embedder: Embedder, said: str,
                                           name: str) -> None:
        event = EventView(event_id="e1", scope=SCOPE, kind="message", role="user",
                          content=said, at=AT, meta={})
        [c] = RulesExtractor(embedder=embedder).extract([event]).candidates
        assert (c.type, c.attribute, c.value) == ("identity", "name", name)
        assert c.statement.startswith(("The user", "Everyone"))


class TestAClauseWithAFactOfItsOwn:
    """In a sentence a matcher read, a clause no matcher knew that states a fact under
    another attribute, first person or not, is a memory of its own; one about the same
    thing stays with the matched clause."""

    @staticmethod
    def said(embedder: Embedder, content: str) -> list[Candidate]:
        event = EventView(event_id="e1", scope=SCOPE, kind="message", role="user",
                          content=content, at=AT, meta={})
        return RulesExtractor(embedder=embedder).extract([event]).candidates

    def test_is_split_from_the_matched_one(self, embedder: Embedder) -> None:
        cands = self.said(embedder, "Name's Ignacy, I'm a tram driver.")
        assert {(c.attribute, c.value) for c in cands} == {
            ("name", "ignacy"), ("occupation", "tram driver")}

    def test_about_the_same_thing_stays_with_it(self, embedder: Embedder) -> None:
        [c] = self.said(embedder, "I live in Leeds, the rent is cheap.")
        assert c.attribute == "residence" and "rent" in c.statement


class TestAStandingRequest:
    def test_a_way_to_reply_each_time_is_a_lasting_preference_with_its_value(
            self, embedder: Embedder) -> None:
        event = EventView(event_id="e1", scope=SCOPE, kind="message", role="user",
                          content="When you write release notes, keep it under a page.",
                          at=AT, meta={})
        [c] = RulesExtractor(embedder=embedder).extract([event]).candidates
        assert (c.type, c.value, c.one_off) == ("preference", "page", False)


class TestATaskForNow:
    """A need or request for something done now, with no word that it lasts, is the
    turn's episode, however it is put; a taste said beside it still lasts."""

    @pytest.mark.parametrize("said", [
        "I'm requesting the invoice for last month's stay.",
        "我需要查一下订单 A7731 的物流。",
        "我需要找一家附近的药店。",
    ])
    def test_is_an_episode_not_a_lasting_memory(self, embedder: Embedder, said: str) -> None:
        event = EventView(event_id="e1", scope=SCOPE, kind="message", role="user",
                          content=said, at=AT, meta={})
        cands = RulesExtractor(embedder=embedder).extract([event]).candidates
        assert [c.type for c in cands] == ["event"], cands

    def test_a_stated_taste_is_no_task(self, embedder: Embedder) -> None:
        event = EventView(event_id="e1", scope=SCOPE, kind="message", role="user",
                          content="I prefer plain answers, no headings.", at=AT, meta={})
        [c] = RulesExtractor(embedder=embedder).extract([event]).candidates
        assert c.type == "preference"


class TestSeveralValuesInOneSentence:
    """Values joined by "and" in a statement no matcher reads are one memory each, in the
    same attribute, when the attribute holds many; a request for one thing is for now."""

    @pytest.mark.parametrize("said, values", [
        ("I speak Welsh and Basque.", ["welsh", "basque"]),
        ("Origami and chess are both favourite hobbies of mine.", ["origami", "chess"]),
    ])
    def test_are_one_memory_per_value(self, embedder: Embedder, said: str,
                                      values: list[str]) -> None:
        event = EventView(event_id="e1", scope=SCOPE, kind="message", role="user",
                          content=said, at=AT, meta={})
        cands = RulesExtractor(embedder=embedder).extract([event]).candidates
        assert [c.value for c in cands] == values, cands
        assert len({c.attribute for c in cands}) == 1
        assert all(v in c.statement.lower() and len(c.statement) < len(said) + 12
                   for v, c in zip(values, cands, strict=True))

    def test_a_request_for_one_thing_stays_in_its_session(self, embedder: Embedder) -> None:
        event = EventView(event_id="e1", scope=SCOPE, kind="message", role="user",
                          content="Reserve me a table by the window, thanks.", at=AT, meta={})
        cands = RulesExtractor(embedder=embedder).extract([event]).candidates
        assert all(c.scope.session == "s1" and (c.one_off or c.type == "event")
                   for c in cands), cands


@pytest.mark.parametrize("said", ["My preferred airline is KLM.",
                                  "My preferred seating is the front row."])
def test_a_key_that_names_a_liking_makes_a_preference(said: str) -> None:
    [c] = extract(said)
    assert c.type == "preference", c


@pytest.mark.parametrize("said", ["My parcels go to the office at 4 Canal Street these days.",
                                  "收货地址我改成人民路12号了。"])
def test_where_parcels_go_is_the_address_frame_in_either_language(
        embedder: Embedder, said: str) -> None:
    event = EventView(event_id="e1", scope=SCOPE, kind="message", role="user",
                      content=said, at=AT, meta={})
    cands = RulesExtractor(embedder=embedder).extract([event]).candidates
    assert [c.attribute for c in cands] == ["address"], cands


@pytest.mark.parametrize("said", [
    "I've decided to switch to the light theme because of the glare.",
    "I have decided to switch over to oat milk since it sits better.",
])
def test_a_change_the_clause_analysis_reads_marks_the_fallback_as_a_change(said: str) -> None:
    """No pattern lists "decided to switch": the reader's change word does, so the
    memory it leaves can update what it is about (resolve.feedback.corrected)."""
    cands = [c for c in extract(said) if c.type != "event"]
    assert cands and all(c.change for c in cands), cands


def _two_turns(path: Path, first: str, second: str, check: str) -> Path:
    """A story of two turns forty days apart, each consolidated, then one check."""
    path.write_text(
        'name = "two-turns"\nabout = "generated"\n'
        'scope = { tenant = "p", user = "u", agent = "a" }\n'
        f'[[step]]\nemit = {{ at = "2026-03-01T09:00:00Z", session = "s1", role = "user", '
        f'content = "{first}" }}\n[[step]]\nconsolidate = true\n'
        f'[[step]]\nemit = {{ at = "2026-04-10T09:00:00Z", session = "s2", role = "user", '
        f'content = "{second}" }}\n[[step]]\nconsolidate = true\n'
        f"[[step]]\ncheck = {check}\n",
        encoding="utf-8",
    )
    return path


class TestTastesThatTurn:
    """What a person gives up, or comes to like over what they ranked above it, no longer
    holds, in whatever slot each statement was read into; a liking of another value is
    its own statement, never a mention of the first."""

    @pytest.mark.parametrize(("first", "second", "check"), [
        ("For long drives I prefer audiobooks over podcasts.",
         "Podcasts are what I put on in the car.",
         '{ search = "What does the user listen to while driving?", types = ["preference"], '
         'top1 = "Podcasts", absent = ["audiobooks over podcasts"] }'),
        ("I love playing squash with my colleagues.",
         "I'm really into bouldering these days, I've given up squash.",
         '{ search = "What sport does the user play?", top = ["bouldering"], '
         'absent = ["playing squash"] }'),
        ("I prefer green tea over black tea in the afternoon.",
         "I prefer black tea in the afternoons.",
         '{ active = "black tea in the afternoons", count = 1, mentions = 1 }'),
    ], ids=["reversed", "given-up", "another-value"])
    def test_the_later_word_holds(self, embedder: Embedder, tmp_path: Path, first: str,
                                  second: str, check: str) -> None:
        result = run_story(_two_turns(tmp_path / "s.toml", first, second, check),
                           embedder=embedder)
        assert result.error is None, result.error
        assert result.passed, [c.detail for c in result.checks if not c.passed]
