"""Forget requests in any phrasing: recognised by cue and meaning, whatever the extractor.

An extractor may already mark a request (``Candidate.forget_topic``); this stage also
catches the ones it missed. Two signals must agree, so neither a word list nor the
embedder decides alone:

1. a cue: one of a small set of forget/delete verbs and "do not keep" phrasings (EN, ZH);
2. meaning: the statement is nearer to forget-request prototypes than to prototypes of
   statements that merely use those verbs ("I forgot my keys", "别忘了提醒我").

A request is one sentence: a long turn that says "don't forget to rest up" among other
things is read sentence by sentence, so that the rest of the turn neither hides a request
nor makes a reminder sound like one. Some forms are never requests whatever the vote: a
forget or delete verb under negation means the opposite ("I'll never forget that day",
"don't forget to call", "别忘了", "忘不了", "难忘"), "forget to <verb>" is failing to do
something, and "it helps me forget" is a mood, not an instruction.

Only what the user (or the system) says can ask to forget; tool output, assistant turns
and observations never can (an instruction inside tool output is not the user's wish).
The request's object (its topic) is what remains once the request words are stripped;
the resolver matches it to memories by meaning and by words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from sleepmem.pipelines.language import main_clause
from sleepmem.pipelines.language.words import Literals, Phrases
from sleepmem.pipelines.semantic import Meaning
from sleepmem.pipelines.types import Candidate


class _Cue:
    """The words that may ask to forget ("delete", "stop storing", 别再记)."""

    english = Phrases([
        "forget", "forgetting", "delete", "erase", "remove", "wipe", "purge", "scrub", "discard",
        "unlearn", "clear", "drop", "get rid of", "omit", "leave out",
        *(f"stop {v}" for v in ("remembering", "storing", "keeping", "saving")),
        *(f"{n} {v}" for n in ("don't", "dont", "do not", "no need to", "never")
          for v in ("remember", "keep", "store", "save", "record", "retain", "hold on to")),
        *(f"no longer {v}" for v in ("remember", "keep", "store"))])
    chinese = Literals((
        "忘", "删", "清除", "清掉", "抹掉", "抹去", "去掉", "别再记", "不要再记", "不要记", "别记",
        "不用记", "不需要记", "不必记", "不要保存", "别保存", "不要存", "别存", "不要保留",
        "别保留", "不要留", "移除"))

    def search(self, text: str) -> bool:
        return self.english.search(text) or self.chinese.search(text)


CUE = _Cue()

# Forms of the cue verbs that never ask to erase anything (see the module docstring).
NOT_A_REQUEST = re.compile(
    r"(?i)\b(?:never|not|don'?t|do not|won'?t|will not|wouldn'?t|can'?t|cannot|couldn'?t|"
    r"shouldn'?t|mustn'?t|didn'?t|did not|hardly|i'?ll never|you'?ll never)"
    r"(?:\s+(?:ever|really|just|even|quite|easily))?\s+"
    r"(?:forget|delete|erase|remove|wipe|discard)\b"
    r"|\bforget(?:ting)?\s+to\s+\w"
    r"|\b(?:help|helps|helped|helping|make|makes|made|making|let|lets)\s+(?:\w+\s+)?forget\b"
    r"|\bunforgett?able\b"
    r"|(?:别|不要|不会|不能|不可能|不可|没有?|永远不|从不|决不|绝不)(?:会|要|再|能)?(?:忘|删)"
    r"|忘不[了掉]|难忘|难以忘"
)

_VERBS = (r"(?:forget|delete|erase|remove|wipe|purge|scrub|discard|unlearn|clear|drop|"
          r"get rid of|omit|leave out|stop (?:remembering|storing|keeping|saving)|"
          r"(?:don'?t|do not|no need to|never) "
          r"(?:remember|keep|store|save|record|retain|hold on to))")
# A request is said to the listener: an imperative (at the start of a clause, after at most
# a few discourse words), a question put to "you", "I want you to", "please", or a wish
# that something be gone. "It's easy to forget that", "how could I forget?" and "I don't
# remember what it's called" use the same verbs in statements about the speaker.
REQUEST_FRAME = re.compile(
    r"(?i)(?:^|[,;:]\s*)(?:(?:ok(?:ay)?|so|also|oh|now|then|btw|by the way|actually|anyway|"
    r"scratch that|one more thing|hey|just)[,\s]+)*" + _VERBS + r"\b"
    r"|\b(?:can|could|would|will) you\b[^.?!]*\b" + _VERBS + r"\b"
    r"|\b(?:i|we)(?:'d| would)? (?:want|need|like|ask) (?:you|it) to\b"
    r"|\bplease\b|\bpls\b|\bkindly\b"
    r"|\b(?:you|the assistant) (?:should|must|can|may|need to|have to) " + _VERBS + r"\b"
    r"|\b(?:i|we) (?:want|need) [\w' ]{1,40}? (?:deleted|erased|removed|forgotten|gone|wiped)\b"
    r"|请|麻烦|帮我|能不能|可不可以|可以.{0,12}吗|你.{0,16}(?:忘|删|清除|抹|去掉|移除)"
    r"|(?:^|[，,。；;])\s*把|(?:忘|删)(?:掉|了|除)?吧"
    r"|别再记|不要再记|不要记|别记|不用记|不需要记|不必记|不要保存|别保存|不要存|别存|"
    r"不要保留|别保留|不要留"
)

# What a request sounds like, and what the same verbs sound like when nobody asks to forget.
REQUEST_PROTOTYPES = (
    "Please forget what I told you about it.",
    "Forget everything I said about that.",
    "Delete what you know about this from your memory.",
    "Erase that information about me.",
    "Don't remember this about me anymore.",
    "Stop keeping that information.",
    "Remove the things I shared about it.",
    "I want you to forget about that.",
    "Leave that out of your notes about me.",
    "Could you take it off your records?",
    "The user asks to forget what they said about it.",
    "请忘掉我说过的那件事。",
    "把那件事忘了吧。",
    "删除关于这个的信息。",
    "别再记着这件事了。",
    "不要保存这方面的信息。",
    "请把我说的那些都删掉。",
)
OTHER_PROTOTYPES = (
    "I forgot my keys at home.",
    "I keep forgetting my passwords.",
    "Don't forget to remind me about the meeting.",
    "I deleted the old branch yesterday.",
    "Remove the onions from the recipe.",
    "Please delete the draft email in my outbox.",
    "Can you clear the table formatting in this document?",
    "Remember that I am allergic to nuts.",
    "我忘了带钥匙。",
    "别忘了提醒我明天开会。",
    "我把旧文件删掉了。",
    "帮我把这段代码里的空行去掉。",
    "我总是忘记密码。",
)
# Nearest-prototype vote over this many neighbours.
VOTES = 3

_REQUEST_WORDS_EN = re.compile(
    r"(?i)\b(?:please|pls|kindly|can|could|would|will|you|your|yours|i|i'd|i'm|i've|me|my|"
    r"want|like|need|to|forget|forgetting|delete|erase|remove|wipe|purge|scrub|discard|"
    r"omit|leave out|any|records?|"
    r"unlearn|clear|drop|get rid of|stop|remembering|storing|keeping|saving|remember|keep|"
    r"store|save|record|retain|hold on to|don'?t|do|not|no|need|never|longer|anymore|"
    r"any more|everything|anything|all|whatever|what|that|this|those|these|the|a|an|"
    r"stuff|things?|info|information|details|data|memories|memory|notes|about|regarding|"
    r"concerning|on|of|related|told|tell|said|say|shared|share|mentioned|mention|gave|"
    r"wrote|ever|have|has|had|know|knows|from|for good|permanently|completely|entirely|now|"
    r"right|"
    r"thanks?|thank|asks?|user|they|their|them|it|its|is|was|and|just|also|as well|too|"
    r"out|of it|by the way|btw|oh|actually|anyway|scratch that|one more thing)\b"
)
_REQUEST_WORDS_ZH = re.compile(
    r"请你?|麻烦你?|能不能|可以|帮我|你|把|我的|我|跟你|和你|对你|之前|以前|刚才|曾经|"
    r"说过|讲过|告诉过?|提到过?|分享过?|忘掉|忘记|忘了|忘|删除|删掉|删|清除|清掉|抹掉|抹去|去掉|"
    r"(?:别再|不要再|不要|别|不用|不需要|不必)?记(?:住|下|着|得)?(?!忆)|"
    r"不要保存|别保存|不要存|别存|不要保留|别保留|不要留|移除|保存|所有|全部|一切|统统|都|"
    r"关于|有关|相关|的|事情|事儿|事|内容|信息|资料|记忆|东西|话|那些|这些|那件|这件|"
    r"了|吧|吗|呢|啊|掉|再|好吗|对了|另外|还有|顺便"
)
# An extractor's third-person rewording of a request ("the user has forgotten …",
# "the user wants … deleted") reads as a statement: go back to what the user said.
_REWORDED = Phrases(["the user", "user"])


def _sentences(text: str) -> list[str]:
    """The text cut after each sentence mark."""
    out, start = [], 0
    for i, ch in enumerate(text):
        if ch in ".!?。！？":
            out.append(text[start:i + 1])
            start = i + 1
    out.append(text[start:])
    return out
_TRIM = " \t\n\"'“”‘’.,;:!?。，；：！？、()（）-—"


def topic_of(statement: str) -> str:
    """The request's object: the statement without the words that make it a request."""
    # What leads into the request ("Before I forget, …") is none of its object.
    text = main_clause(statement.rsplit("\n", 1)[-1])
    text = _REQUEST_WORDS_ZH.sub(" ", text)
    text = _REQUEST_WORDS_EN.sub(" ", text)
    return " ".join(text.split()).strip(_TRIM)


def cued_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that carry a cue in a form that may be a request: said to
    the listener, and not a negated forget."""
    sentences = (s.strip() for s in _sentences(text))
    return [s for s in sentences
            if CUE.search(s) and REQUEST_FRAME.search(s) and not NOT_A_REQUEST.search(s)]


def may_ask_to_forget(cand: Candidate) -> bool:
    return (cand.source in ("user", "system") and not cand.from_tool and not cand.inferred
            and cand.trust == "high")


def _own_words(cand: Candidate, said: Mapping[str, str]) -> str:
    """What to read: the candidate's statement, or for an episode an extractor reworded
    ("The user has forgotten about their divorce."), the user's own event when it carries
    the cue."""
    text = cand.statement.rsplit("\n", 1)[-1]
    if cand.attribute or not (_REWORDED.starts(text) or text.startswith("用户")):
        return text  # the user's own words already (or a slot fact, never a request)
    raw = said.get(cand.provenance[-1], "") if cand.provenance else ""
    return raw if CUE.search(raw) else text


def recognise(candidates: list[Candidate], meaning: Meaning,
              said: Mapping[str, str] | None = None) -> int:
    """Mark the forget requests among ``candidates`` (sets ``forget_topic``); how many.

    ``said`` maps event ids to what the event said, so a request an extractor reworded
    is read in the user's words. A request is its own candidate: it becomes an event
    that names its topic and is resolved as a DELETE (the resolver erases the memories
    it means and the request's raw event).
    """
    said = said or {}
    cued = [(c, sentence) for c in candidates
            if c.forget_topic is None and may_ask_to_forget(c)
            for sentence in cued_sentences(_own_words(c, said))]
    if not cued:
        return 0
    texts = [sentence for _c, sentence in cued]
    protos = [*REQUEST_PROTOTYPES, *OTHER_PROTOTYPES]
    meaning.prime([*protos, *texts])
    sims = meaning.matrix(texts) @ meaning.matrix(protos).T
    is_request = np.array([True] * len(REQUEST_PROTOTYPES) + [False] * len(OTHER_PROTOTYPES))
    found = 0
    for (cand, text), row in zip(cued, sims, strict=True):
        if cand.forget_topic is not None:
            continue  # an earlier sentence of the same turn was the request
        top = np.argsort(-row, kind="stable")[:VOTES]
        if int(is_request[top].sum()) * 2 <= VOTES:
            continue
        topic = topic_of(text)
        if not topic:
            continue
        cand.forget_topic = topic
        cand.type = "event"
        cand.attribute = ""
        cand.details = {**cand.details, "forget": True, "recognised_by": "meaning"}
        found += 1
    return found
