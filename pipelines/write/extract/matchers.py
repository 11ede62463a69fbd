"""The vocabulary matchers of each language, in priority order (the first that reads a
clause wins), each with the cue words that must appear for it to be tried."""

from __future__ import annotations

import re

from sleepmem.pipelines.vocab import (
    FAMILY_EN,
    FAMILY_ZH,
)
from sleepmem.pipelines.write.extract.en_facts import (
    m_contact,
    m_employment,
    m_my_x_is,
    m_project,
    m_residence,
    m_task,
    m_tools,
)
from sleepmem.pipelines.write.extract.en_person import (
    m_age,
    m_allergy,
    m_answer_style,
    m_birthday,
    m_condition,
    m_diet,
    m_family,
    m_instruction,
    m_likes,
    m_name,
    m_nationality,
)
from sleepmem.pipelines.write.extract.slots import (
    TECH_ALIASES,
    Matcher,
    m_forget,
    m_tech,
)
from sleepmem.pipelines.write.extract.zh import (
    mz_age,
    mz_allergy,
    mz_answer_style,
    mz_birthday,
    mz_condition,
    mz_diet,
    mz_employment,
    mz_family,
    mz_instruction,
    mz_likes,
    mz_my_x_is,
    mz_name,
    mz_project,
    mz_residence,
    mz_task,
    mz_tools,
)

# Priority order: the first matcher that yields slots for a clause wins it.
EN_MATCHERS: tuple[tuple[tuple[str, ...], Matcher], ...] = (
    (("forget", "delete", "erase", "remove", "wipe", "purge", "scrub", "clear", "drop",
      "discard", "get rid", "keep", "store", "save", "remember", "retain", "unlearn"),
     m_forget),
    (("allergic", "allerg"), m_allergy),
    (("vegan", "vegetarian", "veggie", "pesc", "keto", "paleo", "halal", "kosher", "free",
      "plant", "carb", "flexitarian", "carnivore", "omnivore", "eat", "meat", "fish",
      "dairy", "diet", "fruitarian"), m_diet),
    (("have", "got", "suffer", "diagnos", "struggle", "i'm", "i am", "live with"),
     m_condition),
    (("name", "call me", "called", "go by", "i'm", "i am", "this is"), m_name),
    (("i'm", "i am", "i have", "citizen", "national", "passport"), m_nationality),
    (("i'm", "i am", "turned", "age", "im "), m_age),
    (("birthday", "born", "bday", "date of birth"), m_birthday),
    (tuple(FAMILY_EN), m_family),
    (("@", "phone", "mobile", "cell", "number", "call me", "text me", "reach me", "address",
      "ship", "send", "deliver", "mail", "post", "live at"), m_contact),
    (("move", "moved", "relocat", "live", "living", "reside", "based", "located", "settled",
      "from", "grew up", "raised", "home", "emigrat", "immigrat"), m_residence),
    (("answer", "repl", "respon", "explanation", "message", "write", "talk", "speak",
      "communicate", "english", "chinese", "french", "german", "spanish", "japanese",
      "short", "brief", "concise", "succinct", "terse", "detail", "thorough", "depth",
      "long", "verbose", "wordy", "conclusion", "tl;dr", "tldr", "bullet", "table",
      "markdown", "list", "formal", "casual", "friendly", "professional", "tone", "direct",
      "blunt", "spell", "summar", "gist", "point", "output"), m_answer_style),
    (("work", "job", "employ", "joined", "occupation", "profession", "role", "title",
      "position", "retired", "freelanc", "intern", "i'm a", "i am a", "i'm an", "i am an",
      "i'm the", "i am the", "company", "started"), m_employment),
    (tuple(sorted({a.split()[0] for a in TECH_ALIASES} | {"k8s"})), m_tech),
    (("port", "hosted", "deployed", "version", "running", "reachable", "runs"), m_project),
    (("order", "ticket", "booking", "tracking", "confirmation", "reservation", "case",
      "invoice", "flight", "policy", "claim", "shipment", "parcel", "package", "refund",
      "return", "rma", "incident", "issue", "pr", "pull request", "reference", "account",
      "appointment", "meeting", "interview", "call", "exam", "due", "deadline",
      "surgery", "check", "presentation", "membership", "customer", "application"), m_task),
    (("favourite", "favorite", "hobby", "hobbies", "pastime", "passion", "free time",
      "spare time", "love", "like", "enjoy", "adore", "into", "fan of", "dig", "prefer",
      "hate", "dislike", "detest", "loathe", "stand", "bear", "care for", "sick of",
      "tired of"), m_likes),
    (("use", "using", "rely on", "work with", "code in", "write in", "program in",
      "switched", "moved to", "my "), m_tools),
    (("always", "never", "from now on", "going forward", "future", "every time",
      "each time", "whenever", "by default", "from today", "just", "only", "once",
      "for this", "for today", "this time"), m_instruction),
    (("my ",), m_my_x_is),
)


ZH_MATCHERS: tuple[tuple[tuple[str, ...], Matcher], ...] = (
    (("忘", "删", "清除", "清掉", "抹", "去掉", "记", "保存", "保留"), m_forget),
    (("过敏",), mz_allergy),
    (("素", "吃"), mz_diet),
    (("病", "症", "炎", "哮喘", "高血压", "乳糖", "失眠", "贫血"), mz_condition),
    (("叫", "名字", "是"), mz_name),
    (("岁",), mz_age),
    (("生日", "出生"), mz_birthday),
    (tuple(FAMILY_ZH), mz_family),
    (("搬", "迁", "移居", "住", "生活在", "定居", "安家", "老家", "家乡", "人"), mz_residence),
    (("回答", "回复", "答复", "回应", "交流", "沟通", "说", "讲", "写", "聊", "简", "短", "详细",
      "具体", "展开", "深入", "举例", "清楚", "结论", "列表", "要点", "表格", "markdown",
      "Markdown", "编号", "代码"), mz_answer_style),
    (("是", "当", "做", "工作", "职业", "上班", "任职", "实习"), mz_employment),
    (tuple(sorted({a.split()[0] for a in TECH_ALIASES} | {"k8s", "K8s"})), m_tech),
    (("端口",), mz_project),
    (("号",), mz_task),
    (("喜欢", "爱", "迷上", "钟爱", "偏爱", "讨厌", "受不了", "反感", "烦", "爱好", "兴趣"),
     mz_likes),
    (("用",), mz_tools),
    (("我的",), mz_my_x_is),
    (("以后", "今后", "从现在", "每次", "总是", "永远", "务必", "一律", "这次", "这一次", "本次",
      "暂时", "临时"), mz_instruction),
)



def _compiled(
    table: tuple[tuple[tuple[str, ...], Matcher], ...],
) -> tuple[tuple[re.Pattern[str] | None, Matcher], ...]:
    """One alternation per matcher: a single scan of the clause instead of a substring test
    per trigger word (the hot loop of extraction)."""
    return tuple(
        (re.compile("|".join(re.escape(t) for t in triggers)) if triggers else None, matcher)
        for triggers, matcher in table
    )


EN_TABLE = _compiled(EN_MATCHERS)


ZH_TABLE = _compiled(ZH_MATCHERS)
