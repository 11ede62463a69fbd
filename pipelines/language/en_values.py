"""The value of an English clause: the span its head governs, and one value per conjunct
when a sentence names several ("I have a cat and a dog")."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from sleepmem.pipelines.language.en_words import (
    ENDING_PHRASALS,
    ENDING_VERBS,
    FIRST_PERSON,
    LIGHT_HEADS,
    MENTAL_VERBS,
    PERSON_NOUNS,
    TIME_NOUNS,
    VALUE_SKIP,
)


def one_value_each(doc: Any) -> tuple[str, ...]:
    """The sentence once per conjunct of its value: "I love sci-fi novels and gardening",
    "allergic to peanuts, shellfish and kiwi", "pizza and sushi are my favourite foods" (a
    subject joined under a plural complement is the value there). People joined ("I live
    with my wife and kids") stay one value: who lives with whom is one fact."""
    sents = list(doc.sents)
    # One clause only: a sentence of several is cut into its clauses first (rules.py), and
    # a joined clause's "and" hangs on the parse's last noun.
    if len(sents) != 1 or sents[0].root.pos_ not in ("VERB", "AUX") or len(
            clause_roots(doc)) > 1:
        return ()
    root = sents[0].root
    value = _coordinated(root)
    if value is None:
        return ()
    parts = [value, *_conjuncts(value)]
    if any(p.lemma_.lower() in PERSON_NOUNS or p.pos_ == "PRON" for p in parts):
        return ()
    # A word that only marks the first value ("to" in a misread "allergic to X and Y")
    # marks them all.
    shared = {c.i for c in value.children if c.dep_ in ("aux", "mark", "case") and c.i < value.i}
    group = [t.i for t in value.subtree if t.i not in shared]
    start, end = min(group), max(group)
    # "both" / "either" only pair what is now one.
    skip = {t.i for t in doc if t.lower_ in ("both", "either") and t.dep_ in (
        "preconj", "dep", "advmod", "det")}
    out = []
    for part in parts:
        own = _own_span(part) - shared
        words = [t for t in doc if (t.i < start or t.i > end or t.i in own) and t.i not in skip]
        text = "".join(t.text + (t.whitespace_ if nxt.i == t.i + 1 else (
            "" if nxt.is_punct else " ")) for t, nxt in pairwise(words))
        text = (text + words[-1].text).strip()
        out.append(text[:1].upper() + text[1:] if doc[0].is_title else text)
    return tuple(out)



def _coordinated(root: Any) -> Any:
    """The root's value when it is a noun with nouns joined to it: its object or
    complement, the object of a preposition on the root or its complement, or a subject
    whose complement is plural."""
    heads = [root, *(c for c in root.children if c.dep_ in ("acomp", "xcomp"))]
    slots = [c for h in heads for c in h.children if c.dep_ in ("dobj", "attr", "xcomp")]
    slots += [p for h in heads for prep in h.children if prep.dep_ == "prep"
              for p in prep.children if p.dep_ == "pobj"]
    attr = next((c for c in root.children if c.dep_ == "attr"), None)
    if root.lemma_ == "be" and attr is not None and attr.tag_ == "NNS":
        slots += [c for c in root.children if c.dep_ == "nsubj"]
    return next((s for s in slots if s.pos_ in ("NOUN", "PROPN", "VERB") and any(
        c.dep_ == "conj" and c.pos_ in ("NOUN", "PROPN", "VERB") for c in s.children)), None)



def _conjuncts(token: Any) -> list[Any]:
    out = []
    for c in token.children:
        if c.dep_ == "conj":
            out += [c, *_conjuncts(c)]
    return out



def _own_span(part: Any) -> set[int]:
    """A conjunct's own words: its subtree without the conjuncts, joiners and commas
    hung on it."""
    drop = {t.i for c in part.children if c.dep_ in ("conj", "cc", "punct") for t in c.subtree}
    return {t.i for t in part.subtree} - drop



def head_word(root: Any) -> str:
    lemma = str(root.lemma_).lower()
    if lemma in LIGHT_HEADS:
        attr = next((c for c in root.children if c.dep_ in ("attr", "acomp", "dobj")), None)
        if attr is not None and attr.pos_ in ("NOUN", "ADJ"):
            return f"{lemma}_{attr.lemma_.lower()}"
    prep = next((c for c in root.children if c.dep_ == "prep"), None)
    if prep is not None and prep.i == root.i + 1:
        return f"{lemma}_{prep.lower_}"
    return lemma



def value_span(doc: list[Any], root: Any, denied: Any) -> str:
    """The span the clause states: a proper name if it has one, else the root's object
    or complement, else the last noun phrase."""
    subj = subject_of(root)
    if root.lemma_ == "be" and subj is not None and subj.pos_ == "PROPN":
        return span_of(subj)  # "Lisbon is home now": the name is what is said
    attr = next((c for c in root.children if c.dep_ == "attr"), None)
    if root.lemma_ == "be" and subj is not None and subj.pos_ == "NOUN" and attr is not None and (
            any(d.lower_ in ("my", "our") for d in attr.children) or any(
                d.dep_ == "prep" and d.lower_ in ("for", "of", "to") and any(
                    o.lower_ in FIRST_PERSON for o in d.children) for d in attr.children)):
        # "dark mode is my preferred choice", "gardening is a fine hobby for me", "chess
        # is a pastime of mine": the speaker's choice is named
        return span_of(subj)
    if subj is not None and subj.pos_ in ("NOUN", "PROPN") and to_me(root) and (
            subj.lemma_.lower() not in PERSON_NOUNS):
        return span_of(subj)  # "penicillin gives me hives": what acts on the speaker
    names = [t for t in doc if t.pos_ == "PROPN" and t.dep_ not in ("nsubj", "nsubjpass")
             and (denied is None or t.i != denied.i)]
    # The name the verb's own preposition takes ("live in Gdansk with my wife Ola") is the
    # clause's value; a name further on rides along.
    at = next((p for p in root.children if p.dep_ == "prep" and p.i == root.i + 1), None)
    own = [t for t in names if at is not None and t.head.i == at.i]
    if own or names:
        return span_of((own or names)[-1])
    for dep in ("dobj", "attr", "acomp", "oprd"):
        child = next((c for c in root.children if c.dep_ == dep), None)
        if child is not None and child.pos_ not in ("PRON",) and (
                denied is None or child.i != denied.i):
            return span_of(child)
    pobj = [t for t in doc if t.dep_ == "pobj" and t.pos_ in ("NOUN", "PROPN")
            and t.lower_ not in TIME_NOUNS]
    if pobj:
        return span_of(pobj[-1])
    nouns = [t for t in doc if t.pos_ in ("NOUN", "PROPN") and t.lower_ not in TIME_NOUNS
             and t.dep_ != "npadvmod"]
    return span_of(nouns[-1]) if nouns else ""



def span_of(token: Any) -> str:
    """A noun with its compounds and modifiers, without determiners or pronouns."""
    words: Iterable[Any] = (t for t in token.subtree if (t.pos_ not in VALUE_SKIP
                            and t.dep_ not in ("prep", "pobj", "relcl", "acl", "pcomp",
                                               "advmod", "npadvmod", "neg", "appos"))
                            or t.i == token.i)
    kept = [t for t in words if abs(t.i - token.i) <= 3 and (
        t.i == token.i or t.head.i == token.i or t.head.head.i == token.i)]
    return " ".join(t.lower_ for t in sorted(kept, key=lambda t: t.i)).strip()


def clause_roots(doc: Any) -> list[Any]:
    """The head of every clause: each sentence's root, and each verb joined to it that
    has a subject of its own ("I sold my Civic and I drive a Model 3 now")."""
    roots: list[Any] = []
    for sent in doc.sents:
        roots.append(sent.root)
        roots.extend(t for t in sent if (t.dep_ in ("conj", "ccomp", "parataxis")
                     and t.pos_ in ("VERB", "AUX")
                     and any(c.dep_ in ("nsubj", "nsubjpass", "expl") for c in t.children))
                     # "Done with running, my knees hate it": an end said first, whose
                     # subject (the speaker) casual English leaves out.
                     or (t.dep_ == "advcl" and t.i == sent.start and ends(t)))
    return roots



# A clause as subject ("giving people a place to dance is important") is a subject too.
SUBJECT_DEPS = ("nsubj", "nsubjpass", "expl", "csubj")


def subject_of(root: Any) -> Any:
    return next((c for c in root.children if c.dep_ in SUBJECT_DEPS), None)



def to_me(root: Any) -> bool:
    """Whether the speaker is what the clause's verb acts on ("penicillin gives me hives",
    "dairy makes me sick"): a fact of the speaker's, whatever its subject."""
    return any(c.dep_ in ("dative", "dobj", "iobj") and c.lower_ in FIRST_PERSON
               for c in root.children) or (root.lemma_.lower() not in MENTAL_VERBS and any(
        # "gluten makes me bloated": the speaker is the subject of the small clause
        c.dep_ in ("ccomp", "xcomp", "oprd") and any(
            g.dep_ == "nsubj" and g.lower_ in FIRST_PERSON and g.i < c.i for g in c.children)
        for c in root.children))


def ends(root: Any) -> bool:
    """Whether the clause's verb ends what its object was ("quit coffee", "gave up tea")."""
    lemma = str(root.lemma_).lower()
    return lemma in ENDING_VERBS or any(
        (lemma, c.lower_) in ENDING_PHRASALS for c in root.children if c.dep_ == "prt") or (
        # "I'm done with coffee", "we're through with the gym": finished with a thing.
        root.lower_ in ("done", "through", "finished") and any(
            c.dep_ == "prep" and c.lower_ == "with" for c in root.children))
