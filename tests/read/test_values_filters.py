"""A stored-value search's filter is judged in SQL as far as SQL can judge it exactly, on
SQLite and on PostgreSQL, and in Python (``matches``) always: SQL only narrows the read, so
the search keeps exactly the rows ``matches`` keeps, whichever filter, whichever database.
A filtered search over many rows reads only the rows that may match. Puts with ``index``
are kept on both databases too."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
import redis as redis_lib
from sqlalchemy.engine import Engine
from sqlmodel import Session

from sleepmem.core.errors import ValidationError
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import Scope
from sleepmem.pipelines import values as repo
from sleepmem.resources import Resources
from sleepmem.values import Values

SCOPE = {"tenant": "acme", "agent": "bot"}
NS = ("bot", "things")

# Rows that tempt a pushed-down filter to get it wrong: numbers beside numeric strings and
# bools, huge and tiny numbers, nested objects beside lists and strings, missing fields,
# keys SQL paths must quote, non-ASCII and NUL in strings.
ROWS: dict[str, dict[str, Any]] = {
    "pet3": {"kind": "pet", "age": 3, "meta": {"colour": "red", "size": {"cm": 30}}},
    "pet9": {"kind": "pet", "age": 9.5, "meta": {"colour": "blue", "size": {"cm": 31.5}}},
    "car-str": {"kind": "car", "age": "5", "meta": {"colour": "red", "extra": 1}},
    "car-true": {"kind": "car", "age": True, "n": 1},
    "car-one": {"kind": "car", "age": 1, "n": 1.0},
    "car-zero": {"kind": "car", "age": 0, "n": False},
    "boat": {"kind": "boat"},
    "nulls": {"kind": None, "age": None, "meta": None},
    "lists": {"kind": ["pet"], "age": [3], "meta": [{"colour": "red"}], "tags": ["a", "b"]},
    "confused": {"kind": {"colour": "red"}, "meta": "red", "age": {"$gt": 1}},
    "big": {"kind": "num", "age": 2**60 + 1},
    "huge": {"kind": "num", "age": 10**30},
    "tenth": {"kind": "num", "age": 0.1},
    "tiny": {"kind": "num", "age": 1e-300},
    "negzero": {"kind": "num", "age": -0.0},
    "negative": {"kind": "num", "age": -7},
    "dotted": {"a.b": "dotted", "a": {"b": "nested"}, "sp ace": "x", "a[0]": "bracket"},
    "unicode": {"ü": "ü", "café": "北京 🚲", "kind": "Pet"},
    "nul": {"kind": "pet", "note": "x\x00y", "age": 3},
    "space": {"kind": "pet ", "age": 3.0},
    "quoted": {'quo"te': "x", "kind": "quote"},
}

FILTERS: list[dict[str, Any]] = [
    # strings
    {"kind": "pet"}, {"kind": {"$eq": "pet"}}, {"kind": "Pet"}, {"kind": "pet "},
    {"kind": {"$ne": "pet"}}, {"kind": "nobody"}, {"kind": {"$gt": "car"}},
    {"note": "x\x00y"}, {"ü": "ü"}, {"café": "北京 🚲"},
    # numbers beside numeric strings and bools
    {"age": 3}, {"age": {"$eq": 3}}, {"age": 3.0}, {"age": "5"}, {"age": 5}, {"age": 9.5},
    {"age": {"$gt": 3}}, {"age": {"$gte": 3, "$lt": 10}}, {"age": {"$lte": 9.5}},
    {"age": {"$gt": 3, "$ne": 9.5}}, {"age": {"$gt": "4"}},
    {"age": 1}, {"age": 1.0}, {"age": True}, {"age": 0}, {"age": False}, {"n": 1}, {"n": False},
    {"age": {"$gte": 1}}, {"age": {"$lt": 1}}, {"age": {"$gt": 0}}, {"age": {"$lt": 0}},
    {"age": {"$lte": 0}}, {"age": {"$gte": 0.0}},
    {"age": 2**60 + 1}, {"age": 2**60}, {"age": {"$gt": 2**60}}, {"age": {"$gte": 2**60 + 1}},
    {"age": {"$lt": 2**60 + 1}}, {"age": 10**30}, {"age": {"$gt": 1e29}},
    {"age": {"$lt": -1e300}}, {"age": 0.1}, {"age": {"$lt": 0.1}}, {"age": {"$lte": 0.1}},
    {"age": {"$gt": 0.1}}, {"age": {"$gte": 1e-300}}, {"age": 1e-300}, {"age": -7},
    {"age": {"$gt": math.inf}}, {"age": {"$lt": math.inf}}, {"age": math.nan},
    # nested objects
    {"meta": {"colour": "red"}}, {"meta": {"colour": {"$eq": "red"}}},
    {"meta": {"size": {"cm": {"$gte": 30}}}}, {"meta": {"size": {"cm": 31.5}}},
    {"meta": {"colour": "red", "extra": 1}}, {"meta": {}}, {"meta": "red"},
    {"kind": "car", "meta": {"colour": "red"}},
    # missing fields, nulls, lists
    {"missing": "x"}, {"missing": None}, {"age": None}, {"missing": {"$ne": 3}},
    {"tags": ["a", "b"]}, {"kind": ["pet"]}, {"age": [3]},
    # keys a SQL path has to quote, or cannot name
    {"a.b": "dotted"}, {"a": {"b": "nested"}}, {"sp ace": "x"}, {"a[0]": "bracket"},
    {'quo"te': "x"},
    # several conditions at once
    {"kind": "pet", "age": {"$gt": 100}}, {"kind": "pet", "age": 3, "meta": {"colour": "red"}},
]


@pytest.fixture
def values(settings: Settings, redis: redis_lib.Redis, keys: Keys,
           engine: Engine) -> Iterator[Values]:
    """The value use-case on the test's database (SQLite, then PostgreSQL)."""
    res = Resources(settings=settings, redis=redis, engine=engine, keys=keys,
                    redis_url=settings.redis_url, broker_url=settings.redis_url)
    yield Values(res)


@pytest.fixture
def stored(values: Values) -> dict[str, dict[str, Any]]:
    """ROWS put under NS, as read back (what the search judges)."""
    for key, value in ROWS.items():
        values.put_value(NS, key, value, scope=SCOPE)
    back = values.search_values(NS, scope=SCOPE, limit=1000)
    assert {v.key for v in back} == set(ROWS)
    return {v.key: v.value for v in back}


def sql_read(values: Values, spec: dict[str, Any]) -> set[str]:
    """The keys SQL alone lets through for ``spec`` (before matches judges them)."""
    where = repo.filter_clause(spec=spec, dialect=values.res.engine.dialect.name)
    with Session(values.res.engine) as session:
        return {row.key for row in repo.scan(session, scope=Scope(**SCOPE),
                                             namespace_prefix=".".join(NS),
                                             now=values._now(), where=where)}


class TestAFilteredSearchKeepsExactlyWhatMatchesKeeps:
    @pytest.mark.parametrize("spec", FILTERS, ids=repr)
    def test_on_sqlite_and_postgresql(self, values: Values, stored: dict[str, dict[str, Any]],
                                      spec: dict[str, Any]) -> None:
        expected = {key for key, value in stored.items() if repo.matches(value, spec)}
        assert sql_read(values, spec) >= expected  # SQL never loses a row
        found = values.search_values(NS, scope=SCOPE, filter=spec, limit=1000)
        assert {v.key for v in found} == expected

    def test_and_sql_does_the_narrowing_for_strings_numbers_and_nested_fields(
        self, values: Values, stored: dict[str, dict[str, Any]]
    ) -> None:
        # NUL in a value: PostgreSQL cannot read its fields, so SQL lets it through there.
        nul = {"nul"} if values.res.engine.dialect.name == "postgresql" else set()
        assert sql_read(values, {"kind": "pet"}) == {"pet3", "pet9", "nul"}
        assert sql_read(values, {"age": 9.5}) == {"pet9"} | nul
        assert sql_read(values, {"age": {"$gte": 2**60}}) == {"big", "huge"} | nul
        assert sql_read(values, {"meta": {"size": {"cm": {"$lt": 31}}}}) == {"pet3"} | nul
        assert sql_read(values, {"a.b": "dotted", "sp ace": "x"}) == {"dotted"} | nul

    def test_and_a_value_sqlite_cannot_parse_is_left_to_python(self, values: Values) -> None:
        if values.res.engine.dialect.name != "sqlite":
            pytest.skip("PostgreSQL's json refuses NaN on write")
        values.put_value(NS, "nan", {"kind": "pet", "score": math.nan}, scope=SCOPE)
        values.put_value(NS, "dog", {"kind": "dog", "score": 1.5}, scope=SCOPE)
        assert sql_read(values, {"kind": "pet"}) == {"nan"}
        assert [v.key for v in values.search_values(NS, scope=SCOPE,
                                                    filter={"kind": "pet"})] == ["nan"]
        assert [v.key for v in values.search_values(NS, scope=SCOPE,
                                                    filter={"score": {"$gt": 1}})] == ["dog"]

    @pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
    def test_but_leaves_bools_nulls_lists_ne_and_zero_or_one_to_python(
        self, dialect: str
    ) -> None:
        for spec in ({"age": True}, {"age": None}, {"tags": ["a", "b"]}, {"kind": {"$ne": "x"}},
                     {"age": 1}, {"age": 0.0}, {"meta": {}}, {"kind": {"$gt": "a"}},
                     {"age": math.nan}, {"age": math.inf}, {"note": "x\x00y"}):
            assert repo.pushable(spec=spec, dialect=dialect) == [], spec
        assert repo.filter_clause(spec={"age": True}, dialect=dialect) is None

    def test_and_keys_sqlite_cannot_name_to_python_on_sqlite(self) -> None:
        for key in ('quo"te', "ü", "back\\slash", "tab\t"):
            assert repo.pushable(spec={key: "x"}, dialect="sqlite") == [], key
            assert repo.pushable(spec={key: "x"}, dialect="postgresql") != [], key


class TestAFilteredSearchOverManyRows:
    def test_reads_only_the_rows_that_may_match(self, values: Values,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
        for n in range(300):
            values.put_value(NS, f"k{n}", {"n": n, "parity": "even" if n % 2 == 0 else "odd",
                                           "doc": {"page": n % 10}}, scope=SCOPE)
        read: list[str] = []
        real_scan = repo.scan

        def counting_scan(*args: Any, **kwargs: Any) -> Iterator[Any]:
            for row in real_scan(*args, **kwargs):
                read.append(row.key)
                yield row

        monkeypatch.setattr(repo, "scan", counting_scan)

        def search(spec: dict[str, Any]) -> set[str]:
            read.clear()
            return {v.key for v in values.search_values(NS, scope=SCOPE, filter=spec,
                                                        limit=1000)}

        assert search({"n": {"$gte": 290}}) == {f"k{n}" for n in range(290, 300)}
        assert len(read) == 10
        assert search({"parity": "odd", "n": {"$lt": 20}}) == {f"k{n}" for n in range(1, 20, 2)}
        assert len(read) == 10
        assert len(search({"doc": {"page": 7}})) == 30 and len(read) == 30
        # What SQL cannot judge exactly is read whole and judged in Python.
        assert len(search({"parity": {"$ne": "odd"}})) == 150 and len(read) == 300


class TestAQueryOnIndexedFields:
    def test_field_paths_read_the_text_langgraph_reads_there(self) -> None:
        doc = {"title": "Lyon walk", "body": "bring the cat",
               "chapters": [{"text": "river kayak"}, {"text": "old town"}],
               "meta": {"tags": ["canoe", "bridge"]}, "count": 7}

        def words(*fields: str) -> set[str]:
            return repo.indexed_words(doc, fields=list(fields))

        assert words("$") == repo.indexed_words(doc, fields=None) == repo.words(doc)
        assert repo.indexed_words(doc, fields=[]) == set()
        assert "cat" not in words("title") and "lyon" in {w.lower() for w in words("title")}
        assert words("chapters[*].text") == words("chapters[0].text") | words("chapters[1].text")
        assert words("{title,body}") == words("title") | words("body")
        assert words("meta.tags[-1]") == words("meta.tags[1]") != words("meta.tags[0]")
        assert words("missing", "meta.tags[9]") == set()
        assert repo.query_score(doc, "cat", fields=["title"]) == 0.0
        assert repo.query_score(doc, "cat", fields=["title", "body"]) == 1.0


class TestIndexIsKeptOnBothDatabases:
    def test_index_false_hides_from_queries_and_fields_narrow_them(self, values: Values) -> None:
        values.put_value(NS, "off", {"title": "Lyon"}, scope=SCOPE, index=False)
        values.put_value(NS, "title", {"title": "Paris", "body": "Lyon"}, scope=SCOPE,
                         index=["title"])
        values.put_value(NS, "all", {"title": "Nice", "body": "Lyon"}, scope=SCOPE)

        def found(query: str) -> list[str]:
            return [v.key for v in values.search_values(NS, scope=SCOPE, query=query)]

        assert found("Lyon") == ["all"]
        assert found("Paris") == ["title"]
        assert {v.key for v in values.search_values(NS, scope=SCOPE, filter={})} == {
            "off", "title", "all"}
        assert values.get_value(NS, "off", scope=SCOPE) is not None

    @pytest.mark.parametrize("bad", [True, 0, "title", [], [""], [None], ["a[x]"], ["a]"],
                                     ["{a,}"], ["x" * 300], ["t"] * 40], ids=repr)
    def test_a_bad_index_is_refused_naming_the_field(self, values: Values, bad: Any) -> None:
        with pytest.raises(ValidationError) as refused:
            values.put_value(NS, "k", {"v": 1}, scope=SCOPE, index=bad)
        assert refused.value.field == "index"
        assert values.get_value(NS, "k", scope=SCOPE) is None
