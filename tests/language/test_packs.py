"""Every language pack reads the same behaviour table: whose a clause is, its polarity,
mood and time, and the value it states. Adding a language means adding its rows here."""

from __future__ import annotations

import pytest

from sleepmem.pipelines.language import (
    Mood,
    Owner,
    Time,
    codes,
    detect,
    main_clause,
    normalised,
    pack,
    read,
)

# (language, sentence, owner, mood, time, negated, change, value): one row per behaviour,
# said once in each language.
TABLE = [
    # a lasting first-person statement
    ("en", "I live in Porto.", Owner.SPEAKER, Mood.STATEMENT, Time.LASTING, False, False,
     "porto"),
    ("zh", "我住在杭州。", Owner.SPEAKER, Mood.STATEMENT, Time.LASTING, False, False, "杭州"),
    # the subject left out is the speaker's
    ("en", "finally settled at the new place in Leeds", Owner.SPEAKER, Mood.STATEMENT,
     Time.LASTING, False, True, "leeds"),
    ("zh", "新公司在张江", Owner.SPEAKER, Mood.STATEMENT, Time.LASTING, False, True, "张江"),
    # a hypothetical is nobody's fact
    ("en", "If I ever move to Oslo, I'll get a boat.", Owner.NOBODY, Mood.STATEMENT,
     Time.FUTURE, False, False, None),
    ("zh", "如果以后搬到成都，我想养只猫。", Owner.NOBODY, Mood.STATEMENT, None, False, None, None),
    # another person's fact is theirs
    ("en", "My sister lives in Rome.", Owner.OTHER, Mood.STATEMENT, Time.LASTING, False,
     False, "rome"),
    ("zh", "我哥哥搬到成都了。", Owner.OTHER, Mood.STATEMENT, Time.LASTING, False, True, "成都"),
    # what is said of the listener, or of the thing talked of, is not the speaker's
    ("en", "You are so talented.", Owner.OTHER, Mood.STATEMENT, Time.LASTING, False, False,
     None),
    ("zh", "你真有才华。", Owner.OTHER, Mood.STATEMENT, None, False, None, None),
    ("en", "It's a wild ride.", Owner.OTHER, Mood.STATEMENT, Time.LASTING, False, False, None),
    ("zh", "这真是一段疯狂的旅程。", Owner.OTHER, Mood.STATEMENT, None, False, None, None),
    # what the speaker asks of the listener is the speaker's
    ("en", "You should answer in Chinese.", Owner.SPEAKER, Mood.STATEMENT, None, False, None, None),
    ("zh", "你应该用中文回答。", Owner.SPEAKER, Mood.STATEMENT, None, False, None, None),
    # negation
    ("en", "I don't eat meat anymore.", Owner.SPEAKER, Mood.STATEMENT, Time.LASTING, True,
     True, "meat"),
    ("zh", "我不再喝咖啡了。", Owner.SPEAKER, Mood.STATEMENT, Time.LASTING, True, True, None),
    # a request from now on, asked as a question or a wish
    ("en", "could replies be in Spanish from now on?", Owner.IMPLICIT, Mood.INSTRUCTION,
     Time.LASTING, False, True, "spanish"),
    ("zh", "以后开会都约在周五吧", Owner.SPEAKER, Mood.INSTRUCTION, None, False, True, "周五"),
    # a question asks; it states nothing
    ("en", "Where do I keep my passport?", None, Mood.QUESTION, None, False, None, None),
    ("zh", "我住在哪里吗？", None, Mood.QUESTION, None, False, None, None),
    # a finished event and a passing moment are not lasting
    ("en", "I went to a pottery class yesterday.", Owner.SPEAKER, Mood.STATEMENT, Time.PAST,
     False, False, None),
    ("zh", "昨天在上海玩了三天。", Owner.SPEAKER, Mood.STATEMENT, Time.PAST, False, None, None),
    ("en", "I'm in Tokyo this week for a conference.", Owner.SPEAKER, Mood.STATEMENT,
     Time.ONE_OFF, False, False, None),
    ("zh", "今天在公司加班。", Owner.SPEAKER, Mood.STATEMENT, Time.ONE_OFF, False, None, None),
    # a moment that says when something starts: it holds from then on, a change
    ("en", "Starting this week I work from home.", Owner.SPEAKER, Mood.STATEMENT, Time.LASTING,
     False, True, None),
    ("zh", "这周开始在链家带客户看房了。", Owner.SPEAKER, Mood.STATEMENT, Time.LASTING, False,
     True, "链家"),
    ("zh", "这个月起我在家办公。", Owner.SPEAKER, Mood.STATEMENT, Time.LASTING, False, True,
     None),
]


def test_every_pack_has_rows_in_the_table() -> None:
    assert {row[0] for row in TABLE} == set(codes())


@pytest.mark.parametrize(
    ("lang", "text", "owner", "mood", "time", "negated", "change", "value"), TABLE,
    ids=[row[1] for row in TABLE])
def test_each_pack_reads_whose_a_clause_is_its_mood_time_polarity_and_value(
    lang: str, text: str, owner: Owner | None, mood: Mood, time: Time | None,
    negated: bool, change: bool | None, value: str | None,
) -> None:
    assert detect(text) == lang
    [r] = pack(lang).readings([text])
    if owner is not None:
        assert r.owner is owner
    assert r.mood is mood
    if time is not None:
        assert r.time is time
    assert r.negated is negated
    if change is not None:
        assert r.change is change
    if value is not None:
        assert r.value == value


@pytest.mark.parametrize(("text", "value", "denied"), [
    ("No, it's a Persian, not a Siamese.", "persian", "siamese"),
    ("不对，是二中不是一中", "二中", "一中"),
])
def test_a_contrast_affirms_one_value_and_denies_the_other(
        text: str, value: str, denied: str) -> None:
    [r] = read([text])
    assert (r.value, r.replaces, r.negated) == (value, denied, False)


@pytest.mark.parametrize(("text", "value"), [
    ("I've given up sugar in my coffee.", "sugar"),
    ("We cut out red meat last spring.", "red meat"),
    ("Honestly I'm done with energy drinks.", "energy drinks"),
    ("Done with cycling, my back hurts.", "cycling"),
    ("我戒了烟。", None),
])
def test_a_verb_that_ends_its_value_reads_as_an_end_not_a_denial(
        text: str, value: str | None) -> None:
    [r] = read([text])
    assert r.ends and r.negated, r
    if value is not None:
        assert r.value == value


@pytest.mark.parametrize(("text", "ended", "value"), [
    ("quit the choir, im learning the drums now", "choir", "drums"),
    ("Sold the Vespa, I ride an e-bike these days.", "vespa", "e-bike"),
    ("I stopped eating sugar and I bake with honey now.", "", "honey"),
])
def test_an_end_said_first_is_carried_by_what_holds_now(text: str, ended: str,
                                                       value: str) -> None:
    # Casual English drops the "I" of the end ("quit the choir"), which then reads as a
    # request to the listener; the speaker's next clause says whose it is.
    [r] = read([text])
    assert r.owner is Owner.SPEAKER and r.mood is Mood.STATEMENT and r.lasting, r
    assert value in r.value and (not ended or r.ended == ended), r


@pytest.mark.parametrize("text", ["Drop the jokes, I'm busy today.",
                                  "Put it in a table, I want to compare prices.",
                                  "Cancel my order, I changed my mind."])
def test_a_request_before_the_speakers_own_words_ends_nothing(text: str) -> None:
    [r] = read([text])
    assert not r.ended and not r.ends, r


@pytest.mark.parametrize(("text", "value"), [
    ("Lisbon's home these days.", "lisbon"),
    ("My name's Tomasz.", "tomasz"),
    ("my favourite's oolong", "oolong"),
    ("My brother's in Porto.", "porto"),
    ("the ioniq 5's the daily now, charging it overnight", "daily"),
])
def test_an_apostrophe_s_with_no_verb_in_the_sentence_is_read_as_is(text: str,
                                                                   value: str) -> None:
    # The small parser takes every "'s" before a noun for a possessive: the sentence then
    # has no predicate and read as a fragment that states nothing.
    [r] = read([text])
    assert not r.fragment and r.value == value, r


@pytest.mark.parametrize("text", ["My mom's house.", "My sister's car is red."])
def test_a_possessive_stays_a_possessive(text: str) -> None:
    [r] = read([text])
    assert r.fragment or r.head == "be_red", r


@pytest.mark.parametrize(("text", "value"), [
    ("I'm left-handed.", "left-handed"),
    ("I'm self-employed these days.", "self-employed"),
    ("My sister-in-law lives in Leeds.", "leeds"),
])
def test_a_word_joined_by_hyphens_is_read_as_one_word(text: str, value: str) -> None:
    # Split at its hyphens, "left-handed" parsed as a passive "left" (an end, negated).
    [r] = read([text])
    assert (r.value, r.negated, r.ends) == (value, False, False), r


@pytest.mark.parametrize("text", ["I didn't give up.", "I gave the book to Ana.",
                                  "我不喜欢下雨。"])
def test_a_plain_negation_or_another_verb_ends_nothing(text: str) -> None:
    [r] = read([text])
    assert not r.ends, r


@pytest.mark.parametrize(("text", "below"), [
    ("On weekends I prefer hiking over cycling.", "cycling"),
    ("I'd rather take the train than the plane.", "plane"),
    ("I like jazz more than rock.", "rock"),
    ("比起火车，我更喜欢坐飞机。", "火车"),
])
def test_a_comparison_names_what_it_ranks_below(text: str, below: str) -> None:
    [r] = read([text])
    assert r.below == below, r


@pytest.mark.parametrize("text", ["We moved to Leeds over the summer.",
                                  "I'm taller than my brother.", "我住在杭州。"])
def test_a_time_or_a_plain_comparison_ranks_nothing(text: str) -> None:
    [r] = read([text])
    assert r.below == "", r


@pytest.mark.parametrize(("text", "each"), [
    ("I collect old maps and vinyl records.", ("I collect old maps.", "I collect vinyl records.")),
    ("I'm allergic to latex, penicillin and bees.",
     ("I'm allergic to latex.", "I'm allergic to penicillin.", "I'm allergic to bees.")),
    ("Jazz and blues are both my favourite genres.",
     ("Jazz are my favourite genres.", "Blues are my favourite genres.")),
])
def test_a_value_joined_by_and_is_read_once_per_value(text: str, each: tuple[str, ...]) -> None:
    [r] = read([text])
    assert r.each == each


@pytest.mark.parametrize("text", ["I live with my husband and two kids.",
                                  "I love hiking.", "I sold my car and I bought a bike.",
                                  "我喜欢喝茶和咖啡。"])
def test_people_joined_one_value_or_two_clauses_are_read_whole(text: str) -> None:
    [r] = read([text])
    assert r.each == (), r


@pytest.mark.parametrize("text", ["Get me a taxi to the station.", "Write us a short poem.",
                                  "Find me a cheap hotel near the venue, please."])
def test_a_request_for_one_thing_is_for_now(text: str) -> None:
    [r] = read([text])
    assert (r.mood, r.time) == (Mood.INSTRUCTION, Time.ONE_OFF), r


@pytest.mark.parametrize("text", ["Always get me a vegetarian meal on flights.",
                                  "Give me answers in bullet points.",
                                  "Use a formal tone with me.",
                                  "From now on book me a hotel near the office."])
def test_a_standing_request_lasts(text: str) -> None:
    [r] = read([text])
    assert r.time is not Time.ONE_OFF, r


@pytest.mark.parametrize(("text", "value"), [
    ("When you write release notes, keep it under a page.", "page"),
    ("Put it in a table when you compare prices.", "table"),
])
def test_what_a_request_points_at_is_the_reply_not_the_talk(text: str, value: str) -> None:
    # "I love it" points at something said; "keep it under a page" asks for a way of replying.
    [r] = read([text])
    assert r.mood is Mood.INSTRUCTION and not r.about_talk and value in r.value, r


def test_a_liking_of_what_is_only_pointed_at_is_still_about_the_talk() -> None:
    [r] = read(["I love it."])
    assert r.about_talk, r


@pytest.mark.parametrize(("text", "name"), [
    ("我是陈静。", "陈静"), ("嗯，老刘是我。", "老刘"), ("我是老师。", ""), ("小李是我的。", ""),
    ("我是小李的朋友。", ""),
])
def test_the_copula_between_the_speaker_and_a_name_names_the_speaker(
        text: str, name: str) -> None:
    [r] = read([text])
    assert r.name == name, r


@pytest.mark.parametrize(("text", "value"), [
    ("Pollen gives me hay fever every spring.", "pollen"),
    ("Gluten makes me bloated.", "gluten"),
])
def test_what_acts_on_the_speaker_is_a_fact_of_theirs_and_its_value(
        text: str, value: str) -> None:
    [r] = read([text])
    assert (r.owner, r.value) == (Owner.SPEAKER, value), r


@pytest.mark.parametrize(("text", "value"), [
    ("I work at Siemens with my friend Jonas.", "siemens"),
    ("We moved to Tallinn with our son Mart.", "tallinn"),
])
def test_the_name_the_verbs_own_preposition_takes_is_the_value(text: str, value: str) -> None:
    [r] = read([text])
    assert r.value == value, r


@pytest.mark.parametrize(("text", "standard"), [
    ("im vegan these days and ive got a cat", "I'm vegan these days and I've got a cat"),
    ("Thats my brother, he doesnt drive", "That's my brother, he doesn't drive"),
    ("Ill be late, well see", "Ill be late, well see"),
    ("IM me later", "IM me later"),
    ("im doin dog walking, goin well", "I'm doing dog walking, going well"),
    ("我住在杭州。", "我住在杭州。"),
])
def test_a_pack_puts_casual_spellings_back_and_leaves_real_words(
        text: str, standard: str) -> None:
    assert normalised(text) == standard


@pytest.mark.parametrize(("text", "replaces"), [
    ("it's Pappas, not Petrakis lol. you keep mangling that one", "petrakis"),
    ("tbh it's a Persian, not a Siamese haha", "siamese"),
])
def test_a_chat_word_changes_nothing_a_sentence_says(text: str, replaces: str) -> None:
    # Parsed, "lol" becomes a second object and the contrast is lost.
    [r] = read([text])
    assert r.replaces == replaces, r


@pytest.mark.parametrize("text", ["Use British spelling in anything you draft for me.",
                                  "Cite the source wherever you quote one."])
def test_a_request_about_what_the_listener_does_as_a_rule_is_habitual(text: str) -> None:
    [r] = read([text])
    assert r.time is Time.HABITUAL, r


@pytest.mark.parametrize("text", ["Send me the report you wrote yesterday.",
                                  "Fix the bug you found."])
def test_a_request_about_one_thing_the_listener_did_is_not(text: str) -> None:
    [r] = read([text])
    assert r.time is not Time.HABITUAL, r


def test_a_time_phrase_leading_a_request_is_no_verb_of_it() -> None:
    # Parsed whole, "going forward" was the sentence's verb: a plan to go somewhere.
    [r] = read(["going forward, quote prices to me in euros."])
    assert r.change and r.time is not Time.FUTURE and r.head != "go", r


@pytest.mark.parametrize(("text", "head"), [
    ("allergic to sesame btw, flagging it again just in case", "be_allergic"),
    ("fluent in portuguese btw", "be_fluent"),
])
def test_a_state_said_without_its_i_am_is_the_speakers(text: str, head: str) -> None:
    [r] = read([text])
    assert r.owner is Owner.SPEAKER and r.holds and r.head == head, r


def test_an_end_said_first_is_a_past_when_a_time_word_says_what_holds_now() -> None:
    # "quit" is its own past: with its "I" back it parses as a present, and only the
    # change the next clause states tells it from a request.
    [r] = read([normalised("quit the cafe lol, im doin dog walking full time now")])
    assert r.owner is Owner.SPEAKER and r.ended == "cafe", r


@pytest.mark.parametrize(("text", "main"), [
    ("Before I forget, could you book the table?", "could you book the table?"),
    ("Oh and if it's no trouble, send me the notes.", "send me the notes."),
    ("I live in Porto.", "I live in Porto."),
    ("About my ex, please forget it.", "About my ex, please forget it."),
    ("对了，帮我把地址删掉。", "对了，帮我把地址删掉。"),
])
def test_a_main_clause_starts_after_what_leads_into_it(text: str, main: str) -> None:
    assert main_clause(text) == main


def test_one_detector_serves_every_module() -> None:
    """A sentence naming one Chinese place in English words is English; Chinese with a
    Latin brand name is Chinese."""
    assert detect("We moved to 杭州 last year") == "en"
    assert detect("我现在开特斯拉Model 3") == "zh"
    assert detect("") == "en"


def test_read_keeps_the_order_of_mixed_languages() -> None:
    texts = ["I live in Porto.", "我住在杭州。", "I drive a Volvo."]
    assert [r.text for r in read(texts)] == texts


@pytest.mark.parametrize("text", ["提成比以前高不少", "还不错", "不过我喜欢猫", "不久前搬到了苏州"])
def test_a_word_that_only_begins_with_a_negation_negates_nothing(text: str) -> None:
    # 不少 "quite a lot", 不错 "good", 不过 "but", 不久前 "not long ago"
    [r] = read([text])
    assert not r.negated


@pytest.mark.parametrize("text", ["我不吃肉", "不能吃辣", "我不想去健身房了"])
def test_a_verb_said_with_its_negation_is_negated(text: str) -> None:
    [r] = read([text])
    assert r.negated


@pytest.mark.parametrize("text", ["Reply in short sentences.", "Report costs in euros.",
                                  "Name files with the date first.", "Time the reminders for 8am.",
                                  # a gerund of no verb: "ping" read as "pe" + "-ing"
                                  "ping me about invoices a week before they're due"])
def test_a_request_whose_verb_the_parser_took_for_a_noun_is_a_request(text: str) -> None:
    [r] = read([text])
    assert r.mood is Mood.INSTRUCTION and not r.fragment


@pytest.mark.parametrize("text", ["Coffee with oat milk.", "Great answer.", "Thanks for the tip.",
                                  "singing in the shower every morning"])
def test_a_noun_no_verb_list_knows_or_an_interjection_is_not_read_as_a_request(text: str) -> None:
    [r] = read([text])
    assert r.mood is not Mood.INSTRUCTION
