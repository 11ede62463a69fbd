"""A memory's own sentences, each indexed beside the whole statement: which sentences a
memory contributes, in English and Chinese, and which memories contribute none."""

from __future__ import annotations

from typing import Any

from sleepmem.models import Memory
from sleepmem.pipelines.write.index import MAX_SENTENCES, own_sentences


def memory(statement: str, *, source: str = "user", **details: Any) -> Memory:
    return Memory(statement=statement, source=source, details=details, tenant="t",
                  scope_key="t", type="event")


class TestWhichSentencesAMemoryContributes:
    def test_each_sentence_of_a_several_sentence_turn(self) -> None:
        got = own_sentences(memory(
            "I'm looking for new bike routes around the city. I just completed the Spring "
            "Sprint Triathlon today! Do you know any trails?"))
        assert got == ["I'm looking for new bike routes around the city.",
                       "I just completed the Spring Sprint Triathlon today!"]

    def test_chinese_sentences_split_at_their_own_full_stops(self) -> None:
        got = own_sentences(memory("我上周去了成都出差。那里的火锅非常好吃！下个月还想再去一次。"))
        assert got == ["我上周去了成都出差。", "那里的火锅非常好吃！", "下个月还想再去一次。"]

    def test_an_abbreviation_does_not_end_a_sentence(self) -> None:
        got = own_sentences(memory("I saw Dr. Smith at the clinic today. He said my knee "
                                   "is fine."))
        assert got == ["I saw Dr. Smith at the clinic today.", "He said my knee is fine."]

    def test_a_named_speaker_is_left_to_the_statement_vector(self) -> None:
        got = own_sentences(memory(
            "Melanie: I took my family camping in the mountains. The kids loved the lake."))
        assert got == ["I took my family camping in the mountains.", "The kids loved the lake."]

    def test_a_chinese_speaker_is_left_out_too(self) -> None:
        got = own_sentences(memory("小美：我们上周去湖边露营了。孩子们特别喜欢大自然。"))
        assert got == ["我们上周去湖边露营了。", "孩子们特别喜欢大自然。"]

    def test_a_question_that_speaks_of_its_speaker_tells_about_them(self) -> None:
        got = own_sentences(memory(
            "I just got a smoker for the patio. Can I smoke a brisket in my new smoker?"))
        assert got == ["I just got a smoker for the patio.",
                       "Can I smoke a brisket in my new smoker?"]

    def test_a_chinese_question_about_the_speaker_stays_and_one_to_the_other_goes(
        self,
    ) -> None:
        got = own_sentences(memory("我上周搬到了杭州。我应该先办居住证吗？你去过西湖吗？"))
        assert got == ["我上周搬到了杭州。", "我应该先办居住证吗？"]

    def test_the_earlier_turn_a_reply_carries_is_not_its_own(self) -> None:
        context = "Assistant: Would you like some ideas for the weekend?\n"
        got = own_sentences(memory(
            context + "User: We adopted a second puppy. Her name is Pixie.",
            reply_offset=len(context)))
        assert got == ["We adopted a second puppy.", "Her name is Pixie."]

    def test_the_generic_subject_is_left_out_as_in_the_statement_vector(self) -> None:
        got = own_sentences(memory("The user moved to Berlin in May. The user's sister "
                                   "lives in Hamburg."))
        assert got == ["moved to Berlin in May.", "sister lives in Hamburg."]

    def test_a_long_turn_contributes_its_first_sentences_only(self) -> None:
        text = " ".join(f"Sentence number {i} says something." for i in range(20))
        got = own_sentences(memory(text))
        assert len(got) == MAX_SENTENCES
        assert got[0] == "Sentence number 0 says something."


class TestMemoriesThatContributeNone:
    def test_a_single_sentence_is_already_the_whole_statement(self) -> None:
        assert own_sentences(memory("I moved to Berlin last spring.")) == []

    def test_fragments_too_short_to_say_anything_do_not_count(self) -> None:
        assert own_sentences(memory("Thanks! I moved to Berlin last spring. Ok.")) == []

    def test_questions_to_the_other_person_say_nothing_of_the_speaker(self) -> None:
        got = own_sentences(memory(
            "Caroline: Wow, what a view! What did you paint next? How long did it take you?"))
        assert got == ["Wow, what a view!"]

    def test_an_assistant_reply_contributes_nothing(self) -> None:
        reply = ("Here are three routes. The first follows the river. The second climbs "
                 "the hill. The third loops the park.")
        assert own_sentences(memory(reply, source="assistant")) == []
