"""Lexical tokens and BM25 sparse vectors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sleepmem.pipelines.lexical import (
    AVG_LEN,
    K1,
    phrases,
    sparse_document,
    sparse_query,
    token_id,
    tokens,
)


class TestPhrases:
    def test_every_run_of_up_to_three_words_holding_a_content_word(self) -> None:
        spans = phrases("The user works as a baggage handler.")
        assert "baggage handler" in spans and "a baggage handler" in spans
        assert "works" in spans and "user works as" in spans
        assert "as a" not in spans and "the" not in spans
        assert all(len(span.split()) <= 3 for span in spans)

    def test_chinese_runs_give_every_span_of_two_to_four_characters(self) -> None:
        spans = phrases("用户是安检员")
        assert {"安检", "安检员", "是安检员"} <= set(spans)
        assert "用" not in spans and "用户是安检员" not in spans

    def test_each_span_is_given_once(self) -> None:
        spans = phrases("tea and tea and tea")
        assert len(spans) == len(set(spans))


class TestLatinTokens:
    def test_words_are_lowercased_and_stopwords_dropped(self) -> None:
        assert tokens("The User is in BERLIN") == ["user", "berlin"]

    @pytest.mark.parametrize(
        ("forms", "stem"),
        [
            (["peanut", "peanuts"], "peanut"),
            (["allergy", "allergies"], "allergy"),
            (["box", "boxes"], "box"),
            (["like", "likes", "liked", "liking"], "lik"),
            (["stop", "stops", "stopped", "stopping"], "stop"),
            (["move", "moved", "moving"], "mov"),
        ],
    )
    def test_inflected_forms_meet_at_one_stem(self, forms: list[str], stem: str) -> None:
        assert {t for form in forms for t in tokens(form)} == {stem}

    def test_short_words_and_words_ending_in_ss_keep_their_form(self) -> None:
        assert tokens("bus class glass sql") == ["bus", "class", "glass", "sql"]

    def test_numbers_and_codes_are_kept_whole(self) -> None:
        assert tokens("order 4411 shipped via DHL-7") == [
            "order",
            "4411",
            "ship",
            "via",
            "dhl",
            "7",
        ]

    def test_possessives_and_contractions_leave_no_fragments(self) -> None:
        assert tokens("the user's cat doesn't bite") == ["user", "cat", "doesn", "bit"]

    def test_full_width_characters_fold_to_ascii(self) -> None:
        assert tokens("ＡＢＣ１２３") == tokens("abc123") == ["abc123"]

    def test_punctuation_and_blank_text_give_no_tokens(self) -> None:
        assert tokens("") == []
        assert tokens("  ...!?  ") == []


class TestCjkTokens:
    def test_a_chinese_run_gives_unigrams_and_bigrams(self) -> None:
        toks = tokens("我对花生过敏")
        assert set(toks) == {
            "我",
            "对",
            "花",
            "生",
            "过",
            "敏",
            "我对",
            "对花",
            "花生",
            "生过",
            "过敏",
        }

    def test_particles_are_dropped_as_unigrams_but_kept_inside_bigrams(self) -> None:
        toks = tokens("我的猫")
        assert "的" not in toks
        assert {"我的", "的猫", "猫"} <= set(toks)

    def test_mixed_text_splits_scripts_apart(self) -> None:
        toks = tokens("I live in 北京 since 2019, 喜欢Python")
        assert {"liv", "北京", "北", "京", "sinc", "2019", "喜欢", "python"} <= set(toks)
        # No token mixes scripts.
        assert all(t.isascii() or not any(c.isascii() for c in t) for t in toks)

    def test_japanese_kana_is_split_like_han(self) -> None:
        assert {"東京", "すし"} <= set(tokens("東京ですし"))


class TestSparseDocument:
    def test_token_ids_are_stable_across_processes(self) -> None:
        """Python's hash() is salted per process; the index must outlive any process."""
        code = "import json,sys; from sleepmem.pipelines.lexical import sparse_document as s; " + (
            "print(json.dumps(sorted(s(sys.argv[1]))))"
        )
        text = "The user is allergic to peanuts 我对花生过敏"
        runs = []
        for seed in ("1", "2"):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            out = subprocess.run(
                [sys.executable, "-c", code, text], env=env, capture_output=True, check=True
            )
            runs.append(json.loads(out.stdout))
        assert runs[0] == runs[1] == sorted(sparse_document(text))

    def test_ids_fit_in_31_bits(self) -> None:
        ids = sparse_document("alpha beta gamma delta 一二三四五六七八九十")
        assert ids and all(0 <= i < 2**31 for i in ids)

    def test_repeats_raise_the_weight_but_saturate(self) -> None:
        once = sparse_document("tea and biscuits on the train home tonight")[token_id("tea")]
        twice = sparse_document("tea tea and biscuits on the train home")[token_id("tea")]
        many = sparse_document("tea " * 8)[token_id("tea")]
        assert once < twice < many < K1 + 1.0

    def test_a_term_in_a_longer_document_weighs_less(self) -> None:
        short = sparse_document("peanut allergy")[token_id("peanut")]
        long_text = "peanut " + " ".join(f"word{i}" for i in range(int(AVG_LEN * 2)))
        assert sparse_document(long_text)[token_id("peanut")] < short

    def test_weights_follow_bm25_term_saturation(self) -> None:
        vec = sparse_document("green tea green")
        n = 3
        norm = K1 * (1 - 0.75 + 0.75 * n / AVG_LEN)
        assert vec[token_id("green")] == pytest.approx(2 * (K1 + 1) / (2 + norm))
        assert vec[token_id("tea")] == pytest.approx(1 * (K1 + 1) / (1 + norm))

    def test_text_without_tokens_gives_an_empty_vector(self) -> None:
        assert sparse_document("the of and ?!") == {}


class TestSparseQuery:
    def test_each_distinct_token_weighs_one(self) -> None:
        vec = sparse_query("peanuts peanut allergy allergies")
        assert vec == {token_id("peanut"): 1.0, token_id("allergy"): 1.0}

    def test_query_and_document_share_ids(self) -> None:
        assert set(sparse_query("花生")) <= set(sparse_document("我对花生过敏"))


class TestWordsThatPickAmongAnswers:
    """"Most recently", "the earliest", 最近: they say which answer the query wants, not what
    it is about, so its lexical half leaves them out and keeps the topic."""

    @pytest.mark.parametrize(
        ("query", "topic"),
        [
            ("Which streaming service did I start using most recently?",
             "streaming service start using"),
            ("What is the latest book I finished?", "book finished"),
            ("Which concert did I go to earliest?", "concert go"),
            ("What have I been cooking lately?", "cooking"),
            ("Which of my recent trips did I like least?", "trips like"),
            ("MOST RECENTLY, what did I buy?", "buy"),
            ("Ｗｈａｔ ｄｉｄ Ｉ ｂｕｙ ｍｏｓｔ ｒｅｃｅｎｔｌｙ？", "buy"),
        ],
    )
    def test_english_queries_keep_only_their_topic(self, query: str, topic: str) -> None:
        assert sparse_query(query) == sparse_query(topic)
        assert set(sparse_query(query)) == {token_id(t) for t in tokens(topic)}

    @pytest.mark.parametrize(
        ("query", "topic"),
        [
            ("我最近开始用哪个流媒体服务？", "我 开始用哪个流媒体服务？"),
            ("我最早去的是哪场音乐会？", "我 去的是哪场音乐会？"),
            ("我最喜欢的菜是什么？", "我 喜欢的菜是什么？"),
            ("近来我在读什么书？", " 我在读什么书？"),
        ],
    )
    def test_chinese_queries_lose_the_word_and_no_bigram_spans_the_cut(
        self, query: str, topic: str
    ) -> None:
        vec = sparse_query(query)
        assert vec == sparse_query(topic)
        for gone in ("最近", "最早", "近来", "最", "我最", "近开", "早去", "最喜"):
            assert token_id(gone) not in vec

    def test_the_same_words_inside_other_words_stay(self) -> None:
        # "almost", "recentness" and "utmost" are not the picking words; nor is a statement
        # touched: documents keep every word they say.
        assert token_id("almost") in sparse_query("almost done")
        assert token_id(tokens("utmost")[0]) in sparse_query("utmost care")
        assert token_id(tokens("recentness")[0]) in sparse_query("recentness matters")
        assert token_id("recently") in sparse_document("Ann recently moved to Oslo")

    def test_a_query_of_picking_words_alone_has_no_lexical_half(self) -> None:
        assert sparse_query("the most recent, the latest?") == {}
        assert sparse_query("最近最新") == {}
