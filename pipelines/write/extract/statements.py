"""Fail-safe reading of what no vocabulary matcher recognised.

The matchers in en_*/zh are a fast path, not the judgement: a sentence they miss must not
fall through to the cheapest outcome (a short-lived episode). This module decides, by
grammar rather than by vocabulary, what such a sentence is:

- small talk, positively recognised (greetings, thanks, acknowledgements, filler,
  weather): stays an episode that the sweep soon forgets;
- a one-off request ("just this once", "for today only", "这次", "今天先…"): stays in its
  session with the short session lifetime, whatever the request is about;
- a first-person lasting statement ("I'm learning to play the cello", "我最近在学日语"):
  kept as a fact or preference at that type's default lifetime with low importance, with
  an *open slot* (subject + normalised relation) so a later change can supersede it;
- a request to forget, in any phrasing: the topic is what is left once the request words
  are taken away.

It also cleans statements: greetings and connectives never start a memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleepmem.pipelines.language import has_cjk
from sleepmem.pipelines.language.words import Literals, Phrases
from sleepmem.pipelines.small_talk import GREETING_LEAD
from sleepmem.pipelines.text import (
    ACK,
    CHITCHAT,
    HEDGE_EN,
    clean_end,
    norm_value,
    strip_discourse,
)

# -- small talk, positively recognised ------------------------------------------------------

def clean_statement(text: str, zh: bool) -> str:
    """Drop greetings and connectives that lead a statement; keep its sentence case."""
    body = GREETING_LEAD.sub("", text.strip(), count=1)
    if not body or body == text.strip():
        return text
    if zh:
        return body
    return body[:1].upper() + body[1:]


def is_small_talk(sentence: str) -> bool:
    """Greetings, thanks, acknowledgements, filler and weather talk; nothing else."""
    s = sentence.strip()
    if not s:
        return True
    if ACK.match(s):
        return True
    rest = GREETING_LEAD.sub("", s, count=1)
    if not clean_end(rest):
        return True
    return bool(CHITCHAT.search(s)) and not _first_person(rest, _zh(rest))


# -- one-off requests ----------------------------------------------------------------------------

ONE_OFF_ANY_EN = re.compile(
    r"(?i)\b(?:(?:just|only)\s+(?:for\s+)?(?:this|the)\s+(?:once|one\s+time|time|reply|"
    r"answer|response|message|question|conversation|chat|session|request|task|email|one|"
    r"post|draft|trip|flight|booking|order)|this\s+once|just\s+once|only\s+once|"
    r"(?:this|one)\s+time\s+only|(?:only|just)\s+(?:for\s+)?(?:now|today|tonight)|"
    r"for\s+(?:today|tonight|now)\s+only|for\s+(?:this|the)\s+(?:one|next)\s+(?:reply|"
    r"answer|response|message|question)|for\s+this\s+(?:reply|answer|response|message|"
    r"question|conversation|email|trip|flight|booking)|just\s+today|only\s+today|"
    r"(?:a\s+)?one[-\s]off|temporarily|for\s+the\s+time\s+being)\b"
)
ONE_OFF_ANY_ZH = re.compile(
    r"这次|这一次|本次|仅此一次|只此一次|就这一次|暂时|临时|今天先|今天就|今天暂且|这回|这一回|这条|"
    r"先这样|今天只|只是今天|仅今天"
)


def is_one_off(sentence: str) -> bool:
    return bool(ONE_OFF_ANY_ZH.search(sentence) or ONE_OFF_ANY_EN.search(sentence))


# -- first-person lasting statements and their open slot -------------------------------------------

_FIRST_EN = Phrases(["i", "i'm", "im", "i've", "i'd", "i am", "we", "we're", "we've"], loose=True)
_FIRST_ZH = ("我", "俺")
_ADDRESSED = Phrases(["you", "your", "yours"])
_PAST_EPISODE = re.compile(
    r"(?i)\b(?:yesterday|last\s+(?:night|evening)|this\s+(?:morning|afternoon|evening)|"
    r"just\s+now|earlier\s+today|an?\s+hour\s+ago|today|tomorrow|tonight|soon|"
    r"(?:this|next)\s+(?:week|weekend|month|year|time)|right\s+now)\b|昨天|昨晚|刚才|刚刚|今天早上|今早|"
    r"明天|下周|下个月|这周"
)
_HEDGE_ZH = Literals(("我觉得", "可能", "也许", "大概", "好像"))
_QUESTION = re.compile(r"[?？]\s*$|^(?i:what|how|why|when|where|who|which|can|could|would|"
                       r"should|do|does|is|are)\b")
_PREFERENCE_CUE = re.compile(
    r"(?i)\b(?:prefer\w*|rather|like|likes|liking|love|loves|enjoy\w*|favou?rite|fond|"
    r"hate|hates|dislike\w*|can'?t\s+stand|fan\s+of|want|wish)\b"
    r"|喜欢|偏好|偏爱|更爱|爱吃|爱喝|讨厌|不爱|受不了|最爱"
)


def _zh(text: str) -> bool:
    return has_cjk(text)


def _first_person(text: str, zh: bool) -> bool:
    return text.strip().startswith(_FIRST_ZH) if zh else _FIRST_EN.starts(text.strip())


def lasting_first_person(sentence: str) -> bool:
    """A first-person statement about the speaker that is not a question, request, hedge or
    a dated episode: what a person says about themself to be remembered."""
    zh = _zh(sentence)
    body = strip_discourse(GREETING_LEAD.sub("", sentence.strip(), count=1)).strip()
    body = (_LEAD_ADVERB_ZH if zh else _LEAD_ADVERB_EN).sub("", body, count=1)
    if not body or not _first_person(body, zh) or _QUESTION.search(body):
        return False
    if (_ADDRESSED.search(body) or "你" in body or "您" in body) or _PAST_EPISODE.search(body):
        return False
    if zh:
        return not _HEDGE_ZH.search(body) and not _PAST_ZH.search(body)
    if HEDGE_EN.search(body):
        return False
    # Lasting means something still true about the person: at least one clause in the
    # present that states it (not a plan, a mood, a reaction or an obligation).
    return bool(lasting_clauses(body, marker=bool(_LASTING_MARKER.search(sentence))))


_NOT_LASTING_VERB = frozenset({
    "going", "gonna", "should", "will", "'ll", "would", "might", "must", "may", "could",
    "need", "want", "wanna", "think", "guess", "hope", "wonder", "feel", "mean", "see",
    "work", "works", "working", "agree", "disagree", "know", "understand", "forgot", "got",
})
_REACTION_OBJECT = re.compile(r"(?i)^(?:that|this|it|these|those|your|the\s+(?:answer|idea|reply|"
                              r"suggestion|response))\b")


_LEAD_ADVERB_EN = re.compile(
    r"(?i)^(?:(?:and|but|so)\s+)?(?:now|from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|"
    r"these\s+days|nowadays|currently|actually|actualy|honestly|always)\b[\s,]*"
    r"(?:(?:now|from\s+now\s+on|going\s+forward|these\s+days|nowadays)\b[\s,]*)*"
)
# Chinese puts a time adverb before the subject ("现在我有…", "以后我想…").
_LEAD_ADVERB_ZH = re.compile(
    r"^(?:现在|目前|如今|最近|这些天|这阵子|近来|以后|今后|从现在起|从今天起|从现在开始|其实)[，,\s]*")
_LASTING_MARKER = re.compile(
    r"(?i)\b(?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|always|every\s+time|"
    r"by\s+default|whenever)\b"
)
_IMPLIED_I = re.compile(r"(?i)^(?:(?:just|recently|finally)\s+)?(?:moved|relocated)\s+to\b")
# Chinese drops it in any clause, after nothing but words of time ("房租太贵，上个月搬到苏州
# 了"); a clause with its own subject ("公司搬到苏州了") is someone else's move, and one
# going on past the place ("搬到苏州的那家店很好吃") is about something else.
_IMPLIED_I_ZH = re.compile(
    r"^(?:(?:现在|目前|如今|刚刚|刚|最近|终于|已经|上个?月|上周|上星期|上礼拜|去年|今年|前几天|"
    r"前阵子|这个月|年初|年底|月初|月底)[，,\s]*)*"
    r"(?:(?:搬到|搬去|搬家到|搬回|迁到|移居)"
    r"(?:(?!的)[\u4e00-\u9fffA-Za-z]){2,8}?(?:了|啦|去了|来了)?[。！!~～\s]*$"
    # A clause opening on 在 ("at"), or on a verb of keeping or learning, has no subject.
    r"|(?:在|住在|养了|养着|正在学|开始学|在学))")
# "在云帆上班的朋友", "住在苏州的同学": a clause that makes the job or the home describe a
# noun is about that noun, whoever it is.
_DESCRIBES_ZH = re.compile(r"(?:上班|工作|住|生活|养)[^，,。]*?的")


def implied_subject(sentence: str) -> str:
    """News about oneself often drops its subject ("Just relocated to Bangalore", "上个月
    搬到苏州了"): read it with the "I" (我) put back, so the same rules see it."""
    if _zh(sentence):
        clauses = re.split(r"([，,])", sentence.strip())
        put_back = ["我" + c if _IMPLIED_I_ZH.match(c) and not _DESCRIBES_ZH.search(c) else c
                    for c in clauses]
        return "".join(put_back) if put_back != clauses else sentence
    body = clean_end(GREETING_LEAD.sub("", sentence.strip(), count=1))
    return f"I {body[:1].lower()}{body[1:]}" if _IMPLIED_I.match(body) else sentence


def lasting_clauses(body: str, *, marker: bool | None = None) -> list[str]:
    """The clauses of an English sentence that state something lasting, lead adverbs off."""
    out = []
    if marker is None:
        marker = bool(_LASTING_MARKER.search(body))
    for c in re.split(r"(?i)[,;]\s*|\s+(?:and|but)\s+(?=(?:now\s+|so\s+)?(?:i|i'm|we)\b)",
                      body):
        c = _LEAD_ADVERB_EN.sub("", c.strip(), count=1)
        if _lasting_clause_en(c, marker=marker):
            out.append(c)
    return out


_HAVE_GOT = re.compile(r"(?i)^(i|we)\s*(?:'ve|’ve|\s+have)\s+got\b")


def _lasting_clause_en(clause: str, *, marker: bool = False) -> bool:
    c = clean_end(_LEAD_ADVERB_EN.sub("", clause.strip(), count=1))
    c = _HAVE_GOT.sub(r"\1 have", c)  # "I've got a dog" is "I have a dog", not a past event
    m = _EN_SUBJECT.match(c)
    if not m or _past_en(c):
        return False
    rest = m.group("rest")
    while (a := _EN_ADVERB.match(rest)) is not None:
        rest = rest[a.end():]
    words = rest.split(None, 1)
    if not words:
        return False
    verb = words[0].lower().replace("’", "'")
    obj = words[1] if len(words) > 1 else ""
    if verb in ("want", "wanna", "need") and marker:
        return True  # "from now on I want …" is a standing wish, not a request
    if verb in _NOT_LASTING_VERB or _REACTION_OBJECT.match(obj):
        return False
    linking = _LINKS_I.starts(c)
    if linking and not verb.endswith("ing"):
        # "I'm a morning person" is lasting; "I'm happy", "I'm in Tokyo" are states.
        return verb in ("a", "an")
    return _REACTION_OBJECT.match(rest.split(None, 1)[-1] if " " in rest else "") is None


_LINKS_I = Phrases(["i'm", "im", "i am", "we're", "we are"], loose=True)
_PAST_ZH = Literals(("以前", "过去", "曾经", "小时候", "那时", "当年", "上学的时候"))
_PAST_IRREGULAR = frozenset({"was", "were", "had", "did", "went", "got", "sold", "bought", "left",
                             "made", "took", "saw", "met", "came", "used", "lost", "found",
                             "gave", "told", "said", "thought", "felt", "ate", "drove", "grew"})


def _past_en(clause: str) -> bool:
    m = _EN_SUBJECT.match(clean_end(clause.strip()))
    if not m:
        return False
    if re.match(r"(?i)^(?:i|we)\s*(?:'d|’d|\s+had)\s+(?!rather|prefer|like|love)", clause.strip()):
        return True
    rest = m.group("rest")
    while (a := _EN_ADVERB.match(rest)) is not None:
        rest = rest[a.end():]
    verb = (rest.split(None, 1) or [""])[0].lower()
    if verb in ("moved", "relocated"):
        return False  # a move is news about where the person lives now
    return verb in _PAST_IRREGULAR or (verb.endswith("ed") and len(verb) > 3)


def preference_cue(sentence: str) -> bool:
    return bool(_PREFERENCE_CUE.search(sentence))


@dataclass(frozen=True, slots=True)
class OpenSlot:
    """subject + normalised relation (+ the object as said), for facts outside the vocabulary."""

    relation: str
    object: str
    multi: bool

    @property
    def attribute(self) -> str:
        return f"rel:{self.relation}"


# Relations that say what a person has, does or is doing: facts, no embedder needed.
FACT_RELATIONS = frozenset({
    "owns", "has_pet", "drives", "rides", "uses", "learns", "practises", "plays", "volunteers",
    "speaks", "reads", "collects", "lives_in", "moves_to", "works_at", "works_as", "is_at",
    "can", "does", "runs", "trains", "teaches", "writes", "knits", "brews", "grows", "keeps",
    "restores", "studies_at", "supports", "follows",
})
# Relations whose new value replaces the old one (a person drives one car, lives in one
# place); the others hold many values at once (likes, owns, learns, plays …).
SINGLE_VALUED = frozenset({"drives", "lives_in", "works_at", "works_as", "is_named",
                           "studies_at", "speaks_natively"})
_RELATION_EN: dict[str, str] = {
    "own": "owns", "have": "owns", "got": "owns", "bought": "owns", "'ve": "owns",
    "drive": "drives", "ride": "rides", "use": "uses", "learn": "learns", "study": "learns",
    "practise": "practises", "practice": "practises", "play": "plays", "prefer": "prefers",
    "rather": "prefers", "like": "likes", "love": "likes", "enjoy": "likes", "hate": "dislikes",
    "dislike": "dislikes", "volunteer": "volunteers", "speak": "speaks", "read": "reads",
    "collect": "collects", "support": "supports", "follow": "follows", "take": "takes",
    "drink": "drinks", "eat": "eats", "wear": "wears", "run": "runs", "go": "goes",
    "train": "trains", "teach": "teaches", "write": "writes", "watch": "watches",
    "sold": "sold",
}
_LINKING = frozenset({"am", "'m", "m", "is", "are", "'re", "was"})
_EN_SUBJECT = re.compile(
    r"(?i)^(?:i|we)(?:\s*(?:'m|’m|'ve|’ve|'d|’d|\s+am|\s+are|\s+had|\s+would))?\s+"
    r"(?P<rest>.+)$"
)
_EN_ADVERB = re.compile(
    r"(?i)^(?:now|currently|still|also|really|usually|always|mostly|often|just|recently|"
    r"finally|actually|generally|normally|typically|definitely|kind\s+of|sort\s+of|"
    r"trying\s+to|starting\s+to|started\s+to|been|going\s+to)\s+"
)
_OBJ_TAIL = re.compile(
    r"(?i)\s+(?:now|these\s+days|nowadays|every\s+\w+|each\s+\w+|on\s+weekends?|at\s+the\s+moment|"
    r"lately|recently|again|too|as\s+well|instead|from\s+now\s+on)\b.*$"
)
_ZH_VERB = re.compile(
    r"^(?:我们?)?(?:现在|最近|目前|一直|还|也|平时|每天|每周|每晚|经常|都|正在|在|已经|开始|刚|"
    r"偶尔|总是|通常|习惯|早上|晚上|周末|下午)*(?P<verb>学习|学|开|用|有|养|喜欢|偏爱|更喜欢|讨厌|练习?|玩|会|住在|"
    r"在|做|当|读|看|喝|吃|穿|跑|骑|带)(?P<obj>.+)$"
)
_RELATION_ZH: dict[str, str] = {
    "学习": "learns", "学": "learns", "开": "drives", "用": "uses", "有": "owns", "养": "has_pet",
    "喜欢": "likes", "偏爱": "prefers", "更喜欢": "prefers", "讨厌": "dislikes", "练": "practises",
    "练习": "practises", "玩": "plays", "会": "can", "住在": "lives_in", "在": "is_at",
    "做": "does", "当": "works_as", "读": "reads", "看": "watches", "喝": "drinks", "吃": "eats",
    "穿": "wears", "跑": "runs", "骑": "rides", "带": "carries",
}


def _lemma(word: str) -> str:
    w = word.lower().replace("’", "'")
    if w.endswith("ing") and len(w) > 5:
        base = w[:-3]
        if len(base) > 2 and base[-1] == base[-2] and base[-1] not in "ls":
            base = base[:-1]  # running -> run
        elif base.endswith(("v", "c", "z", "g")) or (base.endswith("t") and base[-2] in "aiu"):
            base += "e"  # driving -> drive, practising -> practise, writing -> write
        return base
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def _third_person(verb: str) -> str:
    """carry -> carries, watch -> watches, teach -> teaches, cook -> cooks."""
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    if verb.endswith(("s", "x", "z", "ch", "sh", "o")):
        return verb + "es"
    return verb + "s"


# Open relations that are vocabulary slots already: they meet the matchers' memories there.
VOCAB_SLOT = {"lives_in": "residence", "moves_to": "residence", "works_at": "employer",
              "works_as": "occupation"}
_ZH_PLACE = re.compile(
    r"^(?:我们?)?(?:全家)?(?:现在|最近|目前|一直|还|也|平时|已经)*(?:家)?(?:住在|生活在|定居在|在)"
    r"(?P<obj>[^，,在]{1,12}?)(?P<what>生活|居住|住|定居|安家|工作|上班)?$"
)
_OBJ_CUT = re.compile(r"(?i)\s*(?:,|，|\bbtw\b|\bfyi\b|\blol\b|\bthough\b|\bhaha\b).*$")


# An object that only points back ("I fix them", "我很喜欢它") names nothing the slot could
# hold or compare: the statement keeps the sentence, the slot would only match loosely.
_POINTING_OBJECT = re.compile(
    r"(?i)^(?:it|them|this|that|these|those|him|her|one|ones|some|stuff|things?|"
    r"(?:[着了过]\s*)?(?:它们?|他们?|她们?|这个|那个|这些|那些))$"
)


def open_slot(clause: str) -> OpenSlot | None:
    slot = _open_slot(clause)
    if slot is None or _POINTING_OBJECT.match(slot.object.strip(" .!?。！？")):
        return None
    obj = _OBJ_CUT.sub("", slot.object).strip() or slot.object
    if slot.relation in ("lives_in", "moves_to") and not _zh(obj):
        # A place is the place: "paris last month", "bangalore for a new role" -> the city.
        obj = re.sub(r"(?i)\s+(?:for|last|this|next|in|near|with|because|since|so|and|to|"
                     r"from|after|before|ago|a|an)\b.*$", "", obj).strip() or obj
    return OpenSlot(slot.relation, obj, slot.multi)


def _open_slot(clause: str) -> OpenSlot | None:
    """The relation a first-person clause states, normalised so two wordings of one
    relation meet in one slot ("I drive …" / "I'm driving …" -> drives)."""
    text = clean_end(strip_discourse(GREETING_LEAD.sub("", clause.strip(), count=1)))
    if _zh(text):
        text = _LEAD_ADVERB_ZH.sub("", text, count=1)
        if (p := _ZH_PLACE.match(text)) is not None and (
            p.group("what") or text.startswith(("我家", "我住", "我生活"))
        ):
            rel = "works_at" if p.group("what") in ("工作", "上班") else "lives_in"
            return OpenSlot(rel, norm_value(p.group("obj")), False)
        m = _ZH_VERB.match(text)
        if not m or not clean_end(m.group("obj")):
            return None
        rel = _RELATION_ZH[m.group("verb")]
        return OpenSlot(rel, norm_value(m.group("obj")), rel not in SINGLE_VALUED)
    m = _EN_SUBJECT.match(_HAVE_GOT.sub(r"\1 have", text))
    if not m:
        return None
    rest = m.group("rest")
    while (a := _EN_ADVERB.match(rest)) is not None:
        rest = rest[a.end():]
    words = rest.split(None, 1)
    if not words:
        return None
    verb = words[0].lower().replace("’", "'")
    obj = words[1] if len(words) > 1 else ""
    if verb in _LINKING or verb in ("a", "an", "the") or text.lower().startswith(("i'm ", "im ")):
        # "I'm a morning person" / "I'm learning X": a linking verb, or a progressive.
        if verb.endswith("ing") and verb not in ("morning", "evening", "thing"):
            rel = _RELATION_EN.get(_lemma(verb), _third_person(_lemma(verb)))
        else:
            rel, obj = "is", rest
    elif verb in ("work", "works", "working") and obj.lower().startswith(("at ", "for ")):
        rel, obj = "works_at", obj.split(None, 1)[1] if " " in obj else ""
    elif verb in ("live", "lives", "living") and obj.lower().startswith("in "):
        rel, obj = "lives_in", obj[3:]
    elif verb in ("moved", "relocated", "move", "moving", "relocating") and (
            obj.lower().startswith("to ")):
        rel, obj = "moves_to", re.sub(r"(?i)\s+(?:last|this|a|in)\s+\w+(?:\s+ago)?$", "", obj[3:])
    else:
        lemma = _lemma(verb)
        rel = _RELATION_EN.get(verb) or _RELATION_EN.get(lemma) or _third_person(lemma)
    obj = re.sub(r"(?i)^to\s+", "", _OBJ_TAIL.sub("", obj)).strip()
    if not obj or not re.fullmatch(r"[a-z_']+", rel):
        return None
    return OpenSlot(rel, norm_value(obj), rel not in SINGLE_VALUED)





_PRONOUN_LEAD = Phrases(["i", "it", "this", "that", "he", "she", "they", "we", "you", "there"])
_INVERTED_EN = re.compile(r"(?i)^(?P<x>[^,;]{1,60}?)\s+(?P<be>is|are)\s+my\s+(?P<y>[^,;]{1,60})$")
_INVERTED_ZH = re.compile(r"^(?P<x>[^，,]{1,20}?)是我(?:的|最喜欢的)(?P<y>[^，,]{1,20})$")


_QUESTION = re.compile(
    r"[?？]$|^(?i:what|where|who|whom|whose|which|when|why|how)\b|谁|什么|哪|吗[。.]?$"
)


def uninvert(sentence: str) -> str | None:
    """"Radiohead is my favourite band" says what "My favourite band is Radiohead" says:
    give the matchers the form they read. A question ("Where is my parcel?") states
    nothing and is never turned around."""
    if _QUESTION.search(sentence.strip()):
        return None
    text = clean_end(sentence.strip())
    m = _INVERTED_ZH.match(text)
    if m:
        fav = "最喜欢的" if "最喜欢的" in text else ""
        return f"我的{fav}{m.group('y')}是{m.group('x')}。"
    m = _INVERTED_EN.match(text)
    if m and not _PRONOUN_LEAD.starts(m.group("x")):
        return f"My {m.group('y')} {m.group('be')} {m.group('x')}."
    return None


