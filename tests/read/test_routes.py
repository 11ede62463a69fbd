"""Multi-route recall: time expressions (EN, ZH) resolve to windows, "when" questions
favour dated memories, two-part questions reach both parts, an extra route plugs into the
fusion, and every card says which routes found it.

Memories are written as rows and index points the way persist + index write them; the
index is the in-memory one (the ``index`` fixture; it passes the engines' contract
suite), SQL is SQLite and PostgreSQL (as in test_search).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session
from support import blas_threads, store_memory

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.adapters.vectors.memory import MemoryIndex
from sleepmem.models import Memory, MemoryCard, Scope
from sleepmem.pipelines.entities import graph as entity_graph
from sleepmem.pipelines.entities import store as entity_store
from sleepmem.pipelines.ports import Embedder, Hit, IndexFilter, Ports, VectorIndex
from sleepmem.pipelines.read.decompose import parts
from sleepmem.pipelines.read.entities import entity_route, people_named
from sleepmem.pipelines.read.found import time_finding
from sleepmem.pipelines.read.fusion import Route, fuse
from sleepmem.pipelines.read.rank import RankWeights
from sleepmem.pipelines.read.retrieve import RouteFn, SearchTrace, search, understand
from sleepmem.pipelines.when import asks_when, carries_date, resolve
from sleepmem.reader import build_request

NOW = datetime(2024, 3, 15, 10, tzinfo=UTC)  # a Friday
EMBEDDER = HashingEmbedder()
ANN = Scope(tenant="acme", agent="bot", user="ann")


def remember(engine: Engine, index: VectorIndex, statement: str, *, at: datetime = NOW,
             **kw: Any) -> Memory:
    return store_memory(engine, index, ANN, statement, at=at,
                        type=str(kw.pop("type", "event")), **kw)


FILLER = [
    "Ann went to the market for bread.", "Ann went to the gym after work.",
    "Mel went to a concert downtown.", "Ann went swimming at the pool.",
    "Ann cooked dinner for her parents.", "Mel went to the library to study.",
    "Ann went to see a film with friends.", "Ann walked the dog in the park.",
]


def crowd(engine: Engine, index: VectorIndex, *, at: datetime = NOW) -> None:
    """Loosely related memories, so each route's min-max has a real spread to work on
    (with two candidates one would be 1 and the other 0 on every route)."""
    for i, text in enumerate(FILLER):
        remember(engine, index, text, at=at - timedelta(days=400 + i))


def find(engine: Engine, index: VectorIndex, query: str, *, k: int = 5,
         extra: dict[str, RouteFn] | None = None) -> list[MemoryCard]:
    ports = Ports(embedder=EMBEDDER, index=index, clock=lambda: NOW)
    request = build_request(query, scope=ANN, k=k)
    result = search(engine=engine, ports=ports, request=request, weights=RankWeights(),
                    extra=extra)
    return result.flat()


def traced(engine: Engine, index: VectorIndex, query: str, *, k: int = 5,
           embedder: Embedder = EMBEDDER) -> tuple[list[MemoryCard], SearchTrace]:
    """The search's cards for ``query`` and what it saw on the way."""
    ports = Ports(embedder=embedder, index=index, clock=lambda: NOW)
    trace = SearchTrace()
    result = search(engine=engine, ports=ports, weights=RankWeights(), trace=trace,
                    request=build_request(query, scope=ANN, k=k))
    return result.flat(), trace


def route_named(trace: SearchTrace, name: str) -> Route:
    (route,) = [r for r in trace.routes if r.name == name]
    return route


def route_ids(engine: Engine, index: VectorIndex, query: str, name: str) -> list[str]:
    """What the route called ``name`` proposed for ``query``, in its order."""
    _cards, trace = traced(engine, index, query)
    return [h.id for h in route_named(trace, name).hits]


def day(text: str) -> tuple[str, str] | None:
    w = resolve(text, NOW)
    return None if w is None else (f"{w.start:%Y-%m-%d}", f"{w.end:%Y-%m-%d}")


class TestDateExpressionsResolveToWindows:
    @pytest.mark.parametrize(
        ("query", "window"),
        [
            ("what did I do yesterday", ("2024-03-14", "2024-03-15")),
            ("what did I buy last month", ("2024-02-01", "2024-03-01")),
            ("where did I travel last year", ("2023-01-01", "2024-01-01")),
            ("who did I meet last Saturday", ("2024-03-09", "2024-03-10")),
            ("what happened on 8 May, 2023", ("2023-05-08", "2023-05-09")),
            ("what did I read in May 2023", ("2023-05-01", "2023-06-01")),
            ("trips in the past two weeks", ("2024-03-01", "2024-03-15")),
        ],
    )
    def test_english_expressions(self, query: str, window: tuple[str, str]) -> None:
        assert day(query) == window

    @pytest.mark.parametrize(
        ("query", "window"),
        [
            ("我上个月买了什么", ("2024-02-01", "2024-03-01")),
            ("去年我去了哪里", ("2023-01-01", "2024-01-01")),
            ("昨天我吃了什么", ("2024-03-14", "2024-03-15")),
            ("2023年5月8日发生了什么", ("2023-05-08", "2023-05-09")),
            ("上周六我见了谁", ("2024-03-09", "2024-03-10")),
        ],
    )
    def test_chinese_expressions(self, query: str, window: tuple[str, str]) -> None:
        assert day(query) == window

    def test_a_counted_offset_is_widened_by_one_unit_each_side(self) -> None:
        assert day("what did I cook 3 days ago") == ("2024-03-11", "2024-03-14")
        assert day("三天前我做了什么") == ("2024-03-11", "2024-03-14")

    def test_before_and_after_open_the_window_on_one_side(self) -> None:
        before = resolve("what did I do before June 2023", NOW)
        after = resolve("what did I do after March 3rd", NOW)
        zh_before = resolve("5月之前我在哪里工作", NOW)
        assert before is not None and before.end == datetime(2023, 6, 1, tzinfo=UTC)
        assert before.start.year == 1970
        assert after is not None and after.start == datetime(2024, 3, 4, tzinfo=UTC)
        assert after.end > NOW
        assert zh_before is not None and zh_before.end == datetime(2023, 5, 1, tzinfo=UTC)

    @pytest.mark.parametrize(
        ("query", "margin"),
        [
            ("what did I buy last month", timedelta(days=29) / 2),  # February 2024
            ("我上个月买了什么", timedelta(days=29) / 2),
            ("what did I cook 3 days ago", timedelta(days=1.5)),
            ("三天前我做了什么", timedelta(days=1.5)),
            ("what did I read in May 2023", timedelta(days=31) / 2),
            ("what did I do yesterday", timedelta(hours=12)),
        ],
    )
    def test_a_named_time_reaches_half_its_length_past_each_edge(
        self, query: str, margin: timedelta
    ) -> None:
        window = resolve(query, NOW)
        assert window is not None and window.margin == margin
        assert window.widened() == (window.start - margin, window.end + margin)

    @pytest.mark.parametrize(
        "query",
        ["what did I do before June 2023", "what did I do after March 3rd",
         "where have I lived since May", "5月之前我在哪里工作", "5月以后我在哪里工作"],
    )
    def test_an_edge_the_query_draws_itself_has_no_margin(self, query: str) -> None:
        window = resolve(query, NOW)
        assert window is not None and window.margin == timedelta(0)

    @pytest.mark.parametrize(
        ("valid_from", "verdict"),
        [
            (datetime(2024, 2, 10, tzinfo=UTC), "inside"),
            (datetime(2024, 1, 27, tzinfo=UTC), "near"),
            (datetime(2024, 3, 10), "near"),  # a naive time is read as UTC
            (datetime(2023, 12, 1, tzinfo=UTC), "outside"),
            (datetime(2024, 3, 16, tzinfo=UTC), "outside"),
        ],
    )
    def test_explain_says_whether_a_memory_is_inside_near_or_outside_the_time(
        self, valid_from: datetime, verdict: str
    ) -> None:
        window = resolve("what did I buy last month", NOW)  # February 2024, ± 14.5 days
        assert window is not None
        found = time_finding(window, valid_from)
        assert found.memory_is == verdict
        assert (found.start, found.end) == (window.start, window.end)
        assert found.expression == "last month"

    def test_ordinary_words_that_name_months_are_not_dates(self) -> None:
        assert resolve("may I ask what you march to", NOW) is None
        assert resolve("what is my favourite colour", NOW) is None

    def test_when_questions_and_dated_statements_are_recognised(self) -> None:
        assert asks_when("When did Ann go to Rome?")
        assert asks_when("安什么时候去的罗马？")
        assert not asks_when("What did Ann eat in Rome?")
        assert carries_date("I went to Rome yesterday")
        assert carries_date("我上周去了罗马")
        assert not carries_date("I like Rome")


class TestTimeRoute:
    def test_a_window_in_the_query_brings_the_memory_from_that_window_first(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        crowd(engine, index)
        remember(engine, index, "Ann went hiking in the hills.", at=NOW - timedelta(days=200))
        remember(engine, index, "Ann went hiking in the woods.", at=NOW - timedelta(days=90))
        inside = remember(engine, index, "Ann went hiking by the lake.",
                          at=datetime(2024, 2, 10, tzinfo=UTC))
        cards = find(engine, index, "where did Ann go hiking last month")
        assert cards[0].id == inside.id
        assert "time" in cards[0].routes
        assert all("time" not in c.routes for c in cards[1:])

    def test_the_same_window_in_chinese_finds_the_same_memory(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        crowd(engine, index)
        remember(engine, index, "安和哥哥去爬山了。", at=NOW - timedelta(days=200))
        inside = remember(engine, index, "安和妹妹去爬山了。", at=datetime(2024, 2, 10, tzinfo=UTC))
        cards = find(engine, index, "安上个月去哪里爬山了")
        assert cards[0].id == inside.id
        assert "time" in cards[0].routes

    @pytest.mark.parametrize(
        ("query", "statements"),
        [
            ("where did Ann go hiking last month",
             ("Ann went hiking by the lake.", "Ann went hiking in the dunes.",
              "Ann went hiking in the hills.")),
            ("安上个月去哪里爬山了",
             ("安和妹妹去爬山了。", "安和姐姐去爬山了。", "安和哥哥去爬山了。")),
        ],
    )
    def test_a_memory_just_outside_the_named_window_is_near_and_ranks_after_one_inside(
        self, engine: Engine, index: VectorIndex, query: str, statements: tuple[str, str, str]
    ) -> None:
        # "Last month" is February; people misplace such times by days, so a hike on
        # 27 January is still near it (found by the time route, below February's), while
        # one seven months back is not. February holds other memories too, so the route's
        # min-max has a floor below the near one.
        crowd(engine, index)
        for i, text in enumerate(["Ann baked bread at home.", "Ann read a novel on the sofa.",
                                  "Ann fixed her bike in the garage."]):
            remember(engine, index, text, at=datetime(2024, 2, 5 + 5 * i, tzinfo=UTC))
        inside = remember(engine, index, statements[0], at=datetime(2024, 2, 10, tzinfo=UTC))
        near = remember(engine, index, statements[1], at=datetime(2024, 1, 27, tzinfo=UTC))
        far = remember(engine, index, statements[2], at=NOW - timedelta(days=200))
        cards = {c.id: c for c in find(engine, index, query, k=10)}
        order = list(cards)
        assert order.index(inside.id) < order.index(near.id) < order.index(far.id)
        assert "time" in cards[inside.id].routes and "time" in cards[near.id].routes
        assert "time" not in cards[far.id].routes
        assert cards[inside.id].score > cards[near.id].score

    def test_an_edge_the_query_draws_is_kept_exactly(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        crowd(engine, index)
        before = remember(engine, index, "Ann painted a sunset.",
                          at=datetime(2024, 1, 30, tzinfo=UTC))
        after = remember(engine, index, "Ann painted a sunrise.",
                         at=datetime(2024, 2, 2, tzinfo=UTC))
        cards = {c.id: c for c in find(engine, index, "what did Ann paint before February")}
        assert "time" in cards[before.id].routes
        assert "time" not in cards[after.id].routes

    @pytest.mark.parametrize(
        ("query", "asked_about", "says_the_time_words"),
        [
            ("What did Ann buy 10 days ago?", "Ann went to buy a new kettle.",
             "Ann saw her cousin a few days ago."),
            ("Which book did Ann start reading two weeks ago?",
             "Ann started reading a book about whales.",
             "Two weeks ago, weeks of rain began, Ann said."),
            ("What did Ann cook last month?", "Ann cooked a curry for her friends.",
             "Last month was a long month at work, Ann said."),
            ("安10天前买了什么？", "安买了一个新水壶。", "安几天前见了表妹。"),
            ("安上个月做了什么菜？", "安做了一道咖喱菜。", "安说上个月工作很忙。"),
        ],
    )
    def test_inside_the_window_the_words_that_named_it_favour_nothing(
        self, engine: Engine, index: VectorIndex, query: str, asked_about: str,
        says_the_time_words: str,
    ) -> None:
        # Both memories are of the named time; only one is about what the query asks.
        # Matching "days ago" / "上个月" again inside the window would put the other first.
        window = resolve(query, NOW)
        assert window is not None
        crowd(engine, index)
        at = window.start + (window.end - window.start) / 2
        answer = remember(engine, index, asked_about, at=at)
        remember(engine, index, says_the_time_words, at=at)
        assert route_ids(engine, index, query, "time")[0] == answer.id

    @pytest.mark.parametrize(
        ("query", "statement"),
        [("what happened last month?", "Ann baked bread at home."),
         ("上个月发生了什么？", "安在家里烤了面包。")],
    )
    def test_a_query_that_names_only_a_time_still_finds_what_is_inside_it(
        self, engine: Engine, index: VectorIndex, query: str, statement: str
    ) -> None:
        # With the time words left out, the window's lexical half has nothing to match;
        # its dense half still ranks what the window holds.
        crowd(engine, index)
        inside = remember(engine, index, statement, at=datetime(2024, 2, 10, tzinfo=UTC))
        cards, trace = traced(engine, index, query, k=10)
        assert [h.id for h in route_named(trace, "time").hits] == [inside.id]
        assert "time" in {c.id: c for c in cards}[inside.id].routes

    def test_the_index_filter_keeps_only_points_valid_from_inside_the_window(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        remember(engine, index, "Ann painted a sunset.", at=datetime(2024, 1, 31, 23, tzinfo=UTC))
        inside = remember(engine, index, "Ann painted a sunrise.",
                          at=datetime(2024, 2, 1, tzinfo=UTC))
        remember(engine, index, "Ann painted a lake.", at=datetime(2024, 3, 1, tzinfo=UTC))
        where = IndexFilter(scope=ANN, now=NOW, valid_between=(
            datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC)))
        vector = EMBEDDER.embed(["painted"], kind="query")[0]
        assert [h.id for h in index.search_dense(vector, where=where, limit=10)] == [inside.id]

    def test_a_when_question_prefers_the_memory_that_names_a_time(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        crowd(engine, index)
        plain = remember(engine, index, "Ann went to the pottery class with Mel.")
        dated = remember(engine, index, "Ann went to the pottery class on Tuesday.")
        when = find(engine, index, "When did Ann go to the pottery class?")
        what = find(engine, index, "Did Ann go to the pottery class?")
        assert [c.id for c in when[:2]] == [dated.id, plain.id]
        assert "time" in when[0].routes
        assert all("time" not in c.routes for c in what)
        assert {c.id for c in what[:2]} == {plain.id, dated.id}


class TestTwoPartQuestions:
    def test_a_two_part_question_is_split_at_its_conjunction(self) -> None:
        assert parts("What did Ann paint and where did Mel study music?") == [
            "What did Ann paint", "where did Mel study music"]
        assert parts("安搬到了哪个城市，她的狗叫什么名字？") == [
            "安搬到了哪个城市", "她的狗叫什么名字"]

    def test_names_joined_by_and_stay_one_question(self) -> None:
        assert parts("What do Ann and Mel like to cook?") == []
        assert parts("Does Ann take salt and pepper?") == []

    def test_both_parts_are_retrieved_even_when_one_part_dominates_the_words(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        for topic in ("roses", "tulips", "lilies", "daisies"):
            remember(engine, index, f"Ann painted the garden {topic} in watercolour paint.")
        music = remember(engine, index, "Mel studied music at the conservatory.")
        question = "What garden flowers did Ann paint in watercolour and where did Mel study music?"
        cards = find(engine, index, question, k=3)
        assert music.id in [c.id for c in cards]
        assert "part" in next(c for c in cards if c.id == music.id).routes


class TestFusion:
    def test_routes_are_fused_by_weighted_min_max_and_remember_who_found_what(self) -> None:
        fused = fuse([
            Route("dense", [Hit("a", 0.6), Hit("b", 0.4)], 0.3),
            Route("lexical", [Hit("b", 9.0), Hit("c", 1.0)], 0.7),
            Route("entity", [Hit("c", 2.0)], 0.5),
        ])
        assert {k: round(v.score, 6) for k, v in fused.items()} == {"a": 0.3, "b": 0.7, "c": 0.5}
        assert fused["b"].routes == ["dense", "lexical"]
        assert fused["c"].routes == ["lexical", "entity"]
        order = sorted(fused, key=lambda k: -fused[k].score)
        assert order == ["b", "c", "a"]

    def test_an_extra_route_plugs_in_and_its_name_is_on_the_card(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        crowd(engine, index)
        friend = remember(engine, index, "Mel works as a nurse in Tokyo.",
                          at=NOW - timedelta(days=500))
        asked: list[dict[str, Any]] = []

        def entity_route(*, engine: Engine, scope: Scope, query: str, limit: int) -> list[Hit]:
            asked.append({"scope": scope, "query": query, "limit": limit})
            return [Hit(friend.id, 1.0)]

        cards = find(engine, index, "what does Ann's friend do", k=3,
                     extra={"entity": entity_route})
        assert asked and asked[0]["scope"] == ANN
        assert ["entity" in c.routes for c in cards if c.id == friend.id] == [True]
        without = find(engine, index, "what does Ann's friend do", k=3)
        assert friend.id not in [c.id for c in without]
        assert all("entity" not in c.routes for c in without)


class TestCardsCarryRoutes:
    def test_each_card_names_the_routes_that_found_it(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        remember(engine, index, "Ann plays the violin.")
        cards = find(engine, index, "violin")
        assert cards and set(cards[0].routes) >= {"lexical", "dense"}

    def test_a_card_without_routes_serialises_as_before(self) -> None:
        card = MemoryCard(id="m", statement="s", type="fact", source="user", trust="high",
                          valid_from=NOW, confidence=1.0, score=1.0)
        assert "routes" not in card.model_dump()
        with_routes = card.model_copy(update={"routes": ["dense"]})
        assert with_routes.model_dump()["routes"] == ["dense"]


class TestContextRoute:
    def test_the_turn_next_to_a_strong_hit_is_proposed_by_the_context_route(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        crowd(engine, index)
        at = NOW - timedelta(days=3)
        remember(engine, index, "Ann asked what to call her new puppy.", at=at)
        reply = remember(engine, index, "Mel said Biscuit suits him.",
                         at=at + timedelta(seconds=30))
        remember(engine, index, "Mel said the cake was lovely.", at=at - timedelta(days=30))
        ports = Ports(embedder=EMBEDDER, index=index, clock=lambda: NOW)
        request = build_request("what did Ann call her new puppy", scope=ANN, k=3)
        on = search(engine=engine, ports=ports, request=request,
                    weights=RankWeights(context=0.3)).flat()
        off = search(engine=engine, ports=ports, request=request,
                     weights=RankWeights(context=0.0)).flat()
        assert ["context" in c.routes for c in on if c.id == reply.id] == [True]
        assert all("context" not in c.routes for c in off)


class TestSentenceRoute:
    def test_a_fact_said_in_passing_in_a_long_turn_is_found_by_its_sentence(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        crowd(engine, index)
        turn = remember(
            engine, index,
            "Ann is looking for new bike routes around the city this weekend. She wants a "
            "waterfront path with cafes and outdoor seating. She finished the spring "
            "triathlon race today. Her bike also needs new brake pads and a chain.",
            at=NOW - timedelta(days=2))
        remember(engine, index, "Ann watched a triathlon race on television.",
                 at=NOW - timedelta(days=3))
        ports = Ports(embedder=EMBEDDER, index=index, clock=lambda: NOW)
        request = build_request("which triathlon race has Ann finished", scope=ANN, k=3)

        def ranked(sentence: float) -> list[MemoryCard]:
            weights = RankWeights(sentence=sentence, context=0.0)
            return search(engine=engine, ports=ports, request=request, weights=weights).flat()

        on, off = ranked(0.3), ranked(0.0)
        assert on[0].id == turn.id
        # Without it, the short statement that shares more of the query's words comes first.
        assert off[0].id != turn.id
        assert "sentence" in on[0].routes
        assert all("sentence" not in c.routes for c in off)
        assert index.search_sentences(
            EMBEDDER.embed(["finished the spring triathlon race"], kind="query")[0],
            where=IndexFilter(scope=ANN, now=NOW), limit=5)[0].id == turn.id


@pytest.fixture(scope="module")
def usem() -> Iterator[Embedder]:
    from sleepmem.adapters.embedders import UsemEmbedder

    yield UsemEmbedder(threads=blas_threads())


class TestTheSentenceRouteAsksWhatNotWhom:
    """Two friends talk; each turn is one memory under its speaker. A sentence embedder
    weighs a name so heavily that a question naming Melanie matches every line that greets
    her better than the line that answers it, so sentences are indexed without their
    speaker and the route asks the question without the people it names."""

    TURNS = (
        "Caroline: Wow, Melanie, that's amazing! I'm so happy for you, Melanie.",
        "Melanie: Thanks, Caroline! What have you been up to lately? Anything fun?",
        "Caroline: Great job, Melanie! You always inspire me. Keep it up, Melanie!",
        "Melanie: We went camping by the lake last weekend. The two younger kids love "
        "nature and spotting birds.",
        "Caroline: I painted a sunrise over the lake. It took me three whole weekends.",
    )

    def test_the_answer_is_the_sentence_routes_first_hit_in_english(
        self, engine: Engine, usem: Embedder
    ) -> None:
        index = MemoryIndex()
        index.ensure(dim=usem.dim)
        try:
            mems = [store_memory(engine, index, ANN, turn, at=NOW - timedelta(days=9 - i),
                                 source="user", embedder=usem)
                    for i, turn in enumerate(self.TURNS)]
            answer = mems[3]
            where = IndexFilter(scope=ANN, now=NOW)
            plan = understand("What do Melanie's kids like?", NOW)
            assert plan.about == "What do kids like?"
            vectors = usem.embed(plan.embedded(), kind="query")
            about = index.search_sentences(vectors[-1], where=where, limit=5)
            assert about[0].id == answer.id
            # Why: with the name kept, a greeting of Melanie's outranks the answer.
            named = index.search_sentences(vectors[0], where=where, limit=5)
            assert named[0].id != answer.id
            _cards, trace = traced(engine, index, "What do Melanie's kids like?", k=3,
                                   embedder=usem)
            assert route_named(trace, "sentence").hits[0].id == answer.id
        finally:
            index.close()

    TURNS_ZH = (
        "小丽：哇，小美，太棒了！小美，我真为你高兴。",
        "小美：谢谢你，小丽！你最近在忙什么？有什么好玩的吗？",
        "小丽：小美，干得好！你总是激励着我。继续加油，小美！",
        "小美：上周末我们去湖边露营了。两个小一点的孩子很喜欢大自然，也喜欢看鸟。",
        "小丽：我画了一幅湖上的日出。花了我整整三个周末。",
    )

    def test_in_chinese_the_people_are_the_speakers_the_scope_knows(
        self, engine: Engine, index: VectorIndex
    ) -> None:
        # Chinese has no capitals to spot 小美 by. The turns' speakers ("小美：…") become
        # the scope's people in the entity graph; a question naming one links to her and
        # is asked of the sentence route without her name.
        mems = [remember(engine, index, turn, at=NOW - timedelta(days=9 - i), source="user")
                for i, turn in enumerate(self.TURNS_ZH)]
        with Session(engine) as session:
            known = entity_store.load_known(session, scope_key=mems[0].scope_key)
            delta = entity_graph.build(known=known, new=mems, now=NOW)
            entity_store.write(session, delta=delta, now=NOW)
            session.commit()
        query = "小美的孩子喜欢什么？"
        assert people_named(engine=engine, scope=ANN, query=query) == ["小美"]
        assert people_named(engine=engine, scope=ANN, query="What do Melanie's kids like?") == []
        assert understand(query, NOW).about == query
        assert understand(query, NOW, ["小美"]).about == "孩子喜欢什么？"
        reached = {h.id for h in entity_route(engine=engine, scope=ANN, query=query, limit=10)}
        assert mems[3].id in reached
        _cards, trace = traced(engine, index, query, k=3)
        assert trace.routes[0].name == "dense"
        sentence = route_named(trace, "sentence")
        about = index.search_sentences(EMBEDDER.embed(["孩子喜欢什么？"], kind="query")[0],
                                       where=IndexFilter(scope=ANN, now=NOW), limit=50)
        assert [h.id for h in sentence.hits] == [h.id for h in about]

    def test_a_question_without_names_is_embedded_once(self) -> None:
        plan = understand("what do my kids like", NOW)
        assert plan.embedded() == ["what do my kids like"]
        assert plan.about_index() == 0

    def test_the_question_without_names_is_found_after_its_parts_and_rewrites(self) -> None:
        plan = replace(
            understand("What did Mel paint and where did Ann study music?", NOW),
            rewrites=("Mel's paintings",),
        )
        assert plan.parts and plan.about == "What did paint and where did study music?"
        assert plan.embedded()[plan.about_index()] == plan.about
        assert plan.about_index() == len(plan.embedded()) - 1


class TestWordsThatPickAmongAnswers:
    @pytest.mark.parametrize(
        ("query", "asked_about", "says_the_word"),
        [
            ("Which streaming service did I start using most recently?",
             "Ann started using a new streaming service, Hulu.",
             "Ann has recently been baking sourdough bread."),
            ("What is the latest gadget I bought?",
             "Ann bought a gadget: a smart watch.", "Ann read the latest news on the train."),
            ("Which hike did I do earliest this year?",
             "Ann did the hike up Mount Tam this year.", "Ann woke at the earliest light."),
            ("What have I been reading lately?",
             "Ann has been reading a novel by Le Guin.", "Lately Ann sleeps badly."),
            ("Which streaming service did I start using most recently?",
             "Ann started using a new streaming service, Hulu.",
             "Ann moved to Oslo, recently adopted a cat and most days cycles to work."),
            ("我最近开始用哪个流媒体服务？", "安开始用一个新的流媒体服务。", "安最近在学做面包。"),
            ("我最早养的宠物是什么？", "安养的第一个宠物是一只猫。", "安最早到了办公室。"),
        ],
    )
    def test_a_memory_that_only_repeats_the_word_is_not_found_by_the_words(
        self, engine: Engine, index: VectorIndex, query: str, asked_about: str,
        says_the_word: str,
    ) -> None:
        # "recently" / 最近 in a statement is filler: matching it would put whatever says
        # it next to what the question asks about.
        crowd(engine, index)
        answer = remember(engine, index, asked_about)
        filler = remember(engine, index, says_the_word)
        found = route_ids(engine, index, query, "lexical")
        assert found[0] == answer.id
        assert filler.id not in found
