"""The run's sentence index: the memories it returns at a bar are exactly those a pass over
every memory's sentences finds there, whatever order memories arrive in."""

from __future__ import annotations

import numpy as np

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.pipelines import semantic
from sleepmem.pipelines.semantic import Meaning
from sleepmem.pipelines.write.neighbours import SentenceIndex, in_order

STATEMENTS = {
    "m1": "I live in Berlin. I work at a bakery near the zoo.",
    "m2": "My sister has a dog called Biscuit.",
    "m3": "I moved to Lisbon last spring. The weather is lovely.",
    "m4": "I am allergic to peanuts.",
    "m5": "We adopted a dog called Biscuit from the shelter.",
}
QUERIES = [["I live in Lisbon now."], ["Our dog is called Biscuit.", "I like peanuts."],
           ["Nothing in common here at all."]]


def _scan(meaning: Meaning, texts: list[str], bar: float) -> set[str]:
    """The pass the index replaces: every memory's sentences against the texts."""
    out = set()
    for mid, statement in STATEMENTS.items():
        parts = semantic.sentences(statement)
        if parts and float(np.max(meaning.pairwise(texts, parts))) >= bar:
            out.add(mid)
    return out


def test_the_index_finds_what_a_pass_over_every_memory_finds_at_each_bar() -> None:
    meaning = Meaning(HashingEmbedder())
    index = SentenceIndex(meaning, semantic.sentences)
    # Memories arrive between searches, as the resolver adds them: the matrix grows.
    for mid in ("m1", "m2"):
        index.add(mid, STATEMENTS[mid])
    assert index.within(["I live in Berlin"], 0.99) == {"m1"}
    for mid in ("m3", "m4", "m5"):
        index.add(mid, STATEMENTS[mid])
    assert len(index) == 5
    for texts in QUERIES:
        for bar in (0.2, 0.45, 0.6, semantic.FLOOR):
            assert index.within(texts, bar) == _scan(meaning, texts, bar - 1e-3), (texts, bar)


def test_a_dog_named_twice_is_found_and_an_unrelated_text_finds_nothing_at_the_floor() -> None:
    meaning = Meaning(HashingEmbedder())
    index = SentenceIndex(meaning, semantic.sentences)
    for mid, statement in STATEMENTS.items():
        index.add(mid, statement)
    assert {"m2", "m5"} <= index.within(["A dog called Biscuit."], 0.45)
    assert index.within(["Quarterly tax filing deadlines."], semantic.FLOOR) == set()
    assert index.within([], 0.1) == set()


def test_neighbours_come_back_in_the_order_the_resolver_keeps() -> None:
    order = {"b": 0, "a": 1, "c": 2}
    assert in_order({"a", "b", "c", "gone"}, order) == ["b", "a", "c"]
