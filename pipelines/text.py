"""Text handling for rule extraction: sentences, clauses, pronouns and turn markers.

Pure functions and precompiled patterns; nothing here knows about slots or events.
"""

from __future__ import annotations

import re
from itertools import product

from sleepmem.pipelines.language import has_cjk
from sleepmem.pipelines.language.words import Literals, Phrases, gap, is_word_char

STRIP_CHARS = " \t\n\"'“”‘’.,;:!?。，；：！？、()（）[]【】-—"

# ---------------------------------------------------------------------------------------
# Turn-level markers
# ---------------------------------------------------------------------------------------

def _each(*parts: tuple[str, ...]) -> list[str]:
    """Every phrase made of one choice from each part, in order."""
    return ["".join(p) for p in product(*parts)]


_WRONG = ("wrong", "incorrect", "not right", "not true", "outdated", "out of date")


class _Change:
    """Words that mark a change ("moved", "from now on", "not X but Y")."""

    def __init__(self) -> None:
        self.phrases = Phrases([
            "moved", "relocated", "went", "became", "become", "turned", "started", "stopped",
            "quit", "gave up", "from now on", "going forward", "in the future", "in future",
            "from today", "anymore", "any more", "no longer", "not any longer",
            *_each(("that's", "thats", "that is", "this is", "it's", "its", "you're",
                    "youre"), (" ",), _WRONG),
            "that's not right", "thats not right", "that's not true", "thats not true",
            "actually", "now", "these days", "nowadays", "instead", "changed", "switched",
            "correction", "used to", "as of today", "as of now", "starting today",
            "starting now"])

    def search(self, text: str) -> bool:
        return self.phrases.search(text) or gap(text.lower(), "not ", " but", 1, 30,
                                                 bounded=True)


CHANGE_EN = _Change()


class _ChangeZh:
    literals = Literals((
        "搬到", "搬去", "搬家", "以后", "今后", "从现在起", "从今天起",
        "从现在开始", "不再", "现在", "改成", "改为", "换成", "换到", "其实",
        "不对", "错了", "已经不", "更正", "纠正", "如今", "目前", "之后都"))

    def search(self, text: str) -> bool:
        return self.literals.search(text) or gap(text, "不是", "了", 1, 8)


CHANGE_ZH = _ChangeZh()
_ONE_OFF_THING = ("reply", "answer", "response", "message", "question")
ONE_OFF_EN = Phrases([
    *_each(("just ", "only "), ("for ", ""), ("this ", "the "),
           ("once", "one time", "time", *_ONE_OFF_THING, "conversation", "chat", "session",
            "request", "task", "email", "one", "post", "draft")),
    "this once", "this time only", *_each(("only", "just"), (" for ",), ("now", "today")),
    *_each(("for ",), ("this", "the"), (" ",), ("one", "next"), (" ",), _ONE_OFF_THING),
    "for today only", "just today",
    *_each(("for this ",), (*_ONE_OFF_THING, "conversation", "email"))], loose=True)
ONE_OFF_ZH = Literals(("这次", "这一次", "本次", "仅此一次", "只此一次", "暂时",
                       "临时", "今天先", "这回", "这一回", "这条"))
EMPHASIS_EN = Phrases([
    "always", "never", "severely", "seriously", "extremely", "deathly", "important",
    "importantly", "remember", "must", "make sure", "don't forget", "dont forget", "critical",
    "crucial", "absolutely", "under no circumstances"])
EMPHASIS_ZH = Literals(("务必", "一定", "千万", "记住", "永远", "绝对", "严重",
                        "非常重要", "切记", "不要忘"))
HEDGE_EN = Phrases(["i think", "maybe", "probably", "perhaps", "might", "i guess", "not sure",
                    "possibly"])


class _NegativeFeedback:
    """Words that dispute what was said ("that's wrong", 搞错了)."""

    english = Phrases([
        "wrong", "incorrect", "not right", "not true", "that's not", "thats not", "no longer",
        "not anymore", "anymore", "any more", "mistake", "mistaken", "bad answer", "useless",
        "inaccurate", "not correct", "not accurate",
        *_each(("mix", "mixed", "mixing"), (" up", "  up")),
        *_each(("mix", "mixed", "mixing"), (" ",), ("it", "that", "them", "this", "things", "us"),
               (" up", "up")),
        "mixup", "mix-up", "confused", "confusing", "misremember", "misremembered",
        "misremembering", "misunderstood", "misunderstand"])
    chinese = Literals(("不对", "错了", "不是这样", "不再", "没用", *_each(
        ("搞", "弄", "记", "说", "听", "看"), ("错", "混", "反")), "有误", "不准确", "不正确"))

    def search(self, text: str) -> bool:
        return self.english.search(text) or self.chinese.search(text)


NEGATIVE_FEEDBACK = _NegativeFeedback()

CHITCHAT = re.compile(
    r"(?i)\b(?:weather|sunny|rainy|raining|snowing|cloudy|windy|hot (?:today|out)|"
    r"cold (?:today|out)|(?:nice|lovely|beautiful|great|gorgeous) (?:day|morning|evening|"
    r"weather)|good (?:morning|night|evening|afternoon)|how are you|how'?s it going|"
    r"what'?s up|hello|hi there|hey there|lol|haha|have a (?:nice|good|great)|"
    r"happy (?:friday|monday|weekend|holidays?|new year)|see you|bye)\b"
    r"|^(?:hi|hey|hello|yo|howdy|greetings)\b"
    r"|天气|晴天|下雨|下雪|你好|早上好|晚上好|晚安|哈哈|辛苦了|周末愉快|再见"
)
ACK = re.compile(
    r"(?i)^(?:(?:ok(?:ay)?|k|sure|yes|yep|yeah|no|nope|thanks?(?: you)?(?: so much| a lot)?|"
    r"thx|ty|great|cool|nice|perfect|got it|sounds good|alright|all right|fine|noted|"
    r"understood|will do|of course|certainly|absolutely|done|right|i see|ah|oh|hmm+|"
    r"好的?|好|嗯+|谢谢|多谢|收到|明白了?|知道了|可以|行|没问题|好吧)[\s.!,。！~…]*)+$"
)
ASSISTANT_ACK = re.compile(
    r"(?i)^(?:(?:ok(?:ay)?|sure|got it|noted|understood|thanks?(?: you)?(?: for [^,.!]+)?|"
    r"of course|certainly|great|perfect|absolutely|will do|alright|好的|明白了?|收到|知道了)"
    r"[\s,.!。，！]*)*(?:i(?:'ll| will| have|'ve)\s+(?:keep|remember|bear|note|make a note|"
    r"take note|noted|keep that|make sure)[^.!?]*|(?:我会|我记住了|记住了|已记下)[^。！？]*)?"
    r"[\s.!。！]*$"
)
DISCOURSE = re.compile(
    r"(?i)^(?:(?:(?:actually|also|and|but|so|honestly|btw|by the way|anyway|remember|"
    r"please note|fyi|just so you know|again|as i said|like i said|just a reminder|"
    r"and also|plus|(?:don'?t forget|remember|keep in mind|note|be aware|for the record|"
    r"to be clear)\s+that)\b[\s,!:]*|(?:no|yes|ok(?:ay)?|hey|hi|oh|well|reminder|note|correction|"
    r"update|(?:short|long|quick|brief)\s+(?:answer|version|summary|update)|tl;?dr|in\s+short|"
    r"long\s+story\s+short)\s*[,!:]\s*|(?:其实|另外|对了|记住|顺便说一下|顺便|还有|不过|嗯|好|"
    r"简短回答|简单来说|简而言之|总之|总结一下|是的|没错)[\s,，!:：]*))+"
)
CONNECTOR = Phrases(["so", "but", "because", "since", "which", "though", "although", "and so",
                     "and then", "and"])
FILLER_CLAUSE = re.compile(
    r"(?i)^(?:(?:actually|also|oh|and|but|so|well|honestly|btw|by the way|anyway|remember|"
    r"please|no|yes|ok(?:ay)?|hey|hi|again|as i said|like i said|just so you know|fyi|"
    r"that'?s (?:wrong|incorrect|not right|not true)|you'?re wrong|wrong|not quite|"
    r"sorry|thanks|thank you|to be clear|for the record|just to be clear|"
    r"其实|另外|对了|记住|不对|错了|顺便说一下|还有|嗯|好的?|谢谢)[\s.!,，。！]*)+$"
)
# Sentences inside tool output that address the assistant: planted instructions.
INSTRUCTION = re.compile(
    r"(?i)\b(?:(?:note|instruction|message|reminder|notice|directive)s?\s+(?:to|for)\s+"
    r"(?:the\s+)?(?:assistant|ai|model|llm|agent|bot|chatbot)|ignore\s+(?:all\s+)?"
    r"(?:the\s+)?(?:previous|prior|above|earlier)|disregard|system\s+(?:note|prompt|message|"
    r"instruction|override)|you\s+(?:must|should|are\s+to|will|need\s+to|have\s+to)\b|"
    r"remember\s+(?:permanently|forever|that|this)|(?:store|save|memorize|memorise)\s+"
    r"(?:this|that|permanently)|(?:the\s+)?assistant\s+(?:must|should)|from\s+now\s+on|"
    r"do\s+not\s+(?:tell|reveal|mention)|act\s+as|pretend|override|jailbreak|"
    r"new\s+instructions?)\b|^\s*(?:important|attention|note)\s*:|忽略|无视|系统提示|"
    r"请记住|永久记住|你必须|助手必须"
)
_IMPERATIVE = ("remember", "ignore", "forget", "disregard", "always", "never", "do not", "don't",
               "dont", "tell", "send", "reply", "respond", "skip", "override", "store", "save",
               "treat", "act", "pretend", "grant", "give", "delete", "execute", "run", "call",
               "email", "transfer")
IMPERATIVE_START = Phrases(_each(("please ", ""), _IMPERATIVE), loose=True)

# ---------------------------------------------------------------------------------------
# Sentences, clauses, pronouns
# ---------------------------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+")
_ABBREV = ("mr", "mrs", "ms", "dr", "st", "prof", "jr", "sr", "vs", "etc", "no", "e.g", "i.e",
           "approx", "ave")


def _ends_abbreviated(text: str) -> bool:
    """Whether the text ends with an abbreviation's full stop ("Dr.", "e.g.")."""
    low = text.lower()
    low = low[:-1] if low.endswith("\n") else low
    for a in _ABBREV:
        at = len(low) - len(a) - 1
        if low.endswith(a + ".") and (at == 0 or (at > 0 and not is_word_char(low[at - 1]))):
            return True
    return False
_CLAUSE_EN = re.compile(
    r"(?i),\s*(?=(?:so|but|because|since|which|though|although|and so|and then)\b)"
    r"|,\s*(?=(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|our|please)\b)"
    r"|\s+(?=(?:and|but)\s+(?:i|i'm|i've|i'd|my|we|we're|our)\b)"
    r"|\s*[;—–]\s*"
)




def opens_label(text: str, at: int) -> bool:
    """Whether the words at ``at`` open a short label heading ``text`` ("Quick summary of
    our setup: …", "Short answer: yes", "简短回答：是的"): a label names what follows it;
    it asks for nothing, so the style it names is no wish about answers."""
    if text[:at].strip():
        return False
    ends = [i for i in (text.find(c, at) for c in ":：.!?。！？") if i >= 0]
    end = min(ends, default=-1)
    return end >= 0 and text[end] in ":：" and end - at <= 40


def split_sentences(text: str) -> list[str]:
    parts = [p.strip() for p in _SENTENCE.split(text) if p and p.strip()]
    out: list[str] = []
    for part in parts:
        if out and _ends_abbreviated(out[-1]):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def is_zh(text: str) -> bool:
    return has_cjk(text)


def split_clauses(sentence: str, zh: bool) -> list[str]:
    if zh:
        head, *rest = sentence.replace(",", "，").split("，")
        parts = [head, *(p.lstrip() for p in rest)]
    else:
        parts = _CLAUSE_EN.split(sentence)
    return [c.strip(" ,，") for c in parts if c and c.strip(" ,，;")]


def clean_end(text: str) -> str:
    return text.strip().rstrip(".,;:!?。，；：！？ ")


def strip_discourse(text: str) -> str:
    return DISCOURSE.sub("", text, count=1) or text


def is_discourse(text: str) -> bool:
    """Whether ``text`` is only discourse ("Long story short,", "是的，"): a clause that
    says nothing of its own, never part of a statement."""
    # The clause splitter took its comma; the markers are written followed by one.
    return not DISCOURSE.sub("", text.strip() + ",", count=1).strip(" ,.!?;:，。！？；：")


def sentence_case(text: str, zh: bool) -> str:
    text = clean_end(text)
    if not text:
        return text
    if zh:
        return text + "。"
    return text[0].upper() + text[1:] + "."


_EN_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
_ADVERBS = frozenset(
    {"also", "really", "usually", "always", "never", "often", "sometimes", "just", "still",
     "now", "only", "mostly", "generally", "actually", "definitely", "absolutely", "totally",
     "honestly", "currently", "recently", "finally", "already", "rarely", "seldom", "mainly",
     "no", "longer", "strongly", "much", "truly", "even", "typically", "normally",
     "primarily", "occasionally", "personally", "seriously", "kind", "of", "sort",
     "literally", "basically", "completely", "genuinely", "particularly", "especially",
     "frequently", "regularly", "probably", "not", "both", "all"}
)
_IRREGULAR_3P = {
    "am": "is", "are": "is", "have": "has", "do": "does", "don't": "doesn't",
    "go": "goes", "were": "was", "haven't": "hasn't", "aren't": "isn't", "'m": "is",
}
_NO_CONJ = frozenset(
    {"can", "could", "will", "would", "shall", "should", "may", "might", "must", "can't",
     "cannot", "couldn't", "won't", "wouldn't", "shouldn't", "didn't", "was", "wasn't", "had",
     "hadn't", "did", "went", "got", "made", "took", "left", "came", "became", "began",
     "bought", "found", "grew", "knew", "met", "ran", "said", "saw", "sold", "spent", "told",
     "thought", "won", "wrote", "lost", "felt", "kept", "brought", "fell", "forgot", "quit",
     "is", "has", "does", "needs", "used", "ought", "mightn't", "mustn't", "moved", "lived",
     "started", "turned", "joined", "switched", "stopped", "tried", "heard", "read", "put",
     "set", "let", "cut", "hit", "hurt", "paid", "sent", "built", "taught", "caught",
     "slept", "understood", "stood", "sat", "led", "held", "meant", "gave", "ate", "drank",
     "drove", "flew", "broke", "chose", "spoke", "wore", "woke"}
)
_PRONOUNS_EN: dict[str, tuple[str, str, bool]] = {
    # word: (first mention, later mention, next word is a verb to conjugate)
    "i": ("the user", "the user", True),
    "i'm": ("the user is", "the user is", False),
    "im": ("the user is", "the user is", False),
    "i've": ("the user has", "the user has", False),
    "i'd": ("the user would", "the user would", False),
    "i'll": ("the user will", "the user will", False),
    "my": ("the user's", "their", False),
    "mine": ("the user's", "theirs", False),
    "me": ("the user", "them", False),
    "myself": ("themself", "themself", False),
    "you": ("the assistant", "the assistant", False),
    "your": ("the assistant's", "the assistant's", False),
    "yours": ("the assistant's", "the assistant's", False),
    "you're": ("the assistant is", "the assistant is", False),
    "we": ("the user's team", "they", True),
    "we're": ("the user's team are", "they are", False),
    "we've": ("the user's team have", "they have", False),
    "our": ("the user's team's", "their", False),
    "ours": ("theirs", "theirs", False),
}


def _conjugate(word: str) -> str:
    low = word.lower().replace("’", "'")
    if low in _IRREGULAR_3P:
        return _IRREGULAR_3P[low]
    if low in _NO_CONJ or low.endswith("ed") or "'" in low or not low.isalpha():
        return word
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return word + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def third_person_en(text: str) -> str:
    """Rewrite a first-person clause about the user as a third-person statement."""
    out: list[str] = []
    pos = 0
    named = False
    team_named = False
    conj = False
    for m in _EN_WORD.finditer(text):
        word = m.group()
        low = word.lower().replace("’", "'")
        out.append(text[pos : m.start()])
        pos = m.end()
        if conj:
            if low in _ADVERBS:
                out.append(word)
                continue
            conj = False
            out.append(_conjugate(word))
            continue
        if low == "us" and word != "us":
            out.append(word)  # "US" the country
            continue
        if low == "us":
            out.append("them")
            continue
        rep = _PRONOUNS_EN.get(low)
        if rep is None or (low == "i" and word not in ("I", "i")):
            out.append(word)
            continue
        first, later, conj = rep
        team = low in ("we", "we're", "we've", "our", "ours")
        mentioned = team_named if team else named
        out.append(later if mentioned else first)
        # "they" takes the plural verb; only the singular first mention is conjugated.
        conj = conj and (first == later or not mentioned)
        if team:
            team_named = True
        elif low in ("i", "i'm", "im", "i've", "i'd", "i'll", "my", "me", "mine"):
            named = True
    out.append(text[pos:])
    return "".join(out)


def third_person_zh(text: str) -> str:
    # 我们 is the speaker's team, except in 我们家 / 我们一家: their family and home.
    return (
        text.replace("我们家", "用户家").replace("我们一家", "用户一家")
        .replace("我们的", "用户团队的").replace("我们", "用户团队").replace("我的", "用户的")
        .replace("我", "用户").replace("你们", "助手").replace("您", "助手").replace("你", "助手")
    )


def as_said_by_user(statement: str) -> str:
    """A memory's statement back in its speaker's first person, roughly ("The user's desk
    is on the third floor" -> "My desk is on the third floor"): where it is compared with
    words in the first person, the third person costs a third of the similarity."""
    if is_zh(statement):
        return statement.replace("用户的", "我的").replace("用户", "我")
    return (statement.replace("The user's", "My").replace("the user's", "my")
            .replace("The user", "I").replace("the user", "I"))


_OBS_SUBJECT = re.compile(
    r"(?i)\b(?:the\s+)?(?:user|customer|client)(?P<pos>'s|’s)?\b|\b(?P<pro>they|he|she)\b"
    r"|\b(?P<poss>their|his)\b|\b(?P<obj>them|him)\b"
)
_OBS_HEDGE = re.compile(
    r"(?i)\bI\s+(?:might|may|could|probably|likely|possibly|seems? to|appears? to|"
    r"perhaps|apparently)\s+(?:also\s+)?"
)
_DECONJ = {"is": "am", "has": "have", "does": "do", "doesn't": "don't", "goes": "go",
           "was": "was", "isn't": "am not", "hasn't": "haven't"}


def _deconjugate(word: str) -> str:
    low = word.lower()
    if low in _DECONJ:
        return _DECONJ[low]
    if low.endswith("ies") and len(low) > 4:
        return word[:-3] + "y"
    if low.endswith(("ses", "shes", "ches", "xes", "zes", "oes")):
        return word[:-2]
    if low.endswith("s") and not low.endswith("ss") and len(low) > 3:
        return word[:-1]
    return word


def first_person_en(text: str) -> str:
    """Rewrite an observation about "the user" in the first person, hedges dropped.

    The matchers are written for what users say about themselves; an assistant's
    observation is read through them and then marked inferred and low-trust.
    """

    def swap(m: re.Match[str]) -> str:
        if m.group("pos") or m.group("poss"):
            return "my"
        if m.group("obj"):
            return "me"
        return "I"

    text = _OBS_SUBJECT.sub(swap, text)
    text = _OBS_HEDGE.sub("I ", text)
    out: list[str] = []
    pos = 0
    conj = False
    for m in _EN_WORD.finditer(text):
        word = m.group()
        out.append(text[pos : m.start()])
        pos = m.end()
        if conj and word.lower() not in _ADVERBS:
            out.append(_deconjugate(word))
            conj = False
            continue
        out.append(word)
        if word == "I":
            conj = True
    out.append(text[pos:])
    return "".join(out)


def first_person_zh(text: str) -> str:
    return text.replace("该用户", "我").replace("用户", "我")


_ARTICLES = ("the", "a", "an", "my", "our", "your", "his", "her", "their", "some", "any")
_TRAIL = ("too", "as well", "either", "anymore", "any more", "again", "please", "now", "though",
          "also", "at all", "lately", "recently", "these days")


def _without_article(text: str) -> str:
    for a in _ARTICLES:
        if text.startswith(a) and text[len(a):len(a) + 1].isspace():
            return text[len(a):].lstrip()
    return text


def _without_trail(text: str) -> str:
    for t in sorted(_TRAIL, key=len, reverse=True):
        head = text[:-len(t)]
        if text.endswith(t) and head[-1:].isspace():
            return head.rstrip()
    return text


def norm_value(text: str) -> str:
    text = " ".join(text.strip(STRIP_CHARS).split())
    if is_zh(text):
        return text.strip(STRIP_CHARS)
    text = text.lower()
    text = _without_article(text)
    text = _without_trail(text)
    return text.strip(STRIP_CHARS)


def singular(word: str) -> str:
    low = word.lower()
    if low.endswith("ies") and len(low) > 4:
        return low[:-3] + "y"
    if low.endswith(("shes", "ches", "xes", "sses")):
        return low[:-2]
    if low.endswith("s") and not low.endswith(("ss", "us", "is")) and len(low) > 3:
        return low[:-1]
    return low


_LIST_SPLIT = re.compile(r"(?i)\s*(?:,|\band\b|\bor\b|&|/|、|和|跟|及|与|以及)\s*")


def split_list(text: str) -> list[str]:
    return [p for p in (norm_value(x) for x in _LIST_SPLIT.split(text)) if p]
