"""The English pack's parse repairs: where the small parser misreads casual English, the
sentence is read again in a standard form ("I" put back, "'s" read as "is", chat words
and a leading time phrase left out), and the pack keeps the reading that holds."""

from __future__ import annotations

from typing import Any

from sleepmem.pipelines.language.en_values import SUBJECT_DEPS, ends, subject_of
from sleepmem.pipelines.language.en_words import (
    CHANGE_PHRASES,
    CHANGE_WORDS,
    CHAT_WORDS,
    FIRST_PERSON,
    MOMENT_PHRASES,
    PERSON_NOUNS,
    START_WORDS,
)

_APOSTROPHE_S = ("'s", "\u2019s")
# What follows a person's "'s" when it is "is": "my sister's a nurse", "my brother's in Porto".
_COPULA_NEXT = ("DET", "ADJ", "ADV", "ADP", "NUM")


def bare_state(doc: Any) -> bool:
    """Whether a sentence opens on an adjective with its complement and no subject: a
    state whose "I'm" casual English leaves out ("allergic to sesame btw")."""
    first = next((t for t in doc if not t.is_punct), None)
    return first is not None and first.pos_ == "ADJ" and first.dep_ == "ROOT" and any(
        c.dep_ in ("prep", "xcomp") for c in first.children) and subject_of(first) is None


def after_lead(text: str) -> tuple[str, bool]:
    """The text after a change phrase that leads it, set off by a comma, and whether there
    was one."""
    low = text.lower()
    for phrase in CHANGE_PHRASES:
        if low.startswith(phrase + ",") and text[len(phrase) + 1:].strip():
            rest = text[len(phrase) + 1:].lstrip()
            return rest, True
    return text, False


def says_now(doc: Any, low: str) -> bool:
    """Whether a time word says something holds from now on ("now", "no longer", "these
    days", "starting this week"), in the parsed words or in the sentence as said (``low``,
    lower-cased: a leading "going forward," is not parsed)."""
    return any(t.lower_ in CHANGE_WORDS or t.lemma_.lower() in CHANGE_WORDS for t in doc) or any(
        p in low for p in CHANGE_PHRASES) or starts_then(low)


def starts_then(low: str) -> bool:
    """Whether a moment is when something starts ("starting this week", "as of today"):
    then it holds from that moment on, not for that moment only."""
    return any(f"{start} {moment}" in low for start in START_WORDS for moment in MOMENT_PHRASES)


def without_chat(text: str) -> str:
    """The text without its chat words, unless that leaves nothing."""
    if not CHAT_WORDS.search(text):
        return text
    out = CHAT_WORDS.replace(text, "", eat_space=True).rstrip()
    for mark in ".,!?;:":
        out = out.replace(" " + mark, mark)
    return out if out.strip(" .,!?;:") else text


def verbless_possessive(doc: Any) -> bool:
    """Whether a sentence has one with no verb at all but an "'s" read as a possessive that may be
    "is": a word follows it, and a person's "'s" before a bare noun stays theirs ("my
    mom's house"), where "my sister's a nurse" has its article."""
    # Before an article it is never a possessive ("the ioniq 5's the daily now, charging
    # it overnight"), whatever verbs the rest of the sentence has.
    if any(t.tag_ == "POS" and t.lower_ in _APOSTROPHE_S and t.i + 1 < len(doc)
           and doc[t.i + 1].lower_ in ("the", "a", "an") for t in doc):
        return True
    for sent in doc.sents:  # "Lisbon's home these days; the lease started Monday."
        if any(t.pos_ in ("VERB", "AUX") for t in sent):
            continue
        for t in sent:
            if t.tag_ != "POS" or t.lower_ not in _APOSTROPHE_S or t.i + 1 >= sent.end:
                continue
            after, owner = doc[t.i + 1], doc[t.i - 1] if t.i else t
            if after.is_punct:
                continue
            if owner.lemma_.lower() not in PERSON_NOUNS or after.pos_ in _COPULA_NEXT:
                return True
    return False


def with_is(doc: Any) -> str:
    """The sentence with every possessive "'s" read as "is"."""
    return "".join(" is" + t.whitespace_ if t.tag_ == "POS" and t.lower_ in _APOSTROPHE_S
                   else t.text_with_ws for t in doc)


def dropped_subject(doc: Any) -> bool:
    """Whether a sentence may have left its "I" out: it has no subject anywhere, or it
    opens on an end with no subject of its own before the speaker's next clause ("quit
    the cafe lol, im doing dog walking now"). Which it was, the reading with the "I" put
    back decides (EnglishPack.readings): an imperative reads no past there ("drop the
    jokes, I'm busy") and keeps its reading. Only an end: "put it in a table when you
    compare prices" reads as a past with its "I" back, and asks all the same."""
    words = [t for t in doc if not t.is_punct and t.pos_ != "INTJ"]
    if not words or words[0].tag_ in ("MD", "WP", "WRB", "WDT"):
        return False
    if not any(t.dep_ in SUBJECT_DEPS for t in doc):
        return True
    # Not a participle: "Done with running, my knees hate it" is an end said first
    # (en_values.clause_roots), which an "I" put back would read as a past event.
    first = words[0]
    return first.tag_ in ("VB", "VBD") and ends(first) and subject_of(first) is None and any(
        t.dep_ in SUBJECT_DEPS and t.lower_ in FIRST_PERSON for t in doc)


def first_word(doc: Any) -> Any:
    return next(t for t in doc if not t.is_punct and t.pos_ != "INTJ")


def with_i(doc: Any) -> str:
    """The sentence with its "I" put back before its first word."""
    return _said_before(doc, first_word(doc), "I")


def _said_before(doc: Any, first: Any, words: str) -> str:
    """The sentence with ``words`` said before its word ``first``, which then starts lower-case."""
    return str(doc.text[:first.idx] + words + " " + first.text.lower()
               + doc.text[first.idx + len(first):])


def verb_after_i(doc: Any, *, base: bool) -> bool:
    """Whether the word after the put-back "I" reads as a verb ("I quit", "I moved"): only
    then was the "I" what the sentence left out. A sentence that opened on a base form
    (an imperative, "book me a seat") must read as a past one."""
    i = next((t for t in doc if t.lower_ == "i"), None)
    if i is None or i.i + 1 >= len(doc):
        return False
    tag = doc[i.i + 1].tag_
    # "I sounds great" agrees with no "I": what "sounds great" left out was "it".
    return tag in ("VBD", "VBN") if base else tag in ("VBD", "VBN", "VBP")


def misread_request(doc: Any, verbs: frozenset[str]) -> bool:
    """Whether a sentence may be a request whose verb the parser misread: as a noun ("Reply
    in short sentences", "Report costs in euros"; its root is then no verb), or as a
    gerund of no verb the lemmatizer knows ("ping me about bills": "pe"). It opens on a
    word that ``verbs`` (the lemmatizer's word list) knows as a verb ("Coffee with oat
    milk" is no request; nor is an interjection, "thanks") and has no subject."""
    words = [t for t in doc if not t.is_punct]
    if not words or words[0].lower_ not in verbs:
        return False
    first, root = words[0], next(iter(doc.sents)).root
    if first.tag_ == "VBG":
        return first.lemma_.lower() not in verbs and subject_of(first) is None
    return first.tag_ in ("NN", "NNP") and root.pos_ not in ("VERB", "AUX") and not any(
        t.dep_ in SUBJECT_DEPS for t in doc)


def as_request(doc: Any) -> str:
    """The sentence asked with "please" before it, which the parser reads as a request."""
    # misread_request found a word
    return _said_before(doc, next(t for t in doc if not t.is_punct), "Please")


def asks_with_its_first_word(doc: Any) -> bool:
    """Whether a sentence read with "please" before it has the word after it as its verb."""
    root = next(iter(doc.sents)).root
    return bool(root.pos_ == "VERB" and root.i == 1 and doc[0].lower_ == "please")
