"""Keep the vector index in step with SQL, after the SQL commit (README: Architecture).

Rows are written with ``index_state=pending``; this stage pushes them to the index and
marks them indexed. Whatever a crash leaves pending, :func:`reconcile` re-applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.models import Memory
from sleepmem.pipelines import store as repo
from sleepmem.pipelines.lexical import sparse_document
from sleepmem.pipelines.memories import own_words
from sleepmem.pipelines.persons import subjectless, unnamed
from sleepmem.pipelines.ports import Embedder, IndexPoint, VectorIndex
from sleepmem.pipelines.speakers import without_speaker
from sleepmem.pipelines.text import split_sentences
from sleepmem.pipelines.topics import topics


def payload_for(mem: Memory) -> dict[str, object]:
    return {
        "tenant": mem.tenant,
        "agent": mem.agent,
        "user": mem.user,
        "project": mem.project,
        "session": mem.session,
        "scope_key": mem.scope_key,
        "lineage": mem.lineage,
        "type": mem.type,
        "status": mem.status,
        "hidden": bool(mem.details.get("hidden", False)),
        "valid_from": mem.valid_from.timestamp(),
        "valid_to": mem.valid_to.timestamp() if mem.valid_to else None,
        "expires_at": mem.expires_at.timestamp() if mem.expires_at else None,
    }


def index_text(mem: Memory) -> str:
    """What the lexical route indexes: the statement without its generic subject, plus
    the topics it implies (see sleepmem.pipelines.topics)."""
    return _labelled(subjectless(unnamed(mem)), mem.statement)


def _labelled(body: str, statement: str) -> str:
    labels = topics(statement)
    return f"{body} ({', '.join(labels)})" if labels else body


# An assistant's reply is embedded by its head: the sentences that start it, up to about
# REPLY_HEAD_WORDS words (a first sentence longer than that is cut at a word).
REPLY_HEAD_WORDS = 40


def reply_head(text: str, words: int = REPLY_HEAD_WORDS) -> str:
    """The first sentences of ``text`` within about ``words`` words: always the first
    one (cut at its ``words``-th word when longer), then each next one that still fits."""
    kept: list[str] = []
    count = 0
    for sentence in split_sentences(text):
        n = len(_SENTENCE_WORD.findall(sentence))
        if not n:  # a list's bare number ("3."): nothing a question could match
            continue
        if kept and count + n > words:
            break
        if not kept and n > words:
            cut = list(_SENTENCE_WORD.finditer(sentence))[words - 1].end()
            return sentence[:cut] + " …"
        kept.append(sentence)
        count += n
    return " ".join(kept) if kept else text


def dense_text(mem: Memory) -> str:
    """What the dense vector embeds: :func:`index_text`, except that an assistant's
    episode keeps the turn it answers but only the head of its reply (:func:`reply_head`).

    Replies run to hundreds of words and were four fifths of every token the index stage
    embedded on LongMemEval (the embedder's cost grows with the tokens). One vector of a
    whole reply blends everything in it (the encoder pools over its tokens), so its
    details hardly stood out in it anyway: the topic it answers (the user's turn before
    it and the reply's opening) is what a question about it matches, and its details
    stay whole for the lexical route (``sparse_document`` of :func:`index_text`) and in
    the card.
    """
    if mem.source != "assistant" or mem.type != "event":
        return index_text(mem)
    reply = own_words(mem)
    head = reply_head(reply)
    if head == reply:
        return index_text(mem)
    context = mem.statement[: len(mem.statement) - len(reply)]
    return _labelled(subjectless(context + head), mem.statement)


# A sentence needs MIN_SENTENCE_WORDS words (or as many CJK characters) to say something a
# query could be after.
_SENTENCE_WORD = re.compile(r"[\u3400-\u9fff]|[^\W\d_]+", re.UNICODE)
# A question asks the other person; it tells something of its speaker only when it speaks
# of them ("Can I smoke brisket in my new smoker?").
_OF_SPEAKER = re.compile(
    r"(?i)\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|us|our|ours)\b|[我俺]")
MIN_SENTENCE_WORDS = 3
MAX_SENTENCES = 8


def own_sentences(mem: Memory) -> list[str]:
    """The sentences a memory's vector alone would blur: its own first-hand words
    (``source == "user"``), without the earlier turn a reply carries, when there are two or
    more of them; the first MAX_SENTENCES that state something.

    One vector for a turn that plans a bike ride and mentions, in passing, a triathlon
    finished today sits between the two; a question about a sports event matches the
    sentence that says so. Left out:

    - an assistant's words: long replies would add dozens of sentences each, and what the
      user said is what questions ask about;
    - the speaker's name ("Melanie: ..."): the embedder weighs a name so heavily that every
      sentence of one speaker would match a question naming them, whatever it asks (the
      statement's own vector keeps who said it, for the other routes);
    - a question to the other person ("What did you paint?"): it says nothing of the
      speaker, and being a question it would match every question asked of the index.
    """
    if mem.source != "user":
        return []
    own = without_speaker(subjectless(own_words(mem)))
    kept = [p for p in split_sentences(own) if len(_SENTENCE_WORD.findall(p)) >= MIN_SENTENCE_WORDS]
    if len(kept) < 2:
        return []
    said = [p for p in kept if not p.rstrip().endswith(("?", "？")) or _OF_SPEAKER.search(p)]
    return said[:MAX_SENTENCES]


def upsert_memories(
    memories: Iterable[Memory], *, index: VectorIndex, embedder: Embedder, batch: int = 256
) -> list[str]:
    rows = list(memories)
    done: list[str] = []
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        texts = [index_text(m) for m in chunk]
        sentences = [own_sentences(m) for m in chunk]
        # One embedding call for statements and sentences: the embedder batches best.
        vectors = embedder.embed([dense_text(m) for m in chunk]
                                 + [t for ts in sentences for t in ts], kind="document")
        points: list[IndexPoint] = []
        at = len(chunk)
        for j, m in enumerate(chunk):
            n = len(sentences[j])
            points.append(IndexPoint(
                id=m.id, vector=vectors[j], sparse=sparse_document(texts[j]),
                payload=payload_for(m), sentences=list(vectors[at : at + n]),
            ))
            at += n
        index.upsert(points)
        done.extend(m.id for m in chunk)
    return done


@dataclass(slots=True)
class IndexReport:
    upserted: int = 0
    updated: int = 0
    deleted: int = 0


def apply_to_index(
    *,
    engine: Engine,
    index: VectorIndex,
    embedder: Embedder,
    upsert: list[Memory],
    payload_only: list[Memory],
    delete: list[str],
) -> IndexReport:
    report = IndexReport()
    if delete:
        index.delete(delete)
        report.deleted = len(delete)
    ids = upsert_memories(upsert, index=index, embedder=embedder)
    report.upserted = len(ids)
    for mem in payload_only:
        index.set_payload([mem.id], payload_for(mem))
        ids.append(mem.id)
    report.updated = len(payload_only)
    with Session(engine) as session:
        repo.mark_indexed(session, ids=ids)
        session.commit()
    return report


def reconcile(
    *, engine: Engine, index: VectorIndex, embedder: Embedder, batch: int = 1000
) -> IndexReport:
    """Converge the index on SQL: push pending rows, drop points SQL no longer has."""
    report = IndexReport()
    while True:
        with Session(engine) as session:
            rows = repo.pending_index(session, limit=batch)
        if not rows:
            break
        r = apply_to_index(
            engine=engine, index=index, embedder=embedder, upsert=rows, payload_only=[], delete=[]
        )
        report.upserted += r.upserted
    point_ids = index.all_ids()
    if point_ids:
        known: set[str] = set()
        with Session(engine) as session:
            for i in range(0, len(point_ids), 1000):
                chunk = point_ids[i : i + 1000]
                known.update(session.exec(select(Memory.id).where(col(Memory.id).in_(chunk))))
        orphans = [p for p in point_ids if p not in known]
        if orphans:
            index.delete(orphans)
            report.deleted = len(orphans)
    return report
