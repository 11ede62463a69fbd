"""LongMemEval_M-like haystacks from a LongMemEval_S file: the same questions, far longer
histories.

Built the way LongMemEval_M is: each question keeps its own haystack (its evidence
sessions among its own filler) and gets more filler sessions drawn from the other
questions' haystacks. A filler session answers no question: every question's answer
sessions, and any session holding a turn marked ``has_answer``, are left out of the pool.
A filler session takes a date drawn uniformly inside the question's own date range, and
the haystack is put back in date order, so the question still comes after everything it
could have heard and "ten days ago" still means what it did.

Tiers: ``1m`` grows each haystack to 500 sessions (about 1.1M tokens, LongMemEval_M's
size); ``10m`` adds the whole filler pool (from the 102-question dev file about 4,450
sessions, about 9.5M tokens). The output is a LongMemEval JSON file (gzip) that
``sleepmem eval longmemeval --data`` reads as it reads LongMemEval_S.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sleepmem.core.errors import ValidationError
from sleepmem.evals.longmemeval import parse_date, spread

# Sessions per question; None is the whole filler pool.
TIERS: dict[str, int | None] = {"1m": 500, "10m": None}
_DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"


def read(path: Path) -> list[dict[str, Any]]:
    opener: Callable[..., Any] = gzip.open if Path(path).suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return list(json.load(fh))


def answering(questions: Sequence[dict[str, Any]]) -> set[str]:
    """Ids of every session that answers some question: its answer sessions, and any
    session with a turn marked as holding the answer."""
    out: set[str] = set()
    for q in questions:
        out.update(str(s) for s in q["answer_session_ids"])
        for sid, turns in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True):
            if any(t.get("has_answer") for t in turns):
                out.add(str(sid))
    return out


def filler_pool(questions: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every distinct session of every haystack that answers no question, by id, in the
    order first seen."""
    banned = answering(questions)
    pool: dict[str, list[dict[str, Any]]] = {}
    for q in questions:
        for sid, turns in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True):
            if str(sid) not in banned:
                pool.setdefault(str(sid), turns)
    return pool


def grow(question: dict[str, Any], pool: dict[str, list[dict[str, Any]]],
         sessions: int | None, rng: random.Random) -> dict[str, Any]:
    """``question`` with its haystack grown to ``sessions`` sessions (None: with every
    pool session it lacks), filler dated inside its own date range, in date order."""
    own = [str(s) for s in question["haystack_session_ids"]]
    candidates = [sid for sid in pool if sid not in set(own)]
    need = len(candidates) if sessions is None else sessions - len(own)
    if need > len(candidates):
        raise ValidationError(
            "sessions", f"{question['question_id']}: {sessions} sessions need {need} filler "
                        f"sessions; the pool holds {len(candidates)}")
    chosen = rng.sample(candidates, max(need, 0))
    dates = [parse_date(d) for d in question["haystack_dates"]]
    lo, hi = min(dates), max(dates)
    span = int((hi - lo).total_seconds() // 60)

    def inside() -> datetime:
        return lo + timedelta(minutes=rng.randint(0, span))

    # Own sessions first on a tie, so a filler session never slips in front of the
    # evidence it shares a minute with.
    rows = [(d, 0, sid, turns) for d, sid, turns
            in zip(dates, own, question["haystack_sessions"], strict=True)]
    rows += [(inside(), 1, sid, pool[sid]) for sid in chosen]
    rows.sort(key=lambda r: (r[0], r[1]))
    return {
        **question,
        "haystack_session_ids": [r[2] for r in rows],
        "haystack_dates": [r[0].strftime(_DATE_FORMAT) for r in rows],
        "haystack_sessions": [r[3] for r in rows],
    }


def build(src: Path, out: Path, *, tier: str, questions: int | None = None, seed: int = 0,
          count: Callable[[str], int] | None = None) -> dict[str, Any]:
    """Write the tier's file to ``out``; returns what it holds. ``questions`` keeps that
    many non-abstention questions spread over the file (the ones ``sleepmem eval
    longmemeval --questions`` picks from the source); ``count`` measures each session's
    tokens for the summary."""
    if tier not in TIERS:
        raise ValidationError("tier", f"one of {', '.join(TIERS)}")
    raw = read(src)
    pool = filler_pool(raw)
    picked = raw if questions is None else spread(
        [q for q in raw if not str(q["question_id"]).endswith("_abs")], questions)
    sizes: dict[str, int] = {}
    per_question: list[tuple[int, int]] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        fh.write("[")
        for n, q in enumerate(picked):
            grown = grow(q, pool, TIERS[tier], random.Random(f"{seed}:{q['question_id']}"))
            fh.write(("," if n else "") + json.dumps(grown, ensure_ascii=False))
            tokens = 0
            if count is not None:
                for sid, turns in zip(grown["haystack_session_ids"],
                                      grown["haystack_sessions"], strict=True):
                    if sid not in sizes:
                        sizes[sid] = count("\n".join(str(t.get("content", ""))
                                                     for t in turns))
                    tokens += sizes[sid]
            per_question.append((len(grown["haystack_session_ids"]), tokens))
        fh.write("]")
    n = max(len(per_question), 1)
    return {
        "tier": tier,
        "file": str(out),
        "questions": len(per_question),
        "filler_pool": len(pool),
        "sessions_per_question": round(sum(s for s, _t in per_question) / n, 1),
        **({"tokens_per_question": round(sum(t for _s, t in per_question) / n)}
           if count is not None else {}),
        "seed": seed,
    }
