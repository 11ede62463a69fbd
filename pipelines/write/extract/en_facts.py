"""English patterns about the user's world: where they live and work, contact details,
tools, project facts (ports, hosts, versions), task details and generic "my X is Y".
"""

from __future__ import annotations

import re

from sleepmem.pipelines.language.words import Phrases, strip_trailing_word, strip_word
from sleepmem.pipelines.text import (
    STRIP_CHARS,
    clean_end,
    norm_value,
    third_person_en,
)
from sleepmem.pipelines.vocab import (
    ATTR_SYNONYMS,
    FAMILY_EN,
    JOBS,
    NATIONALITIES,
    REDACTED,
    SECRET_WORDS,
    TECH,
)
from sleepmem.pipelines.write.extract.en_person import OBJECT_STOP
from sleepmem.pipelines.write.extract.slots import Clause, Slot, clause_slot, make_slot
from sleepmem.pipelines.write.extract.statements import preference_cue

# -- facts about the user ----------------------------------------------------------------

_PLACE = (
    r"(?P<v>(?:the\s+)?[A-Z][\w'’.-]*(?:[ -](?:[A-Z][\w'’.-]*|(?:de|del|da|do|of|upon|on|am|la|"
    r"le|sur|im|an|der)(?=[ -][A-Z])))*)"
)
_LIVE = re.compile(
    r"(?i:\b(?:i|we)(?:'ve|\s+have)?\s+(?:(?:now|currently|still|also|actually|mostly|really|"
    r"happily)\s+)*(?:live|living|reside|am\s+living|'m\s+living|are\s+living|'re\s+living|"
    r"am\s+staying|'m\s+staying|have\s+been\s+living|'ve\s+been\s+living|been\s+living|lived|"
    r"am\s+residing|'m\s+residing)\s+in\s+(?:the\s+(?:suburbs|outskirts|centre|center|"
    r"north|south|east|west|middle|heart|countryside)\s+(?:of|outside)\s+)?)" + _PLACE
)
_THANKS = Phrases(["please", "thanks", "thank you"])


def _not_an_employer(name: str) -> bool:
    """"myself", "home", "a living": what "I work for …" names that is no employer."""
    low = name.lower()
    low = low[:-1] if low.endswith("\n") else low
    return low in ("myself", "home") or (
        low.startswith("a") and low[1:2].isspace() and low[1:].lstrip() == "living")


def _before_thanks(raw: str) -> str:
    """The text before the white space that leads a closing "please" / "thanks"."""
    for i, ch in enumerate(raw):
        if ch.isspace() and (i == 0 or not raw[i - 1].isspace()):
            rest = raw[i:].lstrip()
            if _THANKS.starts(rest):
                return raw[:i]
    return raw


def _snake_spaced(text: str) -> str:
    """Each run of white space made one "_"."""
    out: list[str] = []
    space = False
    for ch in text:
        if not ch.isspace():
            out.append(ch)
        elif not space:
            out.append("_")
        space = ch.isspace()
    return "".join(out)


_LIVED = Phrases(["lived"])
_HAVE = Phrases(["have", "'ve"])
_CHANGED = Phrases(["now", "moved", "changed", "switched"])
_NOT_A_VALUE = Phrases(["that", "to", "not", "the one", "so", "very", "really", "too", "kind of",
                        "a bit", "pretty"])
_BASED = re.compile(
    r"(?i:\b(?:i|we)(?:'m|\s+am|'re|\s+are)\s+(?:(?:now|currently|still|also|actually)\s+)*"
    r"(?:based|located|settled|living)\s+(?:in|out\s+of)\s+)" + _PLACE
    + r"|(?i:\bmy\s+(?:home|place|house|flat|apartment)\s+is\s+in\s+)" + _PLACE.replace("v>", "v2>")
    + r"|(?i:\b(?:i|we)\s+(?:call|now\s+call)\s+)" + _PLACE.replace("v>", "v3>")
    + r"(?i:\s+home)"
)
_MOVE = re.compile(
    r"(?i:\b(?:i|we)(?:'ve|\s+have)?\s+(?:(?:just|recently|finally|now|also|actually|since)\s+)*"
    r"(?:moved|relocated|emigrated|immigrated|moved\s+house|have\s+moved|'ve\s+moved)"
    r"(?:\s+(?:back|over|all\s+the\s+way|house))?\s+(?:from\s+[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*)*"
    r"\s+)?(?:to|into)\s+)" + _PLACE
)
_NOT_LIVE = re.compile(
    r"(?i:\bi\s+(?:don'?t|do\s+not|no\s+longer)\s+live\s+in\s+)" + _PLACE
)
_FROM = re.compile(
    r"(?i:\b(?:i(?:'m|\s+am)|i\s+come|i\s+grew\s+up|i\s+was\s+raised)\s+(?:originally\s+)?"
    r"(?:from|in)\s+)" + _PLACE
)
_PAST_WORDS = re.compile(
    r"(?i)\b(?:ago|back then|as a (?:kid|child)|years?\s+before|until|when i was)\b"
)


def _place_ok(place: str) -> bool:
    low = norm_value(place)
    return bool(low) and low not in TECH and low.split()[0] not in NATIONALITIES - {"new"}


def m_residence(c: Clause) -> list[Slot]:
    m = _NOT_LIVE.search(c.text)
    if m and _place_ok(m.group("v")):
        return [clause_slot(c, "residence", "", negated=True, change=True, importance=0.6,
                             details={"not": norm_value(m.group("v"))})]
    m = _MOVE.search(c.text)
    if m and _place_ok(m.group("v")):
        place = m.group("v").strip()
        tail = clean_end(third_person_en(c.text[m.end():]))
        head = f"The user lives in {place} (moved there{' ' + tail.strip() if tail else ''})"
        return [make_slot("residence", norm_value(place), head, change=True, importance=0.65)]
    m = _LIVE.search(c.text)
    if m and _place_ok(m.group("v")):
        if _LIVED.search(m.group(0)) and not _HAVE.search(m.group(0)):
            return []  # "I lived in Paris" is the past, not where the user lives
        if _PAST_WORDS.search(c.text):
            return []
        return [clause_slot(c, "residence", norm_value(m.group("v")), importance=0.65)]
    m = _BASED.search(c.text)
    if m:
        place = (m.group("v") or m.group("v2") or m.group("v3") or "").strip()
        if _place_ok(place):
            tail = clean_end(third_person_en(c.text[m.end():]))
            head = f"The user lives in {place}" + (f" {tail}" if tail else "")
            return [make_slot("residence", norm_value(place), head, importance=0.65)]
    m = _FROM.search(c.text)
    if m and _place_ok(m.group("v")):
        return [clause_slot(c, "hometown", norm_value(m.group("v")), importance=0.6)]
    return []


_ORG = (
    r"(?P<org>(?:the\s+)?(?-i:[A-Z][\w&.'’-]*)(?:\s+(?:(?-i:[A-Z][\w&.'’-]*)|of|and|&|de|for|"
    r"hospital|university|school|college|clinic|bank|group|labs?|inc\.?|ltd\.?|gmbh|"
    r"corporation|corp\.?|company|institute|center|centre|agency|studio|foundation|"
    r"council|ministry|department|\d+))*|(?:a|an)\s+(?:[\w-]+\s+){0,3}?(?:company|startup|"
    r"start-up|bank|agency|firm|hospital|school|university|college|clinic|restaurant|"
    r"cafe|shop|store|lab|nonprofit|non-profit|ngo|studio|consultancy|factory|hotel|"
    r"bakery|law\s+firm|tech\s+company|corporation|government\s+agency))"
)
_WORK_AS = re.compile(
    r"(?i)\bi\s+(?:(?:now|currently|still|also|actually|mostly|just)\s+)*(?:work|am\s+working|"
    r"'m\s+working|have\s+worked|'ve\s+worked|have\s+been\s+working|'ve\s+been\s+working|"
    r"started\s+working|started)\s+as\s+(?:an?\s+|the\s+)?(?P<occ>[\w\s-]{2,40}?)"
    r"(?:\s+(?:at|for|in|with)\s+" + _ORG + r")?(?=\s*(?:[,.;!?]|$|\s+(?:since|and|but|so|"
    r"now|for|in|where|which|because)\b))"
)
_I_AM_JOB = re.compile(
    r"(?i)\bi(?:'m|\s+am)\s+(?:(?:now|currently|still|also|actually|just|a\s+full-time|"
    r"a\s+part-time)\s+)*(?:an?\s+|the\s+)(?P<occ>(?:[\w-]+\s+){0,3}?(?:" + JOBS + r"))\b"
    r"(?:\s+(?:at|for|with|in)\s+" + _ORG + r")?"
)
_WORK_AT = re.compile(
    r"(?i)\bi\s+(?:(?:now|currently|still|also|actually|just)\s+)*(?:work|am\s+working|"
    r"'m\s+working|have\s+been\s+working|'ve\s+been\s+working|am\s+employed|'m\s+employed|"
    r"intern|am\s+interning|'m\s+interning)\s+(?:at|for|by|with)\s+" + _ORG
)
_JOINED = re.compile(
    r"(?i)\bi\s+(?:(?:just|recently|finally)\s+)*(?:joined|started\s+(?:a\s+new\s+job\s+|"
    r"working\s+)?(?:at|with|for)|got\s+a\s+(?:new\s+)?job\s+(?:at|with)|switched\s+(?:jobs\s+)?to|"
    r"accepted\s+an?\s+(?:offer|job|position)\s+(?:at|from|with))\s+" + _ORG
    + r"(?:\s+as\s+(?:an?\s+)?(?P<occ2>[\w\s-]{2,40}?))?(?=\s*(?:[,.;!?]|$))"
)
_MY_JOB = re.compile(
    r"(?i)\bmy\s+(?:new\s+|current\s+)?(?:job|occupation|profession|role|job\s+title|"
    r"title|position)\s+is\s+(?:now\s+)?(?:an?\s+)?(?P<occ>[^,.;!?]{2,40})"
    r"|\bmy\s+(?:new\s+|current\s+)?(?:employer|company)\s+is\s+(?:now\s+)?" + _ORG
)
_SELF_EMPLOYED = re.compile(
    r"(?i)\bi(?:'m|\s+am)\s+(?:now\s+)?(?P<occ>self-employed|unemployed|retired|between\s+jobs|"
    r"a\s+freelancer|freelancing|out\s+of\s+work|looking\s+for\s+(?:a\s+)?(?:job|work))\b"
)


def _occupation(raw: str) -> str:
    occ = norm_value(raw)
    return strip_trailing_word(occ, ("now", "currently", "here"))


def m_employment(c: Clause) -> list[Slot]:
    out: list[Slot] = []
    org: str | None = None
    m = _WORK_AS.search(c.text) or _I_AM_JOB.search(c.text)
    if m:
        occ = _occupation(m.group("occ"))
        if occ and occ not in NATIONALITIES and len(occ.split()) <= 5:
            out.append(clause_slot(c, "occupation", occ, importance=0.65))
            org = m.group("org")
    else:
        m = _SELF_EMPLOYED.search(c.text) or _MY_JOB.search(c.text)
        if m and m.groupdict().get("occ"):
            out.append(clause_slot(c, "occupation", _occupation(m.group("occ")),
                                    importance=0.65))
        elif m:
            org = m.group("org")
    change = False
    if org is None:
        m = _WORK_AT.search(c.text) or _JOINED.search(c.text)
        if m:
            org = m.group("org")
            change = m.re is _JOINED
            if m.groupdict().get("occ2"):
                out.append(clause_slot(c, "occupation", _occupation(m.group("occ2")),
                                        change=True, importance=0.65))
    if org:
        name = org.strip(STRIP_CHARS)
        if _not_an_employer(name):
            return out
        if out and name.lower().startswith(("a ", "an ")):
            # "a pharmacist at a hospital": an indefinite place names no employer, and the
            # occupation's memory already keeps the whole clause; a second memory of the
            # same words would be one fact counted twice.
            return out
        # Both slots keep the whole clause: "works as a nurse at X" answers "where does
        # the user work?" better than a bare "works at X".
        out.append(make_slot("employer", norm_value(name), c.third(), change=change,
                             from_clause=True, importance=0.6))
    return out


_EMAIL = re.compile(
    r"(?i)\b(?:my\s+(?:new\s+|work\s+|personal\s+|main\s+)?e-?mail(?:\s+address)?\s+is|"
    r"e-?mail\s+me\s+at|reach\s+me\s+at|contact\s+me\s+at|write\s+(?:to\s+)?me\s+at|"
    r"you\s+can\s+reach\s+me\s+at|send\s+(?:it|them|this)\s+to)\s+"
    r"(?P<v>[\w.+-]+@[\w-]+(?:\.[\w-]+)+)"
)
_PHONE = re.compile(
    r"(?i)\b(?:my\s+(?:new\s+|work\s+|personal\s+)?(?:phone|mobile|cell|cellphone|telephone|"
    r"number)(?:\s+number)?\s+is|(?:call|text|reach|contact)\s+me\s+(?:at|on))\s+"
    r"(?P<v>\+?\d[\d ()./-]{5,}\d)"
)
_ADDRESS = re.compile(
    r"(?i)\bmy\s+(?:new\s+|current\s+)?(?P<kind>home\s+|shipping\s+|delivery\s+|mailing\s+|"
    r"postal\s+|billing\s+|street\s+|work\s+|office\s+)?address\s*(?:is|:|,)\s*(?:now\s+)?"
    r"(?P<v>[^;!?]{4,})"
    r"|\b(?P<ship>ship|send|deliver|mail|post)\s+(?:it|them|this|that|the\s+\w+|my\s+\w+|"
    r"everything|orders?|packages?)?\s*(?:to|at)\s+(?:my\s+(?:new\s+)?(?:home\s+)?"
    r"(?:address|place|house)[,:]?\s*)?(?P<v2>\d[^;!?]{3,})"
    r"|\bi\s+(?:now\s+)?live\s+at\s+(?P<v3>\d[^;!?]{3,})"
)


def m_contact(c: Clause) -> list[Slot]:
    m = _EMAIL.search(c.text)
    if m:
        return [make_slot("email", m.group("v").lower(), f"The user's email is {m.group('v')}",
                      importance=0.6)]
    m = _PHONE.search(c.text)
    if m:
        digits = "".join(c for c in m.group("v") if c.isdecimal() or c == "+")
        return [make_slot("phone", digits, f"The user's phone number is {m.group('v').strip()}",
                      importance=0.6)]
    m = _ADDRESS.search(c.text)
    if m:
        raw = m.group("v") or m.group("v2") or m.group("v3")
        address = clean_end(_before_thanks(raw))
        if REDACTED.search(address) or not any(c.isdecimal() or "A" <= c <= "Z" for c in address):
            return []
        kind = (m.group("kind") or "").strip().lower()
        attr = "billing_address" if kind == "billing" else (
            "work_address" if kind in ("work", "office") else "address")
        label = {"billing": "billing address", "work": "work address",
                 "office": "work address"}.get(kind, "shipping address"
                                               if (m.group("ship") or kind == "shipping")
                                               else f"{kind} address".strip())
        return [make_slot(attr, norm_value(address), f"The user's {label} is {address}",
                      importance=0.6)]
    return []


_USE = re.compile(
    r"(?i:\b(?:i|we)\s+(?:(?:mostly|mainly|currently|now|also|still|usually|primarily|only|"
    r"just|always|actually|personally)\s+)*(?:use|am\s+using|'m\s+using|are\s+using|"
    r"'re\s+using|rely\s+on|work\s+with|code\s+in|write\s+in|program\s+in|switched\s+to|"
    r"moved\s+to|started\s+using|have\s+been\s+using|'ve\s+been\s+using)\s+(?:an?\s+|the\s+)?)"
    r"(?P<v>(?-i:[A-Z][\w.+#-]*)(?:\s+(?-i:[A-Z0-9][\w.+#-]*)){0,2})"
    r"(?:\s+(?i:for|to|as|on|in|with)\s+(?P<purpose>[^,.;!?]+))?"
)
_DEVICE = re.compile(
    r"(?i)\bmy\s+(?:(?:new|current|work|personal|main|old)\s+)?(?P<dev>laptop|phone|computer|"
    r"pc|desktop|tablet|car|watch|os|operating\s+system|editor|ide|browser|keyboard|"
    r"monitor|camera|router|smartphone|machine|bike)\s+is\s+(?:now\s+)?(?:an?\s+|the\s+)?"
    r"(?P<v>[^,.;!?]{2,40})"
)


def m_tools(c: Clause) -> list[Slot]:
    m = _DEVICE.search(c.text)
    if m:
        dev = norm_value(m.group("dev"))
        return [clause_slot(c, f"device:{dev}", norm_value(m.group("v")), importance=0.5)]
    m = _USE.search(c.text)
    if not m:
        return []
    tool = m.group("v").strip()
    if REDACTED.search(tool) or tool.lower() in ("i", "my"):
        return []
    purpose = m.group("purpose")
    change = any(w in m.group(0).lower() for w in ("switched", "moved", "started"))
    if purpose:
        p = norm_value(strip_word(purpose.strip(), ("my", "our")))
        p = OBJECT_STOP.sub("", p)
        return [clause_slot(c, f"tool_for:{p}", norm_value(tool), change=change,
                             importance=0.55)]
    return [clause_slot(c, f"uses:{norm_value(tool)}", norm_value(tool), importance=0.5)]



_ENTITY = r"(?P<subj>(?:the\s+|our\s+|my\s+)?[\w.-]+(?:\s+[\w.-]+){0,3}?)"
_PORT = re.compile(
    r"(?i)" + _ENTITY + r"\s+(?:(?:now|currently|still|also|actually|will)\s+)*(?:runs?|is\s+"
    r"running|listens?|is\s+listening|is\s+served|is\s+exposed|is\s+available|is\s+reachable|"
    r"is\s+bound|binds?|serves?|is\s+hosted|lives?|is|sits?|should\s+run|must\s+run)\s+"
    r"(?:on|at|to)\s+(?:port\s+|:)(?P<v>\d{2,5})\b"
    r"|" + _ENTITY.replace("subj>", "subj2>") + r"(?:'s|’s)?\s+port\s+(?:is|=|:)\s+(?:now\s+)?"
    r"(?P<v2>\d{2,5})\b"
    r"|\bthe\s+port\s+(?:of|for)\s+" + _ENTITY.replace("subj>", "subj3>")
    + r"\s+is\s+(?:now\s+)?(?P<v3>\d{2,5})\b"
)
_HOST = re.compile(
    r"(?i)" + _ENTITY + r"\s+(?:(?:now|currently|still)\s+)*(?:is\s+hosted|is\s+deployed|"
    r"is\s+running|runs|lives|is\s+reachable|is\s+available)\s+(?:on|at)\s+"
    r"(?P<v>(?:https?://)?(?:[\w-]+\.)+[a-z]{2,}(?::\d+)?(?:/\S*)?|\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?)"
)
_VERSION = re.compile(
    r"(?i)" + _ENTITY + r"\s+(?:is\s+)?(?:(?:now|currently)\s+)?(?:on|at|uses|running|runs)\s+"
    r"version\s+(?P<v>v?\d+(?:\.\d+)*)\b|\bwe(?:'re|\s+are)\s+(?:now\s+)?(?:on|using|running)\s+"
    + _ENTITY.replace("subj>", "subj2>") + r"\s+(?P<v2>v?\d+(?:\.\d+)+)\b"
)
_SUBJ_STOP = re.compile(
    r"(?i)^(?:it|this|that|which|who|he|she|they|i|we|you|everything|something|there|"
    r"what|so|and|but|now)$"
)


def _entity(raw: str) -> str:
    subj = strip_word(raw.strip(), ("so", "and", "but", "now", "then", "also"))
    subj = strip_word(subj, ("the", "our", "my", "their"))
    return norm_value(subj)


def m_project(c: Clause) -> list[Slot]:
    for pat, attr in ((_PORT, "port"), (_HOST, "host"), (_VERSION, "version")):
        m = pat.search(c.text)
        if not m:
            continue
        groups = m.groupdict()
        subj_raw = groups.get("subj") or groups.get("subj2") or groups.get("subj3") or ""
        value = groups.get("v") or groups.get("v2") or groups.get("v3") or ""
        subj = _entity(subj_raw)
        if not subj or _SUBJ_STOP.match(subj):
            continue
        change = _CHANGED.search(c.text)
        return [clause_slot(c, attr, value.lower(), subject=subj, type="fact",
                             change=change, importance=0.6)]
    return []


# -- tasks -------------------------------------------------------------------------------

_REF_KIND = (
    r"order|ticket|support\s+ticket|booking|tracking|confirmation|reservation|case|"
    r"invoice|flight|policy|claim|shipment|parcel|package|refund|return|rma|incident|"
    r"issue|pr|pull\s+request|reference|account|membership|customer|application|appointment"
)
_REF = re.compile(
    r"(?i)\b(?P<k>" + _REF_KIND + r")\s*(?:number|no\.?|num|#|id|code|ref(?:erence)?)?\s*"
    r"(?:is|was|:|=|of)?\s*#?\s*(?P<v>(?=[\w-]*\d)[A-Za-z]{0,4}[-]?[\dA-Za-z][\w-]{2,})\b"
)
_APPOINTMENT = re.compile(
    r"(?i)\b(?:i\s+have|i've\s+got|i\s+got|there's|there\s+is|my)\s+(?:an?\s+)?"
    r"(?P<what>[\w\s'-]{0,30}?)\s*(?P<kind>appointment|meeting|interview|call|exam|surgery|"
    r"check-?up|flight|reservation|presentation|deadline)\s+(?P<when>(?:on|at|this|next|"
    r"tomorrow|today|tonight|in|later|due|is)\b.*)"
)
_DEADLINE = re.compile(
    r"(?i)\b(?:the\s+|my\s+|our\s+)?(?P<what>[\w\s'-]{2,40}?)\s+is\s+due\s+(?P<when>[^,.;!?]+)"
    r"|\bdeadline\s+(?:for\s+(?P<what2>[\w\s'-]{2,40}?)\s+)?is\s+(?P<when2>[^,.;!?]+)"
    r"|\bi\s+(?:need|have)\s+to\s+(?:finish|submit|send|deliver|file|hand\s+in|complete)\s+"
    r"(?P<what3>[\w\s'-]{2,40}?)\s+by\s+(?P<when3>[^,.;!?]+)"
)


def m_task(c: Clause) -> list[Slot]:
    out: list[Slot] = []
    for ref_m in _REF.finditer(c.text):
        kind = _snake_spaced(ref_m.group("k").lower())
        if kind == "appointment":
            kind = "appointment_ref"
        ref = ref_m.group("v")
        if REDACTED.search(ref) or ref.isalpha():
            continue
        label = kind.replace("_", " ")
        out.append(make_slot(f"{kind}_number", ref.lower(),
                         f"The user's {label} number is {ref}", type="task", importance=0.5))
    if out:
        return out
    m = _APPOINTMENT.search(c.text)
    if m:
        what = norm_value(m.group("what")) or m.group("kind").lower()
        return [clause_slot(c, f"{m.group('kind').lower()}:{what}",
                             norm_value(m.group("when")), type="task", importance=0.5)]
    m = _DEADLINE.search(c.text)
    if m:
        what = norm_value(m.group("what") or m.group("what2") or m.group("what3") or "")
        when = norm_value(m.group("when") or m.group("when2") or m.group("when3") or "")
        if what and when and not _SUBJ_STOP.match(what):
            return [clause_slot(c, f"deadline:{what}", when, type="task", importance=0.5)]
    return []


# -- generic "my X is Y" -----------------------------------------------------------------

_MY_X_IS = re.compile(
    r"(?i)^(?:.{0,20}?\b)?my\s+(?P<k>[a-z][\w\s'-]{1,30}?)\s+(?:is|are)\s+(?:now\s+|still\s+)?"
    r"(?P<v>[^,;!?]{1,60})$"
)
_MY_X_STOP = frozenset(
    {"question", "problem", "issue", "point", "concern", "guess", "plan", "goal", "idea",
     "hope", "understanding", "bad", "fault", "pleasure", "turn", "opinion", "worry",
     "excuse", "reason", "answer", "request", "situation", "feeling", "bet", "advice",
     "dream", "life", "day", "week", "head", "mind", "heart", "computer", "internet",
     "connection", "order", "ticket", "code", "account", "favourite", "favorite", "job",
     "work", "schedule", "family", "stomach", "back", "suggestion", "main concern"}
)


def m_my_x_is(c: Clause) -> list[Slot]:
    m = _MY_X_IS.search(clean_end(c.text))
    if not m:
        return []
    key = norm_value(m.group("k"))
    value = norm_value(m.group("v"))
    if (not key or key in _MY_X_STOP or key.split()[-1] in _MY_X_STOP
            or SECRET_WORDS.search(key) or REDACTED.search(m.group("v"))):
        return []
    if _NOT_A_VALUE.starts(value):
        return []
    if len(value.split()) > 8:
        return []
    if key.split()[-1] in FAMILY_EN:
        # "my husband is a doctor": a lasting fact about family, but no slot to replace.
        return [clause_slot(c, "", value, type="identity", importance=0.7)]
    attr = ATTR_SYNONYMS.get(key)
    if attr is not None:
        return [clause_slot(c, attr, value, importance=0.5)]
    # A key no vocabulary knows ("my body is sensitive to latex"): the sentence's meaning
    # may name the attribute (fallback.framed_found); else the key itself does.
    # "My preferred response is prose": a key that names a liking makes a preference.
    slot = clause_slot(c, key.replace("'s", "").replace(" ", "_"), value, importance=0.5,
                       type="preference" if preference_cue(key) else "fact")
    slot.details["improvised"] = True
    return [slot]
