"""An assistant's reply is embedded by its head (issue 43): the dense vector holds the turn
it answers and the reply's first sentences, while the lexical route and the card keep the
whole reply. Anyone else's memory is embedded whole."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np
import pytest

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.models import Memory, Scope
from sleepmem.pipelines.lexical import sparse_query
from sleepmem.pipelines.ports import IndexFilter, VectorIndex
from sleepmem.pipelines.write.index import (
    REPLY_HEAD_WORDS,
    dense_text,
    index_text,
    reply_head,
    upsert_memories,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = Scope(tenant="t", user="u")
CONTEXT = "User: Can you recommend some hotels in Paris near the Louvre?\n"
REPLY = (
    "Certainly! Here are some hotels near the Louvre that guests rate well. "
    "1. Hotel du Louvre: a classic with views of the museum and the Palais Royal, steps "
    "from the metro. 2. Le Meurice: luxury on the rue de Rivoli, facing the Tuileries "
    "garden. 3. Hotel Brighton: good value, with rooms overlooking the garden."
)


def episode(statement: str, *, source: str, reply_offset: int | None = None,
            type: str = "event") -> Memory:
    details = {} if reply_offset is None else {"reply_offset": reply_offset}
    return Memory(id=uuid.uuid4().hex, lineage="l", statement=statement,
                  source=source, details=details, tenant=SCOPE.tenant, user=SCOPE.user,
                  scope_key=SCOPE.key, type=type, valid_from=NOW)


class TestTheHeadOfAReply:
    def test_whole_sentences_while_they_fit(self) -> None:
        text = "One two three. Four five six. Seven eight nine ten."
        assert reply_head(text, words=6) == "One two three. Four five six."

    def test_a_first_sentence_longer_than_the_head_is_cut_at_a_word(self) -> None:
        assert reply_head("One two three four five six.", words=4) == "One two three four …"

    def test_a_short_reply_is_its_own_head(self) -> None:
        assert reply_head("Sure, happy to help.") == "Sure, happy to help."

    def test_a_lists_bare_numbers_add_nothing(self) -> None:
        head = reply_head(REPLY)
        assert head.startswith("Certainly! Here are some hotels")
        assert "Brighton" not in head and not head.endswith("3.")
        assert len(head.split()) <= REPLY_HEAD_WORDS


class TestWhatIsEmbedded:
    def test_an_assistant_episode_by_the_turn_it_answers_and_the_head(self) -> None:
        mem = episode(CONTEXT + REPLY, source="assistant", reply_offset=len(CONTEXT))
        dense = dense_text(mem)
        assert dense.startswith("User: Can you recommend some hotels in Paris")
        assert "Here are some hotels near the Louvre" in dense
        assert "Brighton" not in dense
        # The lexical route keeps every word of the reply.
        assert "Brighton" in index_text(mem)

    def test_a_users_turn_is_embedded_whole(self) -> None:
        said = "I moved to Lisbon last spring. " * 10
        mem = episode(said.strip(), source="user")
        assert dense_text(mem) == index_text(mem)

    def test_an_assistant_fact_is_embedded_whole(self) -> None:
        mem = episode(REPLY, source="assistant", type="fact")
        assert dense_text(mem) == index_text(mem)


def test_the_index_holds_the_heads_vector_and_every_word_of_the_reply(
    index: VectorIndex,
) -> None:
    embedder = HashingEmbedder()
    mem = episode(CONTEXT + REPLY, source="assistant", reply_offset=len(CONTEXT))
    upsert_memories([mem], index=index, embedder=embedder)
    where = IndexFilter(scope=SCOPE, now=NOW)
    head, whole = embedder.embed([dense_text(mem), index_text(mem)])
    assert float(np.dot(head, whole)) < 0.95  # the two texts embed apart
    hits = index.search_dense(head, where=where, limit=1)
    assert [h.id for h in hits] == [mem.id]
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert index.search_dense(whole, where=where, limit=1)[0].score < 0.95
    # A detail from the reply's tail still finds it by its words.
    assert [h.id for h in index.search_sparse(
        sparse_query("Hotel Brighton"), where=where, limit=1)] == [mem.id]
