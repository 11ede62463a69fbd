"""A request to forget, in any phrasing: whether a sentence asks it, and its topic, what is
left once the request words are taken away."""

from __future__ import annotations

import re

from sleepmem.pipelines.language import has_cjk, main_clause
from sleepmem.pipelines.language.words import strip_prefix, strip_word
from sleepmem.pipelines.text import (
    clean_end,
)


def _forgot(text: str) -> bool:
    """我(们)(总是…)忘/删 opening the text: the speaker forgot or deleted something."""
    if not text.startswith("我"):
        return False
    rest = text[1:]
    for r in ((rest[1:], rest) if rest.startswith("们") else (rest,)):
        for t in (strip_prefix(r, ("总是", "经常", "老是", "又", "常常")), r):
            if t.startswith(("忘", "删")):
                return True
    return False


_FORGET_POLITE_EN = re.compile(
    r"(?i)^(?:(?:please|pls|kindly|can\s+you|could\s+you|would\s+you|will\s+you|"
    r"i\s+want\s+you\s+to|i'?d\s+like\s+you\s+to|i\s+need\s+you\s+to|i\s+would\s+like\s+you\s+to|"
    r"you\s+(?:should|can|must)|go\s+ahead\s+and|just)\s+)+"
)


_FORGET_VERB_EN = re.compile(
    r"(?i)^(?:forget|delete|erase|remove|wipe(?:\s+out)?|purge|scrub|clear(?:\s+out)?|drop|discard|"
    r"get\s+rid\s+of|throw\s+away|unlearn|"
    r"(?:stop|quit)\s+(?:remembering|keeping|storing|saving)|"
    r"(?:do\s+not|don'?t|never)\s+(?:keep|store|save|remember|hold\s+on\s+to|retain)|"
    r"no\s+longer\s+(?:keep|store|remember))\b"
)


_FORGET_FILL_EN = re.compile(
    r"(?i)^(?:about|regarding|concerning|on|of|related\s+to|any(?:thing)?|every(?:thing)?|all|"
    r"whatever|what(?:ever)?|the|that|this|those|these|any\s+(?:record|trace|note|memory|mention)s?|"
    r"(?:record|trace|note|memory|mention|stuff|things?|info(?:rmation)?|details?|memories|"
    r"data|notes)s?|(?:that\s+)?i(?:'ve|\s+have)?\s+(?:ever\s+)?(?:told|said|shared|mentioned|"
    r"gave|wrote)(?:\s+(?:to\s+)?you)?|you\s+(?:know|have|remember|learned|stored|saved|keep)"
    r"(?:\s+about\s+me)?|about\s+me)\s+"
)


_FORGET_TAIL_EN = re.compile(
    r"(?i)(?:,?\s+(?:please|as\s+well|too|completely|entirely|for\s+good|permanently|"
    r"from\s+(?:your\s+)?(?:memory|records?|notes)|right\s+now|now|thanks|thank\s+you|"
    r"anymore|any\s+more|ever\s+again))+$"
)


_FORGET_VERB_ZH = re.compile(
    r"忘掉|忘记|忘了|删除|删掉|删了|清除|清掉|抹掉|抹去|去掉|"
    r"(?:别|不要|不用|无需|不必)(?:再)?(?:记住?|记得|记着|保存|保留|存)"
)


_FORGET_NOISE_ZH = re.compile(
    r"请你?|麻烦你?|帮我|你|把|从(?:你的)?(?:记忆|记录)(?:里|中)?|记忆里|全部|统统|通通|都|所有的?|一切|"
    r"(?:我)?(?:之前|以前|刚才|曾经)?(?:跟你|和你|对你)?(?:说过|讲过|告诉过?你?|提到过?|分享过?)的?|"
    r"的?(?:那件|这件|那个|这个)?(?:事情|事儿|事|内容|信息|记忆|记录|资料|东西|那些|这些)|关于|有关|相关的?|"
    r"吧|了|吗|好吗|啊|呀|掉|再|我的|我"
)



def forget_topic(sentence: str, *, bare: bool = False) -> str | None:
    """The topic of a request to forget, or None when the sentence is not one.

    Recognised by its shape (an imperative forget verb addressed to the assistant), and the
    topic is what remains once the request words are removed: no list of whole phrasings.
    With ``bare``, a Chinese request that leaves no topic ("都忘掉吧") gives "": its topic
    may be the clause before it.
    """
    text = clean_end(sentence.strip())
    if has_cjk(text):
        if _forgot(text):
            return None  # "我忘了带钥匙": the speaker forgot something
        if not _FORGET_VERB_ZH.search(text):
            return None
        topic = _FORGET_VERB_ZH.sub("", text)
        topic = _FORGET_NOISE_ZH.sub("", topic)
        topic = topic.strip(" ，,。.！!？?、的")
        return topic if topic or bare else None
    body = _FORGET_POLITE_EN.sub("", text, count=1)
    m = _FORGET_VERB_EN.match(body)
    if not m:
        # A request led into by a clause or an interjection ("Before I forget, could you
        # wipe …"): the parse finds where the main clause starts. What leads in is set off
        # by a comma; without one there is nothing to parse for (the matchers send every
        # clause with "keep" or "remember" here).
        main = main_clause(text) if "," in text else text
        if main == text:
            return None
        body = _FORGET_POLITE_EN.sub("", main, count=1)
        m = _FORGET_VERB_EN.match(body)
        if not m:
            return None
    rest = body[m.end():].strip()
    rest = _FORGET_TAIL_EN.sub("", rest)
    prev = None
    while prev != rest:
        prev = rest
        rest = _FORGET_FILL_EN.sub("", rest + " ", count=1).strip()
    rest = strip_word(rest, ("my", "our", "the"))
    rest = _FORGET_TAIL_EN.sub("", rest).strip(" ,.")
    if rest.lower() in ("it", "that", "this", "them", "about it", "me"):
        return None  # "forget it": never mind, not a request to erase anything
    return rest or None



def clean_forget_topic(topic: str) -> str:
    """A topic caught by a fixed pattern may still carry request words ("…的事从记忆里")."""
    if not has_cjk(topic):
        return topic
    cleaned = _FORGET_NOISE_ZH.sub("", topic).strip(" ，,。.！!？?、的")
    return cleaned or topic
