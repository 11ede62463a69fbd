"""What small talk is, for both sides: the write path summarises a session's small talk
into one episode and the read path keeps such episodes out of short answers."""

from __future__ import annotations

import re

from sleepmem.pipelines.text import ACK, CHITCHAT

# A session's small talk is kept as one episode: "Small talk in session s1: hi / thanks".
SMALL_TALK_HEAD = "Small talk in session"
SMALL_TALK_JOIN = " / "

GREETING_LEAD = re.compile(
    r"(?i)^(?:(?:hi\s+there|hey\s+there|hello|hi|hey|hiya|howdy|yo|greetings|"
    r"good\s+(?:morning|afternoon|evening)|thanks?(?:\s+you)?(?:\s+so\s+much|\s+a\s+lot)?|thx|ok(?:ay)?|"
    r"so(?:\s+yeah)?|yeah|yes|yep|and(?:\s+also)?|also|plus|but|oh|ah|well|anyway|btw|"
    r"by\s+the\s+way|actually|actualy|honestly|um+|uh+|hmm+|no|nope|wrong|sorry|correction|update|"
    r"not\s+quite|that'?s\s+(?:wrong|not\s+right|not\s+true|outdated|incorrect))\b"
    r"[\s,，!！.。:：;-]*"
    r"|(?:你好|您好|嗨|哈喽|嗯+|哦|噢|好的?|对了|另外|还有|其实|那个|然后|谢谢你?|不对|错了|更正)"
    r"[\s,，!！.。:：]*)+"
)


_WORDS = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)
# "Ann: bye": the speaker label passages and episodes carry is not something said.
_SPEAKER_LABEL = re.compile(r"^[^\W\d_][\w .'-]{0,40}[:：]\s*")


def is_only_small_talk(sentence: str) -> bool:
    """Small talk and nothing besides: once its greeting, thanks, acknowledgement and
    weather phrases are taken out, at most one word is left ("Rainy weekend.", "bye").
    Stricter than the write path's ``is_small_talk``, which a sentence that mentions the
    weather on the way to saying something ("two rainy days in Edinburgh") also passes."""
    rest = GREETING_LEAD.sub("", _SPEAKER_LABEL.sub("", sentence.strip(), count=1), count=1)
    rest = ACK.sub(" ", CHITCHAT.sub(" ", rest).strip())
    return len(_WORDS.findall(rest)) <= 1


def small_talk_parts(statement: str) -> list[str]:
    """The turns a small-talk summary joined (its own words), or the statement itself."""
    if not statement.startswith(SMALL_TALK_HEAD):
        return [statement]
    return statement.partition(": ")[2].split(SMALL_TALK_JOIN)
