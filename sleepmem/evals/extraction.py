"""LoCoMo extraction: do the structured memories consolidation leaves say what annotators read?

Each LoCoMo sample's ``observation`` field lists, per session and speaker, the facts an
annotator read from the conversation, each with the turn(s) it came from (``dia_id``). The
conversations are ingested and consolidated exactly as :mod:`sleepmem.evals.locomo` does
(one user scope per sample, each turn a ``user`` event whose id names its dia_id), then the
current memories are read back and scored against the observations:

- coverage: the share of observations with a current *structured* memory whose provenance
  holds one of the observation's evidence turns. Structured = any memory type but the
  episode/event and summary types, and no chitchat (``details["chitchat"]``).
- same-thing: the share of observations with such a memory (same provenance rule) that
  :class:`Matcher` judges to state the same thing, at ``threshold``; the best score per
  observation is reported as quantiles.
- unmatched: the share of current structured memories of a conversation that match no
  observation of that conversation.

The same two observation figures are also given against memories of any type (events
included), which says how much of what annotators read sleeps in episodes only.

Matcher: raw embedder cosine between an observation ("Ana adopted a beagle") and a memory
("Ana: I adopted a beagle ...") is low even when both say the same thing, so both sides are
normalised first (a ``Name:`` line prefix is read as that line's speaker, first person is
mapped to the speaker's name, lowercase), each memory line is scored on its own (an episode
holds a context turn and a reply), and the score mixes the embedder's cosine with the share
of the observation's content words (crudely lemmatised) found in the line. The threshold is
calibrated against hand-labelled pairs (``data/extraction_labels.json``), which hold only
keys and a hash of the memory statement, never LoCoMo text; ``calibrate`` recomputes the
matcher's agreement with them on a fresh consolidation. The 100 pairs were drawn by
``sample_pairs`` (seed 39) from a dev8 consolidation, spread over the score range of the
matcher's first version (before the other-subject factor): 40 pairing an observation with the
best structured memory from its evidence turn or a turn up to two away, 60 with the best
memory of any type there (in all 42 structured memories and 58 episodes); "same" meant
that a reader of the memory alone learns what the observation says (its main claim, with
the right person).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlmodel import Session, col, select

from sleepmem.core.errors import ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.evals.harness import eval_instance
from sleepmem.evals.locomo import (
    Conversation,
    conversation_of,
    ingest_conversation,
    normalise_evidence,
    read_samples,
)
from sleepmem.models import CURRENT_STATUSES, Memory
from sleepmem.pipelines.ports import Embedder
from sleepmem.resources import Resources

log = get_logger("sleepmem.evals.extraction")

# Chosen on the 100 hand-labelled pairs of data/extraction_labels.json (see ``calibrate``):
# the threshold with the best accuracy there.
DEFAULT_THRESHOLD = 0.38
# Weight of the embedder's cosine in the score; the rest is content-word overlap.
COSINE_WEIGHT = 0.5
# A memory line spoken by someone other than the observation's subject, which does not name
# the subject either, is about someone else: its score is multiplied by this.
OTHER_SUBJECT = 0.6
# Memory types that are not structured memories (episodes and their summaries).
UNSTRUCTURED_TYPES = frozenset({"event", "episode", "summary"})
LABELS = Path(__file__).resolve().parent / "data" / "extraction_labels.json"
# Turns either side of an evidence turn (same session) whose memories are calibration
# candidates ("from the evidence turn or nearby").
NEARBY = 2
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
_OBSERVATION_KEY = re.compile(r"^session_(\d+)_observation$")


# -- the matcher --------------------------------------------------------------------------

_STOPWORDS_TEXT = """
    a an the and or but if of to in on at by for with from about as into over after before
    up down out off so than then too very just also still even really quite pretty much
    is am are was were be been being do does did doing done have has had having
    will would shall should can could may might must gonna wanna gotta
    it its it's this that these those there here what which who whom whose when where why
    how all any some each every both few more most other such no not nor only own same
    he him his she her hers they them their theirs we us our ours you your yours i me my
    mine myself yourself himself herself themselves ourselves one ones thing things
    s t d ll m re ve yeah yes oh wow hey hi thanks thank lol haha like well okay ok
"""
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_IRREGULAR = {
    "went": "go", "gone": "go", "goes": "go", "going": "go", "did": "do", "does": "do",
    "done": "do", "made": "make", "took": "take", "taken": "take", "got": "get",
    "gotten": "get", "saw": "see", "seen": "see", "bought": "buy", "felt": "feel",
    "found": "find", "began": "begin", "begun": "begin", "ran": "run", "wrote": "write",
    "written": "write", "met": "meet", "left": "leave", "told": "tell", "thought": "think",
    "kids": "kid", "children": "child", "child": "child", "people": "person", "ate": "eat",
    "eaten": "eat", "gave": "give", "given": "give", "came": "come", "knew": "know",
    "known": "know", "taught": "teach", "brought": "bring", "kept": "keep", "held": "hold",
    "won": "win", "lost": "lose", "spent": "spend", "built": "build", "sang": "sing",
    "sung": "sing", "drew": "draw", "drawn": "draw", "flew": "fly", "grew": "grow",
    "grown": "grow", "read": "read", "said": "say", "heard": "hear", "sold": "sell",
    "paid": "pay", "joined": "join", "having": "have", "has": "have", "had": "have",
    "is": "be", "was": "be", "were": "be", "are": "be", "am": "be", "been": "be",
    "fam": "family", "edu": "education", "mom": "mother", "dad": "father",
}
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
_LINE_PREFIX = re.compile(r"^\s*([^\W\d_][\w .'-]{0,40}?):\s+(.*)$", re.DOTALL)
# First person, longest forms first; {s} is the speaker's name.
_FIRST_PERSON: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), repl)
    for pattern, repl in (
        (r"\bI\s*'?\s*m\b", "{s} is"),
        (r"\bI am\b", "{s} is"),
        (r"\bI\s*'\s*ve\b", "{s} has"),
        (r"\bI\s*'\s*d\b", "{s} would"),
        (r"\bI\s*'\s*ll\b", "{s} will"),
        (r"\bmyself\b", "{s}"),
        (r"\bmine\b", "{s}'s"),
        (r"\bmy\b", "{s}'s"),
        (r"\bme\b", "{s}"),
        (r"\bI\b", "{s}"),
    )
)

def lemma(word: str) -> str:
    """A crude English lemma: irregular forms by table, else common suffixes stripped."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ied"):
        return w[:-3] + "y"
    elif len(w) > 4 and (w.endswith("ed") or (w.endswith("es") and w[-3] in "sxz")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    # Undo the doubled consonant and the dropped e of stems ("planned", "making").
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]
    return w.rstrip("e") if len(w) > 3 else w


def content_words(text: str) -> frozenset[str]:
    """Lemmas of a text's words, stopwords dropped."""
    out = set()
    for token in _WORD.findall(text.lower().replace("’", "'")):
        if token in _STOPWORDS or (token.endswith("'s") and token[:-2] in _STOPWORDS):
            continue
        out.add(lemma(token))
    return frozenset(w for w in out if w and w not in _STOPWORDS)


def third_person(text: str, speaker: str) -> str:
    """First person mapped to the speaker's name ("I went" -> "Ana went"). Second person is
    left alone: mapping it to the other speaker made another's words ("you found a class")
    read as the subject's own, which the hand labels do not count as the same thing."""
    if not speaker:
        return text
    for pattern, repl in _FIRST_PERSON:
        text = pattern.sub(repl.format(s=speaker), text)
    return text


def statement_lines(statement: str, speakers: Iterable[str], default: str) -> list[tuple[str, str]]:
    """(speaker, text) per line of a memory statement: a ``Name:`` prefix naming one of the
    conversation's speakers is read as that line's speaker, else ``default`` spoke it."""
    known = {s.lower(): s for s in speakers}
    out: list[tuple[str, str]] = []
    for line in statement.splitlines():
        if not line.strip():
            continue
        m = _LINE_PREFIX.match(line)
        if m and m.group(1).strip().lower() in known:
            out.append((known[m.group(1).strip().lower()], m.group(2).strip()))
        else:
            out.append((default, line.strip()))
    return out


def normalise(text: str, speaker: str) -> str:
    """Both sides as the matcher compares them: third person, lowercase."""
    return " ".join(third_person(text, speaker).lower().split())


def overlap(observation: frozenset[str], memory: frozenset[str]) -> float:
    """The share of the observation's content words found in the memory."""
    if not observation:
        return 0.0
    return len(observation & memory) / len(observation)


@dataclass(frozen=True, slots=True)
class Side:
    """One text to compare: who said it (for first person) and what."""

    speaker: str
    text: str


class Matcher:
    """Scores "states the same thing" between observations and memory statements.

    score = w * cosine(normalised texts) + (1 - w) * overlap(content words), per memory line,
    times ``OTHER_SUBJECT`` when the line is another speaker's and does not name the
    observation's speaker; the best line counts. A pair states the same thing at
    ``score >= threshold``.
    """

    def __init__(self, embedder: Embedder, *, threshold: float = DEFAULT_THRESHOLD,
                 cosine_weight: float = COSINE_WEIGHT) -> None:
        self.embedder = embedder
        self.threshold = threshold
        self.cosine_weight = cosine_weight

    def scores(self, observations: Sequence[Side], memories: Sequence[Sequence[Side]]
               ) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The score matrix, one row per observation and one column per memory (each memory
        given as its lines)."""
        out = np.zeros((len(observations), len(memories)), dtype=np.float64)
        if not observations or not memories:
            return out
        lines = [line for mem in memories for line in mem]
        owner = np.array([j for j, mem in enumerate(memories) for _ in mem], dtype=np.int64)
        obs_text = [normalise(o.text, o.speaker) for o in observations]
        line_text = [normalise(m.text, m.speaker) for m in lines]
        cosine = self._cosine(obs_text, line_text)
        obs_words = [content_words(t) for t in obs_text]
        line_words = [content_words(t) for t in line_text]
        words = np.array([[overlap(o, m) for m in line_words] for o in obs_words],
                         dtype=np.float64)
        w = self.cosine_weight
        per_line = w * cosine + (1.0 - w) * words
        for i, o in enumerate(observations):
            if not o.speaker:
                continue
            name = o.speaker.lower()
            for k, m in enumerate(lines):
                if m.speaker and m.speaker != o.speaker and name not in line_text[k]:
                    per_line[i, k] *= OTHER_SUBJECT
        out.fill(-np.inf)
        for j in range(len(memories)):
            cols = per_line[:, owner == j]
            if cols.shape[1]:
                out[:, j] = cols.max(axis=1)
        out[np.isneginf(out)] = 0.0
        return out

    def score(self, observation: Side, memory: Sequence[Side]) -> float:
        return float(self.scores([observation], [memory])[0, 0])

    def same(self, observation: Side, memory: Sequence[Side]) -> bool:
        return self.score(observation, memory) >= self.threshold

    def _cosine(self, left: list[str], right: list[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
        vectors = self.embedder.embed([*left, *right], kind="document")
        a, b = vectors[: len(left)], vectors[len(left) :]
        return np.clip(np.asarray(a @ b.T, dtype=np.float64), 0.0, 1.0)


# -- observations and memories ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observation:
    sample_id: str
    session_key: str
    speaker: str
    index: int
    text: str
    evidence: tuple[str, ...]

    @property
    def dia_id(self) -> str:
        return ",".join(self.evidence)

    @property
    def key(self) -> tuple[str, str, str, int, str]:
        return (self.sample_id, self.session_key, self.speaker, self.index, self.dia_id)


@dataclass(frozen=True, slots=True)
class MemoryRow:
    id: str
    type: str
    status: str
    statement: str
    turns: frozenset[str]  # dia ids of the provenance
    speaker: str
    chitchat: bool

    @property
    def structured(self) -> bool:
        return self.type not in UNSTRUCTURED_TYPES and not self.chitchat

    @property
    def digest(self) -> str:
        return statement_hash(self.statement)


def statement_hash(statement: str) -> str:
    return hashlib.sha256(statement.encode("utf-8")).hexdigest()


def observations_of(sample: dict[str, Any], conv: Conversation) -> tuple[list[Observation], int]:
    """A sample's observations in file order, and how many name no turn of the conversation
    (those are left out). Evidence naming some unknown turns keeps the known ones."""
    known = {t.dia_id for t in conv.turns}
    out: list[Observation] = []
    dropped = 0
    raw = sample.get("observation") or {}
    keys = sorted((int(m.group(1)), k) for k in raw if (m := _OBSERVATION_KEY.match(k)))
    for _n, key in keys:
        for speaker, items in (raw[key] or {}).items():
            for index, item in enumerate(items):
                text, cited = str(item[0]), item[1] if len(item) > 1 else []
                evidence = [d for d in normalise_evidence(
                    cited if isinstance(cited, list) else [cited]) if d in known]
                if not evidence:
                    dropped += 1
                    continue
                out.append(Observation(conv.sample_id, key, str(speaker), index, text,
                                       tuple(dict.fromkeys(evidence))))
    return out, dropped


def memories_of(res: Resources, conv: Conversation) -> list[MemoryRow]:
    """The scope's current memories, their provenance mapped back to dia ids."""
    by_event = {conv.event_id(t.dia_id): t for t in conv.turns}
    out: list[MemoryRow] = []
    with Session(res.engine) as session:
        rows = session.exec(
            select(Memory).where(
                col(Memory.scope_key) == conv.scope.key,
                col(Memory.status).in_(CURRENT_STATUSES),
            ).order_by(col(Memory.id))
        )
        for m in rows:
            turns = [by_event[e] for e in m.provenance if e in by_event]
            speaker = str((m.details or {}).get("speaker") or (turns[-1].speaker if turns else ""))
            out.append(MemoryRow(
                id=m.id, type=m.type, status=m.status, statement=m.statement,
                turns=frozenset(t.dia_id for t in turns), speaker=speaker,
                chitchat=bool((m.details or {}).get("chitchat")),
            ))
    return out


def speakers_of(conv: Conversation) -> list[str]:
    return list(dict.fromkeys(t.speaker for t in conv.turns))



# -- scoring -------------------------------------------------------------------------------


@dataclass(slots=True)
class Scored:
    """One conversation's observations, memories and the matcher's score matrix."""

    conv: Conversation
    observations: list[Observation]
    memories: list[MemoryRow]
    scores: np.ndarray[Any, np.dtype[np.float64]]
    dropped_observations: int = 0
    seconds: float = 0.0
    # linked[i, j]: memory j's provenance holds an evidence turn of observation i
    linked: np.ndarray[Any, np.dtype[np.bool_]] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.bool_))

    @property
    def structured(self) -> np.ndarray[Any, np.dtype[np.bool_]]:
        return np.array([m.structured for m in self.memories], dtype=np.bool_)


def score_conversation(matcher: Matcher, conv: Conversation, observations: list[Observation],
                       memories: list[MemoryRow]) -> Scored:
    speakers = speakers_of(conv)
    sides = [[Side(s, t) for s, t in statement_lines(m.statement, speakers, m.speaker)]
             for m in memories]
    scores = matcher.scores([Side(o.speaker, o.text) for o in observations], sides)
    linked = np.array([[bool(m.turns & set(o.evidence)) for m in memories]
                       for o in observations], dtype=np.bool_).reshape(
                           len(observations), len(memories))
    return Scored(conv, observations, memories, scores, linked=linked)


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    arr = np.asarray(values, dtype=np.float64)
    out: dict[str, float] = {"n": len(values), "min": round(float(arr.min()), 4)}
    for q in QUANTILES:
        out[f"p{round(q * 100)}"] = round(float(np.quantile(arr, q)), 4)
    out["max"] = round(float(arr.max()), 4)
    out["mean"] = round(float(arr.mean()), 4)
    return out


def figures(parts: Sequence[Scored], threshold: float) -> dict[str, Any]:
    """The three figures (and their context) over one or more scored conversations."""
    n_obs = covered = same = same_anywhere = 0
    covered_any = same_any = 0
    n_struct = unmatched = 0
    best_linked: list[float] = []
    best_anywhere: list[float] = []
    by_type: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    for p in parts:
        structured = p.structured
        n_obs += len(p.observations)
        by_type.update(m.type + (" (chitchat)" if m.chitchat else "") for m in p.memories)
        by_status.update(m.status for m in p.memories if m.structured)
        for i in range(len(p.observations)):
            row, link = p.scores[i], p.linked[i]
            mine = link & structured
            if mine.any():
                covered += 1
                best = float(row[mine].max())
                best_linked.append(best)
                same += best >= threshold
            if structured.any():
                best = float(row[structured].max())
                best_anywhere.append(best)
                same_anywhere += best >= threshold
            else:
                best_anywhere.append(0.0)
            if link.any():
                covered_any += 1
                same_any += float(row[link].max()) >= threshold
        n_struct += int(structured.sum())
        for j in np.flatnonzero(structured):
            if not len(p.observations) or float(p.scores[:, j].max()) < threshold:
                unmatched += 1
    return {
        "observations": n_obs,
        "memories": sum(len(p.memories) for p in parts),
        "structured_memories": n_struct,
        "coverage": _share(covered, n_obs),
        "same_thing": _share(same, n_obs),
        "unmatched": _share(unmatched, n_struct),
        "counts": {
            "covered": covered, "same_thing": same, "unmatched": unmatched,
            "same_thing_anywhere": same_anywhere,
        },
        # Same question against any structured memory of the conversation, provenance aside.
        "same_thing_anywhere": _share(same_anywhere, n_obs),
        # Best score per observation among the structured memories its evidence turns
        # produced (covered observations only), and among all the conversation's.
        "best_score_linked": _quantiles(best_linked),
        "best_score_anywhere": _quantiles(best_anywhere),
        # Against memories of any type, episodes included.
        "any_type": {
            "coverage": _share(covered_any, n_obs),
            "same_thing": _share(same_any, n_obs),
        },
        "memories_by_type": dict(sorted(by_type.items())),
        "structured_by_status": dict(sorted(by_status.items())),
    }


# -- calibration ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pair:
    observation: Observation
    memory: MemoryRow
    score: float

    def key(self) -> dict[str, Any]:
        o = self.observation
        return {"sample_id": o.sample_id, "session": o.session_key, "speaker": o.speaker,
                "index": o.index, "dia_id": o.dia_id, "statement_sha256": self.memory.digest}


def _positions(conv: Conversation) -> dict[str, tuple[int, int]]:
    """dia_id -> (session, position in the conversation)."""
    return {t.dia_id: (t.session, i) for i, t in enumerate(conv.turns)}


def candidate_pairs(p: Scored, *, structured_only: bool) -> list[Pair]:
    """Per observation, its best-scoring memory among those from its evidence turns or turns
    up to ``NEARBY`` away in the same session."""
    where = _positions(p.conv)
    out: list[Pair] = []
    for i, o in enumerate(p.observations):
        near: set[str] = set()
        for d in o.evidence:
            session, pos = where[d]
            for t in p.conv.turns[max(0, pos - NEARBY) : pos + NEARBY + 1]:
                if t.session == session:
                    near.add(t.dia_id)
        best: tuple[float, int] | None = None
        for j, m in enumerate(p.memories):
            if (structured_only and not m.structured) or not m.turns & near:
                continue
            s = float(p.scores[i, j])
            if best is None or s > best[0]:
                best = (s, j)
        if best is not None:
            out.append(Pair(o, p.memories[best[1]], best[0]))
    return out


def sample_pairs(parts: Sequence[Scored], n: int = 100, *, seed: int = 39,
                 structured_share: float = 0.4, bins: int = 10) -> list[Pair]:
    """``n`` pairs spanning the score range: the candidates cut into equal-width score bins,
    drawn from round-robin; ``structured_share`` of them pair a structured memory."""
    rng = random.Random(seed)

    def spread(pool: list[Pair], k: int) -> list[Pair]:
        if not pool or k <= 0:
            return []
        lo, hi = min(p.score for p in pool), max(p.score for p in pool)
        width = (hi - lo) / bins or 1.0
        buckets: list[list[Pair]] = [[] for _ in range(bins)]
        for p in pool:
            buckets[min(bins - 1, int((p.score - lo) / width))].append(p)
        for b in buckets:
            rng.shuffle(b)
        out: list[Pair] = []
        while len(out) < k and any(buckets):
            for b in buckets:
                if b and len(out) < k:
                    out.append(b.pop())
        return out

    structured = [q for p in parts for q in candidate_pairs(p, structured_only=True)]
    chosen = spread(structured, round(n * structured_share))
    seen = {(q.observation.key, q.memory.id) for q in chosen}
    rest = [q for p in parts for q in candidate_pairs(p, structured_only=False)
            if (q.observation.key, q.memory.id) not in seen]
    chosen += spread(rest, n - len(chosen))
    return sorted(chosen, key=lambda q: q.score)


def agreement(scored_labels: Sequence[tuple[float, bool]], threshold: float) -> dict[str, Any]:
    """Accuracy, precision and recall of ``score >= threshold`` against the labels."""
    tp = sum(1 for s, y in scored_labels if s >= threshold and y)
    fp = sum(1 for s, y in scored_labels if s >= threshold and not y)
    fn = sum(1 for s, y in scored_labels if s < threshold and y)
    tn = len(scored_labels) - tp - fp - fn
    return {
        "pairs": len(scored_labels), "same": tp + fn, "not_same": fp + tn,
        "accuracy": _share(tp + tn, len(scored_labels)),
        "precision": _share(tp, tp + fp), "recall": _share(tp, tp + fn),
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
    }


def best_threshold(scored_labels: Sequence[tuple[float, bool]]) -> float:
    """The threshold with the best accuracy on the labels (the midpoint between the two
    scores that bound it; the lowest such on ties)."""
    scores = sorted({round(s, 4) for s, _ in scored_labels})
    if not scores:
        return DEFAULT_THRESHOLD
    cuts = [scores[0]] + [(a + b) / 2 for a, b in itertools.pairwise(scores)]
    cuts.append(scores[-1] + 1e-3)
    best = max(cuts, key=lambda c: (agreement(scored_labels, c)["accuracy"], -c))
    return round(best, 4)


def read_labels(path: Path) -> list[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as fh:
        data = json.load(fh)
    labels = data["pairs"] if isinstance(data, dict) else data
    for item in labels:
        if not isinstance(item.get("same"), bool):
            raise ValidationError("labels", f"a pair without a same/not-same label: {item}")
    return list(labels)


def calibrate(parts: Sequence[Scored], labels: Sequence[dict[str, Any]], threshold: float
              ) -> dict[str, Any]:
    """The matcher's agreement with hand labels, on this run's memories; a pair whose
    observation or memory statement is not in this run is reported missing."""
    index: dict[tuple[str, str, str, int, str], tuple[Scored, int]] = {}
    for p in parts:
        for i, o in enumerate(p.observations):
            index[o.key] = (p, i)
    scored: list[tuple[float, bool]] = []
    missing = 0
    for item in labels:
        key = (str(item["sample_id"]), str(item["session"]), str(item["speaker"]),
               int(item["index"]), str(item["dia_id"]))
        found = index.get(key)
        if found is None:
            missing += 1
            continue
        p, i = found
        cols = [j for j, m in enumerate(p.memories) if m.digest == item["statement_sha256"]]
        if not cols:
            missing += 1
            continue
        scored.append((float(p.scores[i, cols].max()), bool(item["same"])))
    return {
        "labels": len(labels),
        "missing": missing,
        "threshold": threshold,
        **agreement(scored, threshold),
        "best_threshold_on_labels": best_threshold(scored),
    }


# -- the run -------------------------------------------------------------------------------


def run_extraction(
    path: Path,
    *,
    settings: Settings,
    limit_conversations: int | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    labels: Path | None = None,
    sample_to: Path | None = None,
) -> dict[str, Any]:
    """Coverage, same-thing and unmatched shares, overall and per conversation.

    ``labels``: also the matcher's agreement with those hand labels. ``sample_to``: write
    100 pairs spanning the score range, with their texts, for labelling by hand (that file
    holds LoCoMo text: keep it out of the repository).
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValidationError("threshold", "must be between 0 and 1")
    started = time.perf_counter()
    samples = read_samples(path)[:limit_conversations]
    parts: list[Scored] = []
    events = 0
    with eval_instance(settings, prefix="sleepmem-extraction-") as res:
        matcher = Matcher(res.embedder, threshold=threshold)
        for sample in samples:
            t0 = time.perf_counter()
            conv = conversation_of(sample)
            observations, dropped = observations_of(sample, conv)
            accepted, _written = ingest_conversation(res, conv)
            events += accepted
            part = score_conversation(matcher, conv, observations, memories_of(res, conv))
            part.dropped_observations = dropped
            part.seconds = time.perf_counter() - t0
            parts.append(part)
            one = figures([part], threshold)
            log.info("extraction_conversation", sample=conv.sample_id,
                     observations=one["observations"], memories=one["memories"],
                     coverage=one["coverage"], same_thing=one["same_thing"],
                     unmatched=one["unmatched"], seconds=round(part.seconds, 2))
        embedder_name = res.embedder.name
    report: dict[str, Any] = {
        "dataset": Path(path).name,
        "conversations": len(parts),
        "threshold": threshold,
        "cosine_weight": COSINE_WEIGHT,
        **figures(parts, threshold),
        "by_conversation": {
            p.conv.sample_id: {
                **{k: v for k, v in figures([p], threshold).items()
                   if k not in {"best_score_anywhere", "structured_by_status"}},
                "seconds": round(p.seconds, 1),
            }
            for p in parts
        },
        "dropped_observations": sum(p.dropped_observations for p in parts),
        "events": events,
        "embedder": embedder_name,
        "extractor": settings.extractor,
    }
    if labels is not None:
        cal = calibrate(parts, read_labels(labels), threshold)
        best = cal["best_threshold_on_labels"]
        if best != threshold:
            # What the figures would be at the threshold these labels favour.
            at_best = figures(parts, best)
            cal["figures_at_best_threshold"] = {
                k: at_best[k] for k in ("coverage", "same_thing", "unmatched",
                                        "same_thing_anywhere")
            }
        report["calibration"] = cal
    if sample_to is not None:
        pairs = sample_pairs(parts)
        Path(sample_to).write_text(json.dumps([
            {**q.key(), "score": round(q.score, 4), "memory_type": q.memory.type,
             "observation": q.observation.text, "statement": q.memory.statement, "same": None}
            for q in pairs
        ], ensure_ascii=False, indent=1), encoding="utf-8")
        report["sampled_pairs"] = {"file": str(sample_to), "pairs": len(pairs)}
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report
