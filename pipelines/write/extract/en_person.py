"""English patterns about the person: identity, health, family, diet, tastes and how they
want to be answered.
"""

from __future__ import annotations

import re

from sleepmem.pipelines.language.words import Phrases, strip_word, without_word
from sleepmem.pipelines.text import (
    CONNECTOR,
    ONE_OFF_EN,
    STRIP_CHARS,
    clean_end,
    norm_value,
    opens_label,
    singular,
    split_list,
    third_person_en,
)
from sleepmem.pipelines.vocab import (
    CONDITIONS,
    DIETS,
    FAMILY_EN,
    FOODS,
    LANGS_EN,
    NATIONALITIES,
    UNIQUE_RELATIONS,
)
from sleepmem.pipelines.write.extract.slots import Clause, Slot, clause_slot, make_slot

# -- identity ----------------------------------------------------------------------------

_NAME = re.compile(
    r"(?i:\b(?:my\s+(?:first\s+|full\s+|real\s+|given\s+)?name(?:'s|\s+is)|call\s+me|"
    r"i(?:'m|\s+am)\s+called|i\s+go\s+by|people\s+call\s+me|everyone\s+calls\s+me|"
    r"you\s+can\s+call\s+me|please\s+call\s+me))\s+(?P<v>[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*){0,2})"
)
_NAME_INTRO = re.compile(
    r"^(?i:(?:hi|hello|hey)[,!]?\s+)?(?i:i'm|i\s+am|this\s+is)\s+(?P<v>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)$"
)
_AGE = re.compile(
    r"(?i)\bi(?:'m|\s+am)\s+(?:now\s+)?(?P<v>\d{1,3})(?:\s*(?:years?|yrs?)(?:\s*old)?|\s*y/?o|$)"
    r"|\bi\s+(?:just\s+)?turned\s+(?P<v2>\d{1,3})\b|\bmy\s+age\s+is\s+(?P<v3>\d{1,3})\b"
)
_BIRTHDAY = re.compile(
    r"(?i)\bmy\s+(?:birthday|date\s+of\s+birth|bday)\s+is\s+(?:on\s+)?(?P<v>[^,.;]+)"
    r"|\bi\s+was\s+born\s+(?:on|in)\s+(?P<v2>[^,.;]+)"
)
_MONTHY = re.compile(
    r"(?i)\d|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b"
)


_NATIONALITY = re.compile(
    r"(?i)\bi(?:'m|\s+am)\s+(?:(?:a|an|originally|half)\s+)?(?P<v>[a-z]+)(?:\s+citizen)?\s*$"
    r"|\bi(?:'m|\s+am|\s+have)\s+(?:an?\s+)?(?P<v2>[a-z]+)\s+(?:citizen|national|passport)"
)
_NOT_NATIONALITIES = frozenset(
    {"new", "fine", "good", "here", "back", "sorry", "happy", "glad", "sure", "done", "ready",
     "vegan", "vegetarian", "not", "so", "just", "also", "still", "really", "very",
     "allergic", "based", "from", "afraid"}
)


def m_nationality(c: Clause) -> list[Slot]:
    m = _NATIONALITY.search(clean_end(c.text))
    if not m:
        return []
    word = (m.group("v") or m.group("v2")).lower()
    if word not in NATIONALITIES or word in _NOT_NATIONALITIES:
        return []
    return [clause_slot(c, "nationality", word, importance=0.85)]


def m_name(c: Clause) -> list[Slot]:
    m = _NAME.search(c.text) or _NAME_INTRO.search(clean_end(c.text))
    if not m:
        return []
    name = m.group("v")
    if name.lower().split()[0] in NATIONALITIES:
        return []
    called = "call" in m.group(0).lower() or "go by" in m.group(0).lower()
    head = (f"The user wants to be called {name}" if called else f"The user's name is {name}")
    return [make_slot("name", norm_value(name), head, importance=0.95)]


def m_age(c: Clause) -> list[Slot]:
    m = _AGE.search(c.text)
    if not m:
        return []
    age = m.group("v") or m.group("v2") or m.group("v3")
    if not age or not 1 <= int(age) <= 120:
        return []
    return [make_slot("age", age, f"The user is {age} years old", importance=0.8,
                  details={"as_of_event": True})]


def m_birthday(c: Clause) -> list[Slot]:
    m = _BIRTHDAY.search(c.text)
    if not m:
        return []
    if m.group("v"):
        return [clause_slot(c, "birthday", norm_value(m.group("v")), importance=0.85)]
    when = m.group("v2")
    if _MONTHY.search(when):
        return [clause_slot(c, "birthday", norm_value(when), importance=0.85)]
    return [clause_slot(c, "birthplace", norm_value(when), importance=0.8)]


_ALLERGY = re.compile(
    r"(?i)\b(?:i(?:'m|\s+am|'ve\s+been|\s+have\s+been|\s+was|\s+got)|im)\s+"
    r"(?:(?P<neg>not|no\s+longer)\s+)?(?:(?:very|really|severely|extremely|highly|deathly|"
    r"mildly|a\s+bit|slightly|seriously|super|so|quite|also|still)\s+)*allergic\s+to\s+"
    r"(?P<v>[^,.;!?()]+)"
)
_ALLERGY_HAVE = re.compile(
    r"(?i)\b(?:i\s+have|i've\s+got|i\s+have\s+got|i\s+suffer\s+from|my)\s+(?:an?\s+)?"
    r"(?:(?:severe|serious|mild|bad|strong|life-threatening|deadly)\s+)?"
    r"(?P<v>[a-z][\w\s-]{1,30}?)\s+allerg(?:y|ies)\b"
)
_ALLERGEN_STOP = re.compile(
    r"(?i)\s+(?:so|which|and\s+(?:i|it|they)|but|because|since|when|if|that|though)\b.*$"
)
_ANY_MORE = Phrases(["anymore", "any more"], loose=True)
_NOT_NOW = Phrases(["no longer", "not", "don't", "do not"])
_SAYS_I = Phrases(["I", "I'm", "I'd", "I've", "my"], case=True)
_ASKS_STYLE = Phrases(["use", "prefer", "want", "give", "format", "answer", "repl", "respon",
                       "please", "like"], prefix=True)
_POINTS_AWAY = Phrases([f"{to}{w}" for to in ("to ", "") for w in (
    "it", "that", "this", "them", "you", "the idea", "when", "how", "what")], loose=True)
_ALLERGY_TRAIL = re.compile(r"(?i)\s+(?:any\s*more|too|as well|either|now)$")


def m_allergy(c: Clause) -> list[Slot]:
    m = _ALLERGY.search(c.text)
    neg = False
    if m:
        neg = bool(m.group("neg")) or _ANY_MORE.search(c.text[m.end():])
    else:
        m = _ALLERGY_HAVE.search(c.text)
    if not m:
        return []
    raw = _ALLERGEN_STOP.sub("", m.group("v"))
    raw = _ALLERGY_TRAIL.sub("", raw.strip())
    out = []
    for item in split_list(raw):
        words = item.split()
        if not words or len(words) > 4:
            continue
        allergen = " ".join([*words[:-1], singular(words[-1])])
        if neg:
            out.append(clause_slot(c, f"allergy:{allergen}", "", negated=True, change=True,
                                    importance=0.9))
        else:
            out.append(clause_slot(c, f"allergy:{allergen}", allergen, importance=0.95))
    return out


_CONDITION = re.compile(
    r"(?i)\bi\s+(?:(?:also|still)\s+)?(?:have|'ve\s+got|have\s+got|suffer\s+from|live\s+with|"
    r"was\s+diagnosed\s+with|got\s+diagnosed\s+with|am\s+diagnosed\s+with|struggle\s+with|"
    r"'m\s+diagnosed\s+with)\s+(?P<v>" + CONDITIONS + r")\b"
    r"|\bi(?:'m|\s+am)\s+(?:also\s+)?(?P<v2>diabetic|asthmatic|epileptic|pregnant|"
    r"colou?r-?blind|deaf|blind|lactose\s+intolerant|gluten\s+intolerant|celiac|coeliac|"
    r"autistic|dyslexic|anemic|anaemic|hard\s+of\s+hearing|in\s+a\s+wheelchair)\b"
)


def m_condition(c: Clause) -> list[Slot]:
    m = _CONDITION.search(c.text)
    if not m:
        return []
    cond = norm_value(m.group("v") or m.group("v2"))
    neg = _NOT_NOW.search(c.text[: m.start() + 12])
    if neg:
        return [clause_slot(c, f"condition:{cond}", "", negated=True, change=True)]
    return [clause_slot(c, f"condition:{cond}", cond, importance=0.9)]


_REL_EN = "|".join(sorted(FAMILY_EN, key=len, reverse=True))
_PERSON = r"(?P<name>[A-Z][a-zA-Z'’-]+(?:\s+[A-Z][a-zA-Z'’-]+)?)"
_FAMILY_MY = re.compile(
    r"(?i:\bmy\s+(?:(?:older|younger|little|big|eldest|oldest|youngest|twin|baby|step|new|"
    r"late|ex-?|first|second|only)\s+)?(?P<rel>" + _REL_EN + r")(?:'s\s+name\s+is|\s+is\s+"
    r"(?:called|named)|,?\s+(?:is\s+)?called|,?\s+named|\s+is|,)?\s+)" + _PERSON
)
_FAMILY_HAVE = re.compile(
    r"(?i:\bi\s+(?:have|'ve\s+got|have\s+got)\s+(?P<count>a|an|one|two|three|four|five|\d+)\s+"
    r"(?:(?:older|younger|little|big|twin|baby|teenage|grown|adult|step)\s+)?"
    r"(?P<rel>" + _REL_EN + r")(?:s|ren)?)(?:,?\s+(?i:named|called)\s+" + _PERSON + r")?"
)
_FAMILY_AND = re.compile(
    r"(?i:(?:\band|,)\s+(?:a|an|one|my)\s+(?:(?:older|younger|little|big|baby|twin)\s+)?"
    r"(?P<rel>" + _REL_EN + r")(?:,?\s+(?:named|called)|,)\s+)" + _PERSON
)
_FAMILY_IS = re.compile(
    _PERSON + r"(?i:\s+is\s+my\s+(?:(?:older|younger|little|big|eldest|youngest)\s+)?"
    r"(?P<rel>" + _REL_EN + r"))\b"
)
_NOT_NAMES = frozenset(
    {"is", "was", "has", "and", "the", "a", "an", "i", "he", "she", "it", "they", "we",
     "who", "which", "that", "this", "in", "on", "at", "to", "from", "with", "for", "of",
     "my", "will", "can", "just", "also", "loves", "likes", "turns", "lives", "works"}
)


def _relation(rel: str) -> str:
    key = rel.lower()
    if key.endswith("ren"):
        key = key[:-3]
    return FAMILY_EN.get(key) or FAMILY_EN.get(key.rstrip("s"), key)


def family_attr(rel: str, name: str) -> str:
    if rel.startswith("pet:"):
        return f"{rel}:{name}" if name else rel
    if rel in UNIQUE_RELATIONS or not name:
        return f"family:{rel}"
    return f"family:{rel}:{name}"


def m_family(c: Clause) -> list[Slot]:
    out: dict[str, Slot] = {}
    for pat in (_FAMILY_MY, _FAMILY_IS, _FAMILY_HAVE, _FAMILY_AND):
        for m in pat.finditer(c.text):
            rel = _relation(m.group("rel"))
            name = m.groupdict().get("name") or ""
            if name and (name.split()[0].lower() in _NOT_NAMES
                         or name.split()[0].lower() in NATIONALITIES):
                name = ""
            if pat is _FAMILY_HAVE and not name:
                count = m.group("count").lower()
                count = "one" if count in ("a", "an", "one") else count
                attr = f"family:{rel}:count"
                out.setdefault(attr, clause_slot(c, attr, count, importance=0.8))
                continue
            if not name:
                continue
            value = norm_value(name)
            typ = "fact" if rel.startswith("pet:") else "identity"
            attr = family_attr(rel, value)
            out.setdefault(attr, clause_slot(c, attr, value, type=typ, importance=0.85))
    return list(out.values())


# -- preferences -------------------------------------------------------------------------

_DIET_NEG = re.compile(
    r"(?i)\bi(?:'m|\s+am)\s+(?:not|no\s+longer)\s+(?:a\s+|an\s+)?(?:strict\s+|strictly\s+)?"
    r"(?P<d>" + DIETS + r")\b|\bi(?:'ve|\s+have)\s+(?:stopped|quit)\s+being\s+(?:a\s+|an\s+)?"
    r"(?P<d2>" + DIETS + r")\b|\bi\s+(?:don'?t|do\s+not)\s+(?:eat|follow|do)\s+"
    r"(?P<d3>" + DIETS + r")\s+any\s*more\b"
)
_DIET = re.compile(
    r"(?i)\b(?:i(?:'m|\s+am)|im)\s+(?:(?:now|still|also|strictly|strict|fully|mostly|100%|"
    r"completely|a|an|actually|really|pretty\s+much|basically)\s+)*(?P<d>" + DIETS + r")\b"
    r"|\bi\s+(?:now\s+|also\s+|still\s+|strictly\s+)?(?:eat|follow|keep|went|go|have\s+gone|"
    r"'ve\s+gone|turned|became|have\s+become|'ve\s+become|eat\s+only)\s+(?:a\s+|an\s+)?"
    r"(?P<d2>" + DIETS + r")\b|\bi(?:'m|\s+am)\s+on\s+an?\s+(?P<d3>" + DIETS + r")\s+diet\b"
    r"|\bmy\s+diet\s+is\s+(?:now\s+)?(?P<d4>" + DIETS + r")\b"
)
_FOOD_LIST = r"(?:any\s+)?(?:" + FOODS + r")(?:\s*(?:,|and|or|&)\s*(?:also\s+)?(?:" + FOODS + r"))*"
_DIET_NO = re.compile(
    r"(?i)\bi\s+(?:(?:do\s+not|don'?t|no\s+longer|never|can'?t|cannot|won'?t|stopped|"
    r"quit|avoid|gave\s+up)\s+)(?:eat(?:ing)?\s+|touch\s+|consume\s+|eating\s+)?"
    r"(?P<f>" + _FOOD_LIST + r")\b"
)
_DIET_EAT = re.compile(
    r"(?i)\bi\s+(?:(?:now|also|only|do|still|mostly|mainly|usually|happily)\s+)*"
    r"(?:eat|have\s+started\s+eating|started\s+eating|am\s+eating|'m\s+eating)\s+"
    r"(?P<f>" + _FOOD_LIST + r")\b"
)
_DIET_CANON = {"veggie": "vegetarian", "pescetarian": "pescatarian"}


def _diet(d: str) -> str:
    d = d.lower().replace(" ", "-")
    return _DIET_CANON.get(d, d)


def m_diet(c: Clause) -> list[Slot]:
    m = _DIET_NEG.search(c.text)
    if m:
        d = _diet(m.group("d") or m.group("d2") or m.group("d3"))
        return [clause_slot(c, "diet", "", negated=True, change=True, importance=0.7,
                             details={"not": d})]
    m = _DIET.search(c.text)
    if m:
        d = _diet(next(g for g in m.groups() if g))
        return [clause_slot(c, "diet", d, importance=0.7)]
    m = _DIET_NO.search(c.text)
    if m:
        foods = split_list(strip_word(m.group("f"), ("any",)))
        return [clause_slot(c, f"avoids:{f}", f"avoids {f}", importance=0.65) for f in foods]
    m = _DIET_EAT.search(c.text)
    if m:
        foods = split_list(m.group("f"))
        return [clause_slot(c, "diet", "eats " + " and ".join(foods), importance=0.65)]
    return []


_LANG_EN = "|".join(LANGS_EN)
_ANSWER_NOUN = (
    r"(?:answers?|repl(?:y|ies)|responses?|explanations?|messages?|output|summar(?:y|ies))"
)
_ANSWER_LANG = re.compile(
    r"(?i)\b(?:answer|reply|respond|write|talk|speak|communicate|chat|explain|text)"
    r"(?:\s+(?:to\s+)?(?:me|back))?(?:\s+(?:only|always|just|please|again))?\s+in\s+"
    r"(?P<l>" + _LANG_EN + r")\b"
    r"|\b" + _ANSWER_NOUN + r"\s+(?:\w+\s+){0,2}?in\s+(?P<l2>" + _LANG_EN + r")\b"
    r"|\b(?:use|switch\s+to|stick\s+to|stick\s+with|prefer|want)\s+(?P<l3>" + _LANG_EN + r")"
    r"(?:\s+(?:please|for\s+" + _ANSWER_NOUN + r"|" + _ANSWER_NOUN + r"))?\s*$"
    r"|\bin\s+(?P<l4>" + _LANG_EN + r")\s+(?:please|from now on)\b"
)
_CONCISE = re.compile(
    r"(?i)\b(?:short|shorter|brief|briefer|concise|succinct|terse|compact|quick)\b"
    r"(?:\s+\w+){0,2}?\s+" + _ANSWER_NOUN + r"|\b(?:" + _ANSWER_NOUN
    + r"|it|them|things)\s+(?:\w+\s+){0,2}?(?:short|shorter|brief|concise|succinct|"
    r"to\s+the\s+point|snappy)\b|\bbe\s+(?:more\s+)?(?:brief|concise|succinct|terse)\b"
    r"|\b(?:less|not\s+so|not\s+too)\s+(?:verbose|wordy|long)\b|\bjust\s+the\s+"
    r"(?:conclusion|answer|bottom\s+line|gist|facts|result)\b|\btl;?dr\b|\bno\s+"
    r"(?:long|lengthy)\s+" + _ANSWER_NOUN
)
_DETAILED = re.compile(
    r"(?i)\b(?:detailed|thorough|in-depth|in\s+depth|long|longer|comprehensive|elaborate|"
    r"exhaustive|full|fuller|extensive|step-by-step)\b(?:\s+\w+){0,2}?\s+" + _ANSWER_NOUN
    + r"|\b(?:" + _ANSWER_NOUN + r"|it|them|things)\s+(?:\w+\s+){0,2}?"
    r"(?:detailed|thorough|longer|in\s+depth|comprehensive)\b|\b(?:go|going)\s+into\s+"
    r"(?:more\s+|a\s+lot\s+of\s+|great\s+)?detail|\bmore\s+detail(?:s|ed)?\b|\bin\s+"
    r"(?:more\s+|great\s+|full\s+)?detail\b|\breasoning\s+spelled\s+out\b|\bspell\s+out\b"
    r"|\bbe\s+(?:more\s+)?(?:thorough|detailed|comprehensive)\b|\bnot\s+too\s+(?:short|brief)\b"
)
_NOT_JUST = re.compile(r"(?i)\bnot\s+(?:just|only|merely|simply)\s+[^,.;]+")
_FORMAT = re.compile(
    r"(?i)\b(?:use|using|with|in|as|prefer|give\s+me|format\s+(?:it\s+)?as|want)\s+(?:a\s+|the\s+)?"
    r"(?P<f>bullet(?:ed)?[\s-]*points?|bullets|bullet(?:ed)?\s+lists?|numbered\s+lists?|"
    r"tables?|markdown|plain\s+text|code\s+(?:examples|snippets|blocks)|headings|emojis?|"
    r"lists?)\b"
)
_TONE = re.compile(
    r"(?i)\b(?:be|keep\s+it|sound|tone|more|stay|prefer\s+a|want\s+a)\s+(?:more\s+|a\s+bit\s+more\s+)?"
    r"(?P<t>formal|casual|friendly|professional|informal|polite|direct|blunt|playful|"
    r"serious|warm)\b(?:\s+tone)?"
)
_LASTING = re.compile(
    r"(?i)\b(?:always|never|from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|"
    r"every\s+time|each\s+time|whenever|by\s+default|from\s+today)\b"
)
_INSTRUCTION_VERB = re.compile(
    r"(?i)^(?:please\s+)?(?:(?:always|never|from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?"
    r"future|by\s+default|whenever\s+[^,]+,)\s*,?\s*)*(?:please\s+)?(?:always\s+|never\s+)?"
    r"(?:use|include|add|keep|write|avoid|stop|start|don'?t|do\s+not|make|give|show|cite|"
    r"mention|ask|remind|check|answer|reply|respond|format|call|send|put|sign|address|"
    r"suggest|recommend|explain|list|double-check|confirm|skip|be)\b"
)


def _answer_head(c: Clause, what: str) -> str:
    if _SAYS_I.search(c.text):
        return c.third()
    words = without_word(strip_word(c.text, ("please",)), "please").replace(
        "your ", "").strip(STRIP_CHARS)
    return f"The user wants {what} ({words[:1].lower()}{words[1:]})"


def m_answer_style(c: Clause) -> list[Slot]:
    m = _ANSWER_LANG.search(c.text)
    if m:
        lang = LANGS_EN[next(g for g in m.groups() if g).lower()]
        return [make_slot("answer_language", lang,
                      _answer_head(c, f"answers in {lang.capitalize()}"),
                      from_clause=True, importance=0.7)]
    text = _NOT_JUST.sub("", c.text)
    detailed, concise = (any(not opens_label(text, m.start()) for m in pattern.finditer(text))
                         for pattern in (_DETAILED, _CONCISE))
    if detailed != concise:
        value = "detailed" if detailed else "concise"
        return [make_slot("answer_length", value, _answer_head(c, f"{value} answers"),
                      from_clause=True, importance=0.6)]
    m = _FORMAT.search(c.text)
    if m and _ASKS_STYLE.search(
                       c.text):
        fmt = norm_value(m.group("f")).replace("bulleted", "bullet").replace("-", " ")
        if fmt in ("bullets", "bullet point", "bullet list", "bullet lists"):
            fmt = "bullet points"
        return [make_slot("answer_format", fmt, _answer_head(c, f"answers formatted as {fmt}"),
                      from_clause=True, importance=0.55)]
    m = _TONE.search(c.text)
    if m:
        tone = m.group("t").lower()
        return [make_slot("answer_tone", tone, _answer_head(c, f"a {tone} tone"),
                      from_clause=True, importance=0.55)]
    return []


def m_instruction(c: Clause) -> list[Slot]:
    """A lasting (or one-off) instruction to the assistant that fits no known slot."""
    if not _INSTRUCTION_VERB.search(c.text) or CONNECTOR.starts(c.raw):
        return []
    if not (_LASTING.search(c.text) or ONE_OFF_EN.search(c.raw)):
        return []
    body = re.sub(r"(?i)^(?:(?:please|from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|"
                  r"by\s+default|from\s+today)[\s,]+)+", "", c.text.strip(STRIP_CHARS))
    body = third_person_en(body)
    return [make_slot("", "", f"The user asks the assistant to {body[0].lower()}{body[1:]}",
                  type="preference", importance=0.6, from_clause=True,
                  details={"instruction": True})]


_LIKE = re.compile(
    r"(?i)\b(?:i|we)(?:\s+|(?=['’]))(?:(?:really|absolutely|just|also|do|totally|truly|genuinely|"
    r"especially|still|kind\s+of|sort\s+of|quite)\s+)*(?P<verb>love|like|enjoy|adore|"
    r"am\s+into|'m\s+into|am\s+(?:a\s+)?(?:big\s+|huge\s+|massive\s+)?fan\s+of|"
    r"'m\s+(?:a\s+)?(?:big\s+|huge\s+|massive\s+)?fan\s+of|am\s+passionate\s+about|"
    r"'m\s+passionate\s+about|dig|prefer)\s+(?P<obj>[^,.;!?]+)"
)
_DISLIKE = re.compile(
    r"(?i)\b(?:i|we)(?:\s+|(?=['’]))(?:(?:really|absolutely|just|also|totally|truly|still|kind\s+of|"
    r"sort\s+of)\s+)*(?P<verb>hate|dislike|detest|loathe|can'?t\s+stand|cannot\s+stand|"
    r"can\s+not\s+stand|don'?t\s+like|do\s+not\s+like|don'?t\s+enjoy|do\s+not\s+enjoy|"
    r"am\s+not\s+(?:a\s+)?(?:big\s+)?fan\s+of|'m\s+not\s+(?:a\s+)?(?:big\s+)?fan\s+of|"
    r"can'?t\s+bear|no\s+longer\s+like|don'?t\s+care\s+for|am\s+sick\s+of|'m\s+sick\s+of|"
    r"am\s+tired\s+of|'m\s+tired\s+of)\s+(?P<obj>[^,.;!?]+)"
)
_CONSUME = re.compile(
    r"(?i)^(?:listening\s+to|watching|reading(?:\s+about)?|playing|eating|drinking|"
    r"cooking|visiting|going\s+to|learning\s+about|hearing)\s+"
)
OBJECT_STOP = re.compile(
    r"(?i)\s+(?:while|when|whenever|because|since|if|as|during|but|so|though|although|"
    r"with\s+my|on\s+(?:the\s+)?(?:weekends?|weekdays?|mondays?|tuesdays?|wednesdays?|"
    r"thursdays?|fridays?|saturdays?|sundays?)|in\s+my\s+(?:free|spare)\s+time|every\s+\w+|"
    r"at\s+(?:night|home|work)|after\s+work|before\s+bed|a\s+lot|so\s+much|very\s+much|"
    r"the\s+most|too|these\s+days|lately|nowadays|now|anymore|any\s+more)\b.*$"
)
_FAVORITE = re.compile(
    r"(?i)\bmy\s+(?:all-time\s+|absolute\s+)?favou?rite\s+(?P<k>[\w\s-]{2,30}?)\s+"
    r"(?:is|are|has\s+to\s+be|would\s+be)\s+(?P<v>[^,.;!?]+)"
)
_HOBBY = re.compile(
    r"(?i)\bmy\s+(?:main\s+|favou?rite\s+|new\s+)?(?:hobby|hobbies|pastime|passion)\s+"
    r"(?:is|are|has\s+become|includes?)\s+(?P<v>[^,.;!?]+)"
    r"|\bin\s+my\s+(?:free|spare)\s+time,?\s+i\s+(?:like\s+to\s+|love\s+to\s+|enjoy\s+|usually\s+"
    r"|often\s+)?(?P<v2>[a-z]+)"
)
_BRIT = {"colour": "color", "flavour": "flavor", "favourite": "favorite"}


def _topic_of(obj: str) -> tuple[str, bool]:
    """(topic, is_activity): "listening to jazz music" -> ("jazz music", False)."""
    obj = OBJECT_STOP.sub("", obj.strip())
    obj = strip_word(obj, ("to",))
    consumed = _CONSUME.sub("", obj)
    if consumed != obj:
        return norm_value(consumed), False
    first = obj.split()[0].lower() if obj.split() else ""
    if first.endswith("ing") and len(first) > 4 and first not in ("thing", "things", "king",
                                                                   "spring", "evening"):
        return first, True
    return norm_value(obj), False


def m_likes(c: Clause) -> list[Slot]:
    m = _FAVORITE.search(c.text)
    if m:
        key = " ".join(_BRIT.get(w, w) for w in norm_value(m.group("k")).split())
        value = norm_value(m.group("v"))
        return [clause_slot(c, f"favorite:{key}", value, importance=0.55)]
    m = _HOBBY.search(c.text)
    if m:
        raw = m.group("v") or m.group("v2") or ""
        items = split_list(OBJECT_STOP.sub("", raw))
        return [clause_slot(c, f"hobby:{i}", i, importance=0.55) for i in items[:4] if i]
    for pat, polarity in ((_DISLIKE, "dislikes"), (_LIKE, "likes")):
        m = pat.search(c.text)
        if not m:
            continue
        # "I prefer X" only counts as a taste when X is a thing, not a way of answering.
        if (polarity == "likes" and m.group("verb").lower().startswith("prefer")
                and re.search(_ANSWER_NOUN, m.group("obj"), re.I)):
            return []
        if _POINTS_AWAY.starts(m.group("obj")):
            return []
        if re.match(r"(?i)to\s+", m.group("obj")) and not re.match(
                r"(?i)to\s+(?:listen|watch|read|play|cook|eat|drink|go|visit)", m.group("obj")):
            obj = strip_word(m.group("obj"), ("to",))
            topic, activity = obj.split()[0].lower() + "ing" if obj.split() else "", True
            topic = topic[:-4] + "ing" if topic.endswith("eing") else topic
        else:
            topic, activity = _topic_of(m.group("obj"))
        if not topic or len(topic.split()) > 5:
            return []
        if activity and polarity == "likes":
            return [clause_slot(c, f"hobby:{topic}", topic, importance=0.5)]
        return [clause_slot(c, f"likes:{topic}", f"{polarity} {topic}", importance=0.5)]
    return []
