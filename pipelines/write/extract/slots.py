"""What a pattern finds in a clause (Slot), and the matchers both languages share.

A matcher takes one clause and returns the slots it recognises, or nothing. Forget
requests and technology names look the same in English and Chinese text, so their
matchers live here; the language-specific ones live in extract_en_* and extract_zh.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sleepmem.pipelines.language.words import strip_prefix, strip_word
from sleepmem.pipelines.text import (
    CHANGE_EN,
    CHANGE_ZH,
    STRIP_CHARS,
    clean_end,
    third_person_en,
    third_person_zh,
)
from sleepmem.pipelines.vocab import (
    AMBIGUOUS_TECH,
    COMPONENT_WORDS,
    IDENTITY_ATTRS,
    IDENTITY_PREFIXES,
    PREFERENCE_ATTRS,
    PREFERENCE_PREFIXES,
    TECH,
)
from sleepmem.pipelines.write.extract.forget_topic import clean_forget_topic, forget_topic


@dataclass(slots=True)
class Slot:
    """What a matcher found in one clause, before it becomes a Candidate."""

    type: str
    attribute: str
    value: str
    head: str
    subject: str = "user"
    importance: float | None = None
    change: bool = False
    negated: bool = False
    one_off: bool = False
    from_clause: bool = False  # head rephrases the clause itself (keeps the user's words)
    attach: bool = True  # whether the sentence's unmatched clauses join the statement
    forget_topic: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Clause:
    text: str  # discourse markers stripped
    raw: str
    low: str
    zh: bool

    def third(self) -> str:
        return third_person_zh(self.text) if self.zh else third_person_en(self.text)


Matcher = Callable[[Clause], list[Slot]]


def type_of(attribute: str) -> str:
    if attribute in IDENTITY_ATTRS or attribute.startswith(IDENTITY_PREFIXES):
        return "identity"
    if attribute in PREFERENCE_ATTRS or attribute.startswith(PREFERENCE_PREFIXES):
        return "preference"
    return "fact"


def make_slot(attribute: str, value: str, head: str, **kw: Any) -> Slot:
    return Slot(type=kw.pop("type", None) or type_of(attribute), attribute=attribute,
                value=value, head=head, **kw)


def clause_slot(c: Clause, attribute: str, value: str, **kw: Any) -> Slot:
    """A slot whose statement is the clause itself, in the third person."""
    return make_slot(attribute, value, c.third(), from_clause=True, **kw)


# -- forget requests ---------------------------------------------------------------------

_FORGET_EN = re.compile(
    r"(?i)^(?:(?:please|pls|kindly|can you|could you|would you|i want you to|i'd like you to|"
    r"i need you to|i would like you to)\s+)*(?:forget|delete|erase|remove|wipe|purge|clear|"
    r"drop|scrub|discard|get rid of)\s+(?:about\s+)?"
    r"(?:(?:everything|anything|all|whatever|what|all\s+(?:of\s+)?the\s+\w+|"
    r"the\s+(?:stuff|things?|info(?:rmation)?|details|memories|data|notes))\s+)?"
    r"(?:(?:that\s+)?(?:i(?:'ve|\s+have)?\s+(?:ever\s+)?(?:told|said|shared|mentioned|gave|"
    r"give|wrote)(?:\s+(?:to\s+)?you)?|you\s+(?:know|have|remember|learned|stored|saved|"
    r"keep)(?:\s+about\s+me)?)\s+)?"
    r"(?:about|regarding|concerning|on|related\s+to|of|that\s+(?:i\s+)?(?:mentioned|said))\s+"
    r"(?P<topic>.+)$"
)
_FORGET_EN_MY = re.compile(
    r"(?i)^(?:(?:please|pls|kindly|can you|could you|i want you to|i'd like you to)\s+)*"
    r"(?:forget|delete|erase|remove|wipe|purge|scrub)\s+(?:about\s+)?(?:all\s+)?"
    r"(?P<topic>(?:my|the)\s+.+?)(?:\s+(?:from\s+(?:your\s+)?memory|for\s+good|permanently|"
    r"completely|entirely|info(?:rmation)?|data|details))*$"
)
_FORGET_EN_THAT = re.compile(
    r"(?i)^(?:(?:please|pls|kindly|can you|could you)\s+)*forget\s+(?:that|what)\s+i\s+"
    r"(?:told you|said|mentioned|shared)\s+(?:about\s+)?(?P<topic>.+)$"
)
_FORGET_ZH = re.compile(
    r"^(?:请你?|麻烦你?|你)?(?:把)?(?:忘掉|忘记|忘了|删除|删掉|清除|抹掉|抹去|不要再记得|别再记着)"
    r"(?:掉)?(?:我)?(?:之前|以前|刚才|曾经)?(?:跟你|和你|对你)?(?:说过|讲过|告诉过?你|提到过?|分享过?)?"
    r"(?:的)?(?:所有|全部|一切)?(?:关于|有关)(?P<topic>.+?)"
    r"(?:的)?(?:事情?|内容|信息|一切|记忆|话|事儿|资料|东西)?(?:吧|了|吗|好吗)?$"
)
_FORGET_ZH_MY = re.compile(
    r"^(?:请你?|麻烦你?)?(?:忘掉|忘记|删除|删掉|清除|抹掉)(?:我的|关于我的)(?P<topic>.+?)"
    r"(?:的)?(?:事情?|内容|信息|记忆|资料)?(?:吧|了)?$"
)
_FORGET_ZH_BA = re.compile(
    r"^(?:请你?|麻烦你?)?把(?:我)?(?:说过的)?(?:关于|有关)?(?P<topic>.+?)的(?:事情?|内容|信息|记忆|"
    r"资料|一切)(?:都|全部|统统)?(?:忘掉|忘记|删除|删掉|清除|抹掉)"
)
_FORGET_ZH_BA2 = re.compile(
    r"^(?:请你?|麻烦你?)?把(?:我的|关于我的|有关我的)?(?P<topic>[^，。]+?)(?:都|全部|统统)?"
    r"(?:忘掉|忘记|删除|删掉|清除|抹掉)(?:吧|了|掉)?$"
)
_TOPIC_TRAIL = re.compile(
    r"(?i)(?:,?\s+(?:please|as well|too|completely|entirely|for good|permanently|"
    r"from (?:your )?memory|right now|now|thanks|thank you))+$"
)


def _topic(raw: str) -> str:
    topic = clean_end(raw)
    topic = _TOPIC_TRAIL.sub("", topic)
    topic = strip_word(topic, ("my", "the", "our", "all", "about", "that", "this"))
    topic = strip_prefix(topic, ("我的", "我们的", "我", "有关", "关于"))
    return topic.strip(STRIP_CHARS)


def m_forget(c: Clause) -> list[Slot]:
    patterns = (_FORGET_ZH, _FORGET_ZH_BA, _FORGET_ZH_MY, _FORGET_ZH_BA2) if c.zh else (
        _FORGET_EN_THAT, _FORGET_EN, _FORGET_EN_MY)
    for pat in patterns:
        m = pat.search(clean_end(c.text))
        if m:
            topic = clean_forget_topic(_topic(m.group("topic")))
            if topic:
                return [Slot(type="event", attribute="", value="", head=c.raw,
                             forget_topic=topic, importance=0.5, details={"forget": True})]
    # Any other phrasing of the request: recognised by its shape, topic = what remains.
    loose = forget_topic(c.raw, bare=c.zh)
    if loose is not None:
        return [Slot(type="event", attribute="", value="", head=c.raw, forget_topic=loose,
                     importance=0.5, details={"forget": True})]
    return []



# -- environment and project facts -------------------------------------------------------

TECH_ALIASES: dict[str, str] = {}
for _canon, (_comp, _names) in TECH.items():
    for _n in _names:
        TECH_ALIASES[_n] = _canon
_TECH_RE = re.compile(
    r"(?i)(?<![A-Za-z0-9_.])(?P<t>" + "|".join(re.escape(n) for n in sorted(TECH_ALIASES, key=len,
                                                                   reverse=True))
    + r")(?:\s*v?(?P<ver>\d+(?:\.\d+)*))?(?![A-Za-z0-9_])"
)
_COMPONENT_RE = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?P<c>" + "|".join(re.escape(w) for w in sorted(COMPONENT_WORDS, key=len,
                                                                  reverse=True))
    + r")(?![a-z])"
)
_ENV_CONTEXT = re.compile(
    r"(?i)\b(?:our|we|we're|we've|us|the\s+team|the\s+company|the\s+project|the\s+app|"
    r"the\s+service|the\s+stack|stack|is\s+written\s+in|written\s+in|built\s+(?:with|on)|"
    r"runs?\s+on|running\s+on|hosted\s+on|deployed\s+(?:on|to)|deploy|powered\s+by|"
    r"migrat\w*|switched)\b|我们|公司|项目|用的是|使用|部署|跑在"
    r"|^(?:the|a|our)\s+\w+(?:\s+\w+)?\s+(?:is|are|uses|runs)\b"
)
_TECH_FROM_TO = re.compile(r"(?i)\bfrom\s+(?P<old>[\w. ]+?)\s+to\s+(?P<new>[\w. ]+)")
_TECH_NEG = re.compile(
    r"(?i)\b(?:no\s+longer|don'?t|do\s+not|stopped|not)\s+(?:use|using|run|running)\b"
    r"|不再用|不用了"
)


def m_tech(c: Clause) -> list[Slot]:
    found = []
    for m in _TECH_RE.finditer(c.text):
        alias = m.group("t").lower()
        canon = TECH_ALIASES[alias]
        if canon in AMBIGUOUS_TECH and not m.group("t")[0].isupper():
            continue
        found.append((canon, m))
    comps = [COMPONENT_WORDS[m.group("c").lower()] for m in _COMPONENT_RE.finditer(c.text)]
    if not found or not (_ENV_CONTEXT.search(c.text) or comps):
        return []
    # "we migrated from MySQL to PostgreSQL": only the new one is current.
    ft = _TECH_FROM_TO.search(c.text)
    change = bool(ft) or bool(CHANGE_EN.search(c.text)) or bool(CHANGE_ZH.search(c.text))
    if ft:
        old = {TECH_ALIASES.get(w.lower(), "") for w in [ft.group("old").strip()]}
        found = [(canon, m) for canon, m in found if canon not in old] or found
    neg = bool(_TECH_NEG.search(c.text))
    out = []
    for canon, m in found:
        default = TECH[canon][0]
        comp = comps[0] if len(found) == 1 and comps else default
        if comp in ("backend",) and default == "language":
            comp = "language"
        display = m.group("t") + (f" {m.group('ver')}" if m.group("ver") else "")
        head = f"Tech stack — {comp}: {display}"
        if neg:
            out.append(make_slot(comp, "", head, subject="tech stack", type="fact",
                             negated=True, change=True, importance=0.5, attach=False))
        else:
            out.append(make_slot(comp, canon, head, subject="tech stack", type="fact",
                             change=change, importance=0.55, attach=False,
                             details={"version": m.group("ver")} if m.group("ver") else {}))
    return out
