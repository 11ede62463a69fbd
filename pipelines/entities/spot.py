"""Entity spotting: the names a statement uses, what kind of thing each one names, and how
the statement relates them. Plain functions over text, no state, no vocabulary of names.

The signals are the ones a reader uses without knowing the names:

- English proper names are capitalised: runs of capitalised words ("Saint Aldhelm",
  "University of Tokyo") are names. A capitalised word that opens a sentence is only a
  name when the scope already knows it (linking decides) or it recurs mid-sentence.
- An appositive role names what a person or pet is to the speaker ("my sister Mel",
  "my dog Max", "我妹妹小美"): the role becomes an alias, the family vocabulary the
  extractor already uses tells pets from people.
- The preposition before a name tells places ("in / to / from / near X", "在/去/到/住在 X")
  and organisations ("at X", "在 X 工作") from people.
- The words between two names in one clause are their relation ("Mel moved to Tokyo":
  ``moved_to``); the slot the extractor assigned (``rel:<relation>``, ``residence``,
  ``family:<role>:<name>``) is the relation of the subject and the slot's value.
"""

from __future__ import annotations

import calendar
import itertools
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sleepmem.models.entities import EntityKind
from sleepmem.pipelines.language import has_cjk, is_han
from sleepmem.pipelines.language.words import is_word_char, words
from sleepmem.pipelines.lexical import STOPWORDS
from sleepmem.pipelines.vocab import (
    FAMILY_EN,
    FAMILY_ZH,
    SOCIAL_ROLES_EN,
    SOCIAL_ROLES_ZH,
)

# Words that are capitalised without being names: the pronoun, and calendar words (time
# is the time route's business, and every diary mentions "Saturday").
_NOT_NAMES = frozenset(
    {"i", "i'm", "i've", "i'd", "i'll", "im", "ok", "okay"}
    | {m.lower() for m in calendar.month_name[1:]}
    | {m.lower() for m in calendar.month_abbr[1:]}
    | {d.lower() for d in calendar.day_name}
    | {d.lower() for d in calendar.day_abbr}
)
# Words of closed classes (pronouns, determiners, auxiliaries, prepositions, question
# words) and the greetings and interjections that open chat lines: never a name, never
# the start of one. "Hey Caroline!" names Caroline, "Can Pet Calendar track walks?" names
# Pet Calendar, and "Would you…" names nobody; kept as names they became entities that
# every question opening with "Can you" or "Would" linked to. "will" is left out: Will is a
# first name, and the modal is only capitalised where a sentence opens.
FUNCTION_WORDS = (STOPWORDS - {"will"}) | frozenset(
    {"some", "any", "all", "each", "every", "both", "either", "neither", "many", "much", "few",
     "several", "most", "more", "less", "such", "another", "other", "how", "when", "where",
     "why", "whether", "yes", "yeah", "yep", "nope", "hey", "hi", "hello", "hiya", "thanks",
     "thank", "congrats", "congratulations", "wow", "oh", "ah", "aw", "aww", "haha", "lol",
     "omg", "sorry", "welcome", "bye", "goodbye", "dear", "please", "well"}
)
# Lower-case words allowed inside a multiword name ("Bank of America", "Vincent van Gogh").
_NAME_GLUE = frozenset({"of", "de", "del", "da", "van", "von", "der", "la", "le", "du", "&"})
_WORD = re.compile(r"[^\W_][\w'’.&-]*", re.UNICODE)
# Where a sentence or line ends (a word after one, and before any letter, opens the next).
_SENTENCE_ENDS = frozenset(".!?。！？:\n\"“”")
# A word with a dot inside or of at most three letters before its final one is an
# abbreviation ("St.", "Dr.", "U.S."): the name goes on. Any other final dot ends it.
_ABBREVIATION = re.compile(r"^(?:\w{1,3}|\w+\.\w+)\.$")
def _unpossessed(word: str) -> str:
    """The word without a closing "'s" or "'"."""
    if word.endswith(("'s", "’s")):
        return word[:-2]
    return word[:-1] if word.endswith(("'", "’")) else word
# What follows a name to make it a possessive: "Melanie's", "James'", "小美的".
_POSSESSIVE_AFTER = re.compile(r"['’]s?\b|['’]|的")
_PLACE_BEFORE = frozenset({"in", "to", "from", "near", "visit", "visited", "visiting", "around",
                           "across", "toward", "towards"})
_ORG_BEFORE = frozenset({"at", "for", "joined", "join"})
_STOP_BETWEEN = re.compile(r"[,;:!?.()\"“”]|\b(?:and|but|because|while|when|who|which)\b",
                           re.IGNORECASE)
_ARTICLES = frozenset({"a", "an", "the", "my", "his", "her", "their", "our", "your"})
# A role between "my" and a name: one or two lower-case words ("my friend Mel",
# "my little brother Sam"); the last word is the role when it names one (family or social:
# "my favorite Star Wars", "my new Canon" name no role and no person).
_ROLE = re.compile(r"(?i:\bmy)\s+(?:[a-z]+\s+)?(?P<role>[a-z]+)\s*,?\s*$")

# -- Chinese: no capitals, so the surrounding words carry the signal ---------------------
_CJK = "\u3400-\u9fff"
# What may follow a name: particles, punctuation, and the verbs a subject opens with.
_ZH_STOP = "的了是在和与也都很说要会就还又把被给跟对从到去来着过吗呢吧啊，。！？、；：\\s住搬做当有"
_ZH_ROLES = "|".join(sorted({*FAMILY_ZH, *SOCIAL_ROLES_ZH}, key=len, reverse=True))
# Pronouns, particles and demonstratives are in no name: "叫" also means to order or to
# wake ("我们叫了外卖", "叫醒我"), and then what follows it is no name ("了外卖", "醒我").
_ZH_NAME = rf"(?:(?![我你您他她它们了的着过吗呢吧啊么这那哪什谁])[{_CJK}])"
_ZH_PERSON = re.compile(
    rf"(?:我|用户)(?:的)?(?P<role>{_ZH_ROLES})(?:叫|名叫)?(?P<name>{_ZH_NAME}{{2,3}}?)"
    rf"(?=[{_ZH_STOP}]|$)|(?:叫|名叫)(?P<name2>{_ZH_NAME}{{2,3}}?)(?=[{_ZH_STOP}]|$)"
)
_ZH_PLACE = re.compile(
    rf"(?:住在|搬到|搬去|去了|去过|来自|回到|到了|飞到|在|去|到|从)"
    rf"(?P<name>{_ZH_NAME}{{2,5}}?)(?=[，。！？、；\s]|$|了|的|住|生活|旅游|旅行|玩|出差|读书|上学)"
)
_ZH_ORG = re.compile(rf"在(?P<name>[{_CJK}A-Za-z0-9]{{2,12}}?)(?:工作|上班|实习|任职)")


@dataclass(frozen=True, slots=True)
class Spotted:
    """One name in a statement: as written, its kind, and an appositive role if any."""

    name: str
    kind: str
    start: int
    end: int
    role: str = ""
    # Opened a sentence: a name only if the scope already knows it.
    initial: bool = False


@dataclass(frozen=True, slots=True)
class Link:
    """``(subject) -[relation]-> (object)`` by name, as one statement says it."""

    subject: str
    relation: str
    object: str


@dataclass(slots=True)
class Reading:
    """What one statement says about entities."""

    subject: str
    names: list[Spotted] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)


def alias_key(text: str) -> str:
    """The form names are matched in: NFKC, case-folded, no possessive, single spaces."""
    text = unicodedata.normalize("NFKC", text).casefold().strip(" \t\n.,;:!?\"'“”‘’()")
    words = [_unpossessed(w) for w in text.split()]
    return " ".join(w for w in words if w)


def _single_spaced(text: str) -> str:
    """Runs of two or more spaces and tabs made one space."""
    out, run = [], []
    for ch in text:
        if ch in " \t":
            run.append(ch)
            continue
        if run:
            out.append(" " if len(run) > 1 else run[0])
            run = []
        out.append(ch)
    if run:
        out.append(" " if len(run) > 1 else run[0])
    return "".join(out)


def spot(text: str) -> list[Spotted]:
    """Every name in ``text``, English and Chinese, in order of appearance."""
    out = _spot_en(text)
    if has_cjk(text):
        out += _spot_zh(text)
    return sorted(out, key=lambda s: s.start)


def without_people(text: str, known: Iterable[str] = ()) -> str:
    """``text`` without the people it names (and their possessive): "What do Melanie's
    kids like?" → "What do kids like?". A sentence embedder weighs a name heavily, so a
    query that names someone matches whatever that person is greeted in ("Wow, Melanie!")
    better than what it asks about; who said it is the speaker route's question.

    ``known``: names of people the caller knows (the scope's), also left out where they
    appear: Chinese has no capitals to spot a name by ("小美的孩子喜欢什么？")."""
    spans = [(s.start, s.end) for s in spot(text) if s.kind == "person"]
    folded = unicodedata.normalize("NFKC", text).casefold()
    for name in known:
        key = unicodedata.normalize("NFKC", name).casefold()
        # Lengths survive NFKC for the Han and ASCII names this is for, so offsets match.
        if key and len(folded) == len(text):
            # A Han name is found anywhere (no spaces); another only as a whole word, so
            # a known "Mel" leaves "Melanie" alone.
            pattern = re.escape(key) if is_han(key) else rf"\b{re.escape(key)}\b"
            spans += [(m.start(), m.end()) for m in re.finditer(pattern, folded)]
    out = text
    for start, stop in sorted(_merged(spans), reverse=True):
        m = _POSSESSIVE_AFTER.match(text, stop)
        out = out[:start] + out[m.end() if m else stop:]
    if out == text:
        return text
    return _single_spaced(out).strip() or text


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans as one (a name both spotted and known)."""
    out: list[tuple[int, int]] = []
    for start, stop in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], stop))
        else:
            out.append((start, stop))
    return out


def _spot_en(text: str) -> list[Spotted]:
    words = list(_WORD.finditer(text))
    out: list[Spotted] = []
    i = 0
    while i < len(words):
        w = words[i]
        if not _capital(w.group()):
            i += 1
            continue
        j = i
        # Extend over capitalised words and lower-case glue between them.
        while (j + 1 < len(words) and _adjacent(text, words[j], words[j + 1])
               and (not words[j].group().endswith(".") or _ABBREVIATION.match(words[j].group()))):
            nxt = words[j + 1].group()
            if _capital(nxt):
                j += 1
            elif (nxt.lower() in _NAME_GLUE and j + 2 < len(words)
                  and _capital(words[j + 2].group())
                  and _adjacent(text, words[j + 1], words[j + 2])):
                j += 2
            else:
                break
        # Greetings and function words that open the run are not part of the name.
        while i <= j and _unpossessed(words[i].group().lower()) in FUNCTION_WORDS:
            i += 1
        if i > j:
            continue
        w = words[i]
        start, end = w.start(), words[j].end()
        name = _unpossessed(text[start:end].rstrip(".-"))
        if j == i and name.lower() in _NOT_NAMES:
            i = j + 1
            continue
        before = text[:start]
        initial = _opens_sentence(before)
        lead = [t.lower().strip(",") for t in before.split()[-3:]]
        while lead and lead[-1] in _ARTICLES:
            lead.pop()
        prev = lead[-1] if lead else ""
        role_m = _ROLE.search(before[-40:])
        role = role_m.group("role") if role_m and _role_word(role_m.group("role")) else ""
        out.append(Spotted(
            name=name, kind=_kind_en(prev, role, name), start=start, end=start + len(name),
            role=role, initial=initial and j == i,
        ))
        i = j + 1
    return out


def _opens_sentence(before: str) -> bool:
    """No letter between the last sentence or line end and the word: list markers,
    numbering and emphasis ("1. **Keep** it short", "- Make a list") hide no opener, and
    chat-formatted replies capitalise those openers as any sentence does."""
    for c in reversed(before):
        if c in _SENTENCE_ENDS:
            return True
        if c.isalpha():
            return False
    return True


def _capital(word: str) -> bool:
    return word[0].isupper() and not word.isdigit()


def _adjacent(text: str, a: re.Match[str], b: re.Match[str]) -> bool:
    return text[a.end():b.start()] == " "


def _role_word(word: str) -> str:
    """The family or social role ``word`` names, singular ("friends" → "friend"), or ''."""
    return next((w for w in (word, word.removesuffix("s"))
                 if w in FAMILY_EN or w in SOCIAL_ROLES_EN), "")


def _kind_en(prev: str, role: str, name: str) -> str:
    if role:
        rel = FAMILY_EN.get(_role_word(role), "")
        return EntityKind.pet.value if rel.startswith("pet:") else EntityKind.person.value
    if prev in _PLACE_BEFORE:
        return EntityKind.place.value
    if prev in _ORG_BEFORE:
        return EntityKind.organisation.value
    return EntityKind.person.value if " " not in name else EntityKind.thing.value


def _spot_zh(text: str) -> list[Spotted]:
    out: list[Spotted] = []
    taken: set[int] = set()
    for m in _ZH_PERSON.finditer(text):
        group = "name" if m.group("name") else "name2"
        role = m.group("role") or ""
        rel = FAMILY_ZH.get(role, "")
        kind = EntityKind.pet.value if rel.startswith("pet:") else EntityKind.person.value
        out.append(Spotted(m.group(group), kind, m.start(group), m.end(group), role=role))
        taken.update(range(m.start(group), m.end(group)))
    for pat, kind in ((_ZH_ORG, EntityKind.organisation.value),
                      (_ZH_PLACE, EntityKind.place.value)):
        for m in pat.finditer(text):
            if m.start("name") in taken:
                continue
            out.append(Spotted(m.group("name"), kind, m.start("name"), m.end("name")))
            taken.update(range(m.start("name"), m.end("name")))
    return out


def read(
    statement: str,
    *,
    subject: str,
    slot: tuple[str, str] | None = None,
    known: Callable[[str], bool] = lambda _key: False,
) -> Reading:
    """Names and links of one statement whose subject is ``subject`` (a name or "user").

    ``slot`` is the (relation, object) the extractor assigned, if any: it becomes a link
    of the subject, with its object as a name even when written in lower case. ``known``
    says whether the scope already knows a name (by alias, first name or short form): a
    capitalised word opening a sentence is a name only then, or when the statement also
    writes it mid-sentence.
    """
    reading = Reading(subject=subject)
    found = spot(statement)
    inner = {alias_key(s.name) for s in found if not s.initial}
    names = [
        s for s in found
        if alias_key(s.name) != alias_key(subject)
        and (not s.initial or alias_key(s.name) in inner or known(alias_key(s.name)))
    ]
    reading.names = names
    linked: set[str] = set()
    if slot is not None and slot[1]:
        reading.links.append(Link(subject, slot[0], slot[1]))
        linked.add(alias_key(slot[1]))
    for s in names:
        if s.role:
            reading.links.append(Link(subject, _snake(s.role), s.name))
            linked.add(alias_key(s.name))
    for a, b in itertools.pairwise(names):
        between = statement[a.end:b.start]
        if between.startswith(("'s", "’s")) and not is_word_char(between[2:3] or " "):
            between = between[2:]
        words = [w for w in between.lower().split() if w not in _ARTICLES]
        if 0 < len(words) <= 4 and not _STOP_BETWEEN.search(between):
            reading.links.append(Link(a.name, _snake(" ".join(words)), b.name))
            linked.update((alias_key(a.name), alias_key(b.name)))
    for s in names:
        if alias_key(s.name) not in linked:
            reading.links.append(Link(subject, "mentions", s.name))
    return reading


def _snake(text: str) -> str:
    return "_".join(words(text.lower()))[:200] or "related_to"
