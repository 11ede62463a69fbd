"""Lexical sparse vectors: the keyword half of hybrid search, in any language we expect.

Latin-script and number words are lowercased, stop-worded and lightly stemmed; CJK runs
(which have no spaces) become character unigrams *and* bigrams, so "花生" matches as a
word while a single character still matches something. Token ids are a stable 31-bit
hash, so the index written by one process is readable by every other. Documents carry
BM25 term-frequency saturation; the IDF half of BM25 comes from the index itself
(Qdrant's sparse ``modifier=IDF``), which always knows the current corpus.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter

from sleepmem.pipelines.ports import SparseVector

# BM25 constants. AVG_LEN is assumed rather than measured: memories are one-sentence
# statements, and a fixed value keeps a document's vector independent of its neighbours.
K1 = 1.2
B = 0.75
AVG_LEN = 16.0

# Han (incl. extension A and compatibility), kana. Hangul is spaced, so it stays a word.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u309f\u30a0-\u30ff"
_TOKEN = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)")

_STOPWORDS_TEXT = """
    a an the and or but if then else of to in on at by for with from into onto over under
    about as is am are was were be been being do does did doing have has had having
    i me my mine myself we us our ours you your yours he him his she her hers it its
    they them their theirs this that these those there here what which who whom whose
    so than too very just also not no nor only own same can will would shall should
    could may might must s t d ll re ve m o y
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())

# Particles that carry no topic; content characters (including 我) stay, IDF weighs them.
CJK_STOP_CHARS = frozenset("的了是在和与及也就都而着吗呢吧啊呀么之其")

# Words with which a query picks among its answers (the latest, the earliest, the one
# liked most) rather than says what they are about. Statements use them as filler ("I
# recently tried ..."), so a query matching them would favour whatever repeats the word
# over what it asks about; the time route and the dates on the cards do the ordering.
# Chinese 最 is "most"; a space keeps the words on either side of a cut from becoming
# a bigram that neither said.
_PICKING = re.compile(
    r"\b(?:most|least|recent|recently|lately|latest|earliest)\b|最近|近来|最新|最早|最晚|最",
    re.IGNORECASE,
)

_MASK31 = 0x7FFFFFFF


def _stem(word: str) -> str:
    """A light English stemmer: plurals, -ing, -ed, and a final silent e.

    Deliberately lossy and symmetric: documents and queries go through the same function,
    so "likes", "liked", "liking" and "like" all meet at "lik".
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "zes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= 3 and any(v in stem for v in "aeiouy"):
            word = stem
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    if len(word) > 3 and word.endswith("e") and not word.endswith("ee"):
        word = word[:-1]
    return word


def tokens(text: str) -> list[str]:
    """Lexical tokens of ``text`` in order, repeats kept (they are term frequency)."""
    # NFKC folds full-width letters and digits (ＡＢＣ１２３) into their ASCII forms.
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[str] = []
    for cjk, word in _TOKEN.findall(text):
        if cjk:
            out.extend(c for c in cjk if c not in CJK_STOP_CHARS)
            out.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
        elif word not in STOPWORDS:
            out.append(_stem(word))
    return out


def token_id(token: str) -> int:
    """Stable across processes and runs (unlike the salted built-in ``hash``)."""
    return zlib.crc32(token.encode("utf-8")) & _MASK31


def sparse_document(text: str) -> SparseVector:
    """BM25 tf-saturated weights of a stored statement."""
    toks = tokens(text)
    if not toks:
        return {}
    norm = K1 * (1.0 - B + B * len(toks) / AVG_LEN)
    vec: SparseVector = {}
    for tok, tf in Counter(toks).items():
        tid = token_id(tok)
        # Two tokens sharing a 31-bit hash are rare enough to merge rather than track.
        vec[tid] = vec.get(tid, 0.0) + tf * (K1 + 1.0) / (tf + norm)
    return vec


def sparse_query(text: str) -> SparseVector:
    """Each distinct query token weighs 1.0; the index multiplies in its IDF. Words that
    only pick among the answers ("most recently", 最早) are left out."""
    # Folded first, so a full-width ＭＯＳＴ is the word it reads as.
    folded = unicodedata.normalize("NFKC", text)
    return {token_id(tok): 1.0 for tok in set(tokens(_PICKING.sub(" ", folded)))}


def phrases(text: str, *, longest: int = 3) -> list[str]:
    """Every run of one to ``longest`` words of ``text`` (two to four characters of a CJK
    run) that holds a word other than a stop word: the spans a value said in other words,
    or in another language, may be ("行李员" is "a baggage handler")."""
    text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    words: list[str] = []
    for cjk, word in _TOKEN.findall(text):
        if cjk:
            out.extend(cjk[i:i + n] for n in range(2, longest + 2)
                       for i in range(len(cjk) - n + 1))
        else:
            words.append(word)
    for n in range(1, longest + 1):
        for i in range(len(words) - n + 1):
            run = words[i:i + n]
            if any(w.lower() not in STOPWORDS for w in run):
                out.append(" ".join(run))
    return list(dict.fromkeys(out))
