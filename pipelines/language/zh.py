"""Chinese: readings from jieba's part-of-speech segmentation.

Chinese leaves the subject out more often than not, so a clause with no person in it is
the speaker's; the function and time words below are data, matched on jieba's words.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

from sleepmem.pipelines.language.base import Mood, Owner, Reading, Time

FIRST_PERSON = frozenset({"我", "我们", "咱", "咱们", "本人"})
THIRD_PERSON = frozenset({"他", "她", "他们", "她们", "它"})
SECOND_PERSON = frozenset({"你", "你们", "您"})
# What a clause asks of its listener: "你应该用中文回答" is the speaker's wish.
MODALS = frozenset({"应该", "要", "可以", "能", "得", "请", "别", "必须", "需要", "记得"})
DEMONSTRATIVES = frozenset({"这", "那", "这个", "那个", "这些", "那些"})
PERSON_NOUNS = frozenset({
    "妈", "妈妈", "母亲", "爸", "爸爸", "父亲", "爸妈", "父母", "哥", "哥哥", "姐", "姐姐", "弟",
    "弟弟", "妹", "妹妹", "儿子", "女儿", "孩子", "老婆", "老公", "妻子", "丈夫", "太太", "先生",
    "男朋友", "女朋友", "对象", "朋友", "同事", "室友", "老板", "领导", "邻居", "爷爷", "奶奶",
    "外公", "外婆", "叔叔", "阿姨", "舅舅", "表哥", "表姐", "堂哥", "侄子", "外甥", "同学", "闺蜜",
    "媳妇", "宝宝", "家人", "前任", "前妻", "前夫",
})
HYPOTHETICAL = frozenset({"如果", "要是", "假如", "假设", "万一", "倘若", "若是", "如若", "要不是"})
CHANGE_WORDS = frozenset({"现在", "如今", "以后", "今后", "往后", "从此", "从今以后", "从现在起",
                          "不再", "最近", "这些天", "这阵子", "改", "换", "换成", "改成", "新",
                          "终于", "已经", "目前"})
# Verbs of a change of state that holds now: 搬到成都, 跳槽, 入职腾讯, 养了一只狗.
STATE_CHANGE_VERBS = frozenset({"搬", "搬到", "搬去", "搬家", "迁", "跳槽", "入职", "辞职", "离职",
                                "转", "加入", "结婚", "离婚", "养", "领养", "买", "卖", "卖掉",
                                "戒", "戒掉", "退休", "毕业", "转学", "升职", "换成", "改成"})
# Verbs that end what their object was: 离开华为, 卖掉高尔夫, 戒了咖啡.
ENDING_VERBS = frozenset({"离开", "辞职", "离职", "卖", "卖掉", "戒", "戒掉", "退出", "放弃",
                          "退掉", "送给", "送人", "分手"})
# What happened once: 看到一只猫, 玩了三天, 参加了婚礼.
EVENT_VERBS = frozenset({"看到", "看见", "遇到", "碰到", "听说", "玩", "逛", "参加", "见", "见到",
                         "去过", "吃了", "买了", "发现", "路过", "旅游", "旅行", "出差"})
HABIT_WORDS = frozenset({"总是", "一直", "每天", "每次", "平时", "经常", "通常", "一般", "向来",
                         "都", "从来", "从不", "每周", "常常", "时候", "每当"})
PAST_WORDS = frozenset({"昨天", "前天", "上周", "上个月", "去年", "刚才", "那天", "以前", "过"})
FUTURE_WORDS = frozenset({"明天", "下周", "下个月", "明年", "打算", "准备", "将来", "计划", "将",
                          "会", "想要", "想"})
MOMENT_WORDS = frozenset({"今天", "今晚", "这周", "本周", "这次", "这一次", "本次", "刚才", "此刻",
                          "这会儿", "暂时", "临时", "明早", "今早"})
# What a demonstrative before it makes a time ("这周", "这个月", "那阵子"): jieba splits
# those and tags the 这 as a pronoun, the subject of the clause; joined, they are a time.
TIME_UNITS = frozenset({"周", "月", "年", "天", "星期", "礼拜", "阵子", "段时间", "学期", "季度",
                        "周末", "几天", "两天", "几周", "两周", "几个月", "两个月"})
# What makes a time of the unit after it: 这周, 本月, 上个星期.
_TIME_DEMONSTRATIVES = DEMONSTRATIVES | {"本", "上", "下", "上个", "下个"}
# A time and then one of these is when something starts, and holds from then on: 这周开始,
# 今天起, 下个月起.
STARTS = frozenset({"开始", "起", "起来"})
# The mind and the talk: 我觉得…, 我的问题是….
MENTAL_WORDS = frozenset({"觉得", "认为", "以为", "感觉", "猜", "相信", "知道", "明白",
                          "理解", "同意", "问题", "意思", "想法", "谢谢", "感谢"})
FEELINGS = frozenset({"舒服", "受不了", "疼", "痛", "累", "开心", "高兴", "难过", "忙", "困", "饿",
                      "烦", "紧张", "满意", "不错", "好的", "可以", "确定", "无聊"})
NEGATIONS = frozenset({"不", "没", "没有", "别", "不再", "从不", "不是", "未", "无", "不要", "甭"})
# What asks: 帮我想想送什么礼物 is a question put as a request.
WH_WORDS = frozenset({"什么", "哪", "哪里", "哪儿", "哪个", "怎么", "怎样", "为什么", "谁", "多少",
                      "几点", "如何"})
QUESTION_ENDS = ("吗", "？", "?", "呢", "么")
# Words before what a comparison ranks below (比起咖啡, 胜过咖啡, 而不是咖啡).
RANKED_BELOW = frozenset({"比起", "胜过", "与其", "而不是", "相比"})
WISH_WORDS = frozenset({"吧", "请", "麻烦", "希望", "想要", "要", "需要", "帮", "记得", "务必",
                        "最好"})
# Where a place or an organisation follows: the value of "在张江", "搬到成都", "去了深圳".
LOCATIVES = frozenset({"在", "到", "去", "于", "至", "进", "来"})
_NOUNISH = ("n", "nr", "ns", "nt", "nz", "nrt", "s", "t", "eng", "vn", "nw")
_STOP = frozenset({"了", "吧", "啊", "呀", "的", "呢", "吗", "啦", "哦", "嘛", "，", "。", "！",
                   "？", ",", ".", "!", "?", "、", "；", ";", "~"})


@cache
def _cut() -> Any:
    """jieba's tagger, its dictionary loaded once per process on first use."""
    import logging

    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)
    return jieba.posseg.lcut


class ChinesePack:
    code = "zh"

    @property
    def prototypes(self) -> dict[str, tuple[str, ...]]:
        return PROTOTYPES

    def normalised(self, text: str) -> str:
        return text

    def main_clause(self, text: str) -> str:
        # Chinese requests are found anywhere in the sentence (their verbs are searched
        # for, not anchored at its start): what leads into them needs no cutting.
        return text

    def readings(self, texts: list[str]) -> list[Reading]:
        cut = _cut()
        return [read_sentence(_times_joined([(w.word, w.flag) for w in cut(t)]), t)
                for t in texts]


def _times_joined(words: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The words with each demonstrative and the time unit after it as one time word."""
    out: list[tuple[str, str]] = []
    for word, flag in words:
        if out and out[-1][0] in _TIME_DEMONSTRATIVES and word in TIME_UNITS:
            out[-1] = (out[-1][0] + word, "t")
        else:
            out.append((word, flag))
    return out


def _starts(words: list[tuple[str, str]]) -> bool:
    """Whether a time says when something starts that holds from then on (这周开始…)."""
    return any(w in STARTS and i > 0 and words[i - 1][1] == "t" for i, (w, _f) in enumerate(
        words))


def read_sentence(words: list[tuple[str, str]], text: str) -> Reading:
    """The reading of a sentence: that of its first clause that states something that
    lasts or happened and is not over, else of its first clause that does, else of the
    whole. A clause that names nobody is about whoever the clause before it named (我哥哥
    搬到成都了，现在在那边上班); a hypothetical or a change anywhere is the sentence's."""
    whole = read_words(words, text)
    clauses = _clauses(words)
    if whole.owner is Owner.NOBODY or len(clauses) < 2:
        return whole
    readings: list[Reading] = []
    for clause in clauses:
        r = replace(read_words(clause, text), clause="".join(w for w, _f in clause))
        if readings and not any(w in FIRST_PERSON | PERSON_NOUNS | THIRD_PERSON
                                for w, _f in clause):
            r = replace(r, owner=readings[-1].owner, other=readings[-1].other)
        readings.append(r)
    chosen = next((r for r in readings if r.holds and not r.negated),
                  next((r for r in readings if r.holds), whole))
    # A question anywhere asks; otherwise the first clause sets the mood (帮我查一下快递，
    # 单号是…: a request for now, whatever its second clause states).
    mood = whole.mood if whole.mood is Mood.QUESTION else (
        readings[0].mood if readings[0].mood is not Mood.STATEMENT else chosen.mood)
    # A contrast spans clauses (是湘潭，不是长沙): the value denied in one is the sentence's.
    return replace(chosen, change=whole.change, mood=mood,
                   replaces=chosen.replaces or whole.replaces)


def read_words(words: list[tuple[str, str]], text: str) -> Reading:
    tokens = [w for w, _ in words]
    vocab = set(tokens)
    owner, other = _owner(words)
    # A verb said with its negation (不吃, 不想, 没法), not a word that only starts with one:
    # 不少 "quite a lot", 不错 "good", 不过 "but", 不久前 "not long ago".
    negated = bool(vocab & (NEGATIONS | ENDING_VERBS)) or any(
        w.startswith(("不", "没")) and not f.startswith(("d", "c", "t", "a", "m"))
        for w, f in words)
    starts = _starts(words)
    change = starts or bool(vocab & (CHANGE_WORDS | STATE_CHANGE_VERBS)) or any(
        any(c in w for c in ("改", "换")) for w in tokens)
    stripped = text.rstrip(" 。！!～~")
    if (stripped.endswith(QUESTION_ENDS) or vocab & WH_WORDS) and not vocab & {
            "以后", "今后", "往后"}:
        mood = Mood.QUESTION
    elif vocab & WISH_WORDS:
        mood = Mood.INSTRUCTION if vocab & {"请", "麻烦", "帮", "务必", "记得"} or (
            owner is not Owner.OTHER and "吧" in vocab) else Mood.WISH
    else:
        mood = Mood.STATEMENT
    if (vocab & MOMENT_WORDS and not starts) or (vocab & {"你", "您"} and not vocab & (
            HABIT_WORDS | {"以后", "今后", "往后", "从现在起"})):
        time = Time.ONE_OFF  # 在学校门口等你: an arrangement with the listener, for now
    elif vocab & FUTURE_WORDS and not vocab & {"以后", "今后", "往后", "现在"} and not (
            vocab & HABIT_WORDS and not vocab & FUTURE_WORDS - {"会"}):
        time = Time.FUTURE  # 每天都会画鸟: 会 after a habit word is the habit, not a plan
    elif vocab & HABIT_WORDS:
        time = Time.HABITUAL
    elif (vocab & PAST_WORDS or vocab & EVENT_VERBS or _did_for_a_while(words)
          or _done(words)) and not (vocab & {"现在", "如今", "目前", "以后", "今后"}) and (
            not starts):
        time = Time.PAST
    else:
        time = Time.LASTING
    value, replaces = _value(words), _denied(words)
    if replaces:
        negated = False  # 是二中不是一中: the clause affirms one value and denies the other
    # A feeling as the predicate, with no verb of its own: 在家里很舒服, 今天好累.
    about_talk = bool(vocab & MENTAL_WORDS) or (bool(vocab & FEELINGS) and not any(
        f.startswith("v") for _w, f in words))
    return Reading(text=text, owner=owner, mood=mood, time=time, negated=negated,
                   change=change, ends=bool(vocab & ENDING_VERBS) and not replaces,
                   other=other, head=_head(words), value=value,
                   replaces=replaces, about_talk=about_talk, below=_below(words),
                   name=_named(words))


def _named(words: list[tuple[str, str]]) -> str:
    """The name in "我是李明" or "李明是我" (the copula between the speaker and nothing but
    a person's name, 小王 and 老张 included), else ""."""
    # Punctuation, interjections and closing particles aside; 的 stays: 李明是我的 is "mine".
    core = [(w, f) for w, f in words if f not in ("x", "y", "e", "ul")]
    tokens = [w for w, _f in core]
    if len(core) < 3 or "是" not in tokens:
        return ""
    k = tokens.index("是")
    before, after = core[:k], core[k + 1:]
    name = after if [w for w, _f in before] == ["我"] else (
        before if [w for w, _f in after] == ["我"] else [])
    # A name is a person-name word, after at most a familiar 小 / 老 / 阿.
    if not name or name[-1][1] != "nr" or any(
            f != "nr" and w not in ("小", "老", "阿") for w, f in name[:-1]):
        return ""
    return "".join(w for w, _f in name)


def _denied(words: list[tuple[str, str]]) -> str:
    """The value a contrast denies: 是二中不是一中, 不是一中，是二中."""
    tokens = [w for w, _ in words]
    if "不是" not in tokens:
        return ""
    i = tokens.index("不是")
    return _run(words[i + 1:])


def _below(words: list[tuple[str, str]]) -> str:
    """What a comparison ranks below: 比起咖啡更喜欢茶, 喜欢茶胜过咖啡, 与其喝咖啡不如喝茶."""
    tokens = [w for w, _ in words]
    for i, word in enumerate(tokens):
        if word in RANKED_BELOW:
            return _run(words[i + 1:])
    return ""


def _done(words: list[tuple[str, str]]) -> bool:
    """A verb with 了 right after it marks a finished action (开车去了湖边, 钓到了两条鳟鱼),
    unless the verb changes a state that holds now (搬到苏州了)."""
    return any(w == "了" and i > 0 and words[i - 1][1].startswith("v")
               for i, (w, _f) in enumerate(words)) and not any(
        w in STATE_CHANGE_VERBS for w, _f in words)


def _did_for_a_while(words: list[tuple[str, str]]) -> bool:
    """A verb with 了 and then an amount: 玩了三天, 住了两周: a stretch that ended."""
    return any(w == "了" and i + 1 < len(words) and words[i + 1][1] in ("m", "mq", "q", "t")
               for i, (w, _f) in enumerate(words))


def _owner(words: list[tuple[str, str]]) -> tuple[Owner, str]:
    """Whose the sentence is: the person named before the first verb of its first clause
    that names one; with none named, the speaker's (Chinese leaves the speaker out:
    "新公司在张江", "上个月搬到苏州了")."""
    tokens = [w for w, _ in words]
    if set(tokens) & HYPOTHETICAL:
        return Owner.NOBODY, ""
    for clause in _clauses(words):
        if clause[0][0] in ("在", "住在") and "的" in [w for w, _ in clause]:
            # "在云帆上班的朋友说…": a relative clause names the subject after its 的.
            k = [w for w, _ in clause].index("的")
            noun = clause[k + 1][0] if k + 1 < len(clause) else ""
            return (Owner.OTHER, noun) if noun in PERSON_NOUNS else (Owner.NOBODY, "")
        if noun := _relative_subject(clause):
            return Owner.OTHER, noun  # "住在苏州的同学下周来玩": the classmate's visit
        for i, (word, flag) in enumerate(clause):
            if flag.startswith("v") or word in ("是", "在"):
                break  # the subject comes before the first verb
            if word in THIRD_PERSON:
                return Owner.OTHER, ""  # 他/她: someone else, not named here
            if word in SECOND_PERSON:
                # "你真有才华" says something of the listener; "你应该…" asks them.
                asks = any(w in MODALS for w, _ in clause[i + 1:i + 3])
                return (Owner.SPEAKER, "") if asks else (Owner.OTHER, "")
            if word in DEMONSTRATIVES and not set(tokens) & FIRST_PERSON:
                return Owner.OTHER, ""  # "这真是一段疯狂的旅程": the thing talked of
            if word in PERSON_NOUNS:
                return Owner.OTHER, word
            if i == 0 and flag == "nr" and len(clause) > 1 and clause[1][1].startswith("v"):
                return Owner.OTHER, word  # "小王搬去深圳了"
            if word in FIRST_PERSON:
                nxt = clause[i + 1][0] if i + 1 < len(clause) else ""
                if nxt in PERSON_NOUNS or nxt.removeprefix("的") in PERSON_NOUNS:
                    return Owner.OTHER, nxt.removeprefix("的")  # "我哥哥搬到成都了"
                return Owner.SPEAKER, ""
    return Owner.SPEAKER, ""


def _relative_subject(clause: list[tuple[str, str]]) -> str:
    """The person a relative clause opening the clause describes: a verb, then 的 and a
    person noun, with no person before it (住在苏州的同学, 刚认识的朋友)."""
    tokens = [w for w, _f in clause]
    if "的" not in tokens:
        return ""
    k = tokens.index("的")
    noun = tokens[k + 1] if k + 1 < len(tokens) else ""
    before = clause[:k]
    if noun not in PERSON_NOUNS or any(
            w in FIRST_PERSON | THIRD_PERSON | SECOND_PERSON for w in tokens[:k]):
        return ""
    return noun if any(f.startswith("v") for _w, f in before) else ""


def _clauses(words: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = [[]]
    for word, flag in words:
        if word in ("，", ",", "；", ";", "：", ":"):
            out.append([])
        else:
            out[-1].append((word, flag))
    return [c for c in out if c]


def _head(words: list[tuple[str, str]]) -> str:
    verbs = [w for w, f in words if f.startswith("v") and w not in ("是", "有", "要", "想")]
    return verbs[-1] if verbs else next((w for w, f in words if f.startswith("v")), "")


def _value(words: list[tuple[str, str]]) -> str:
    tokens = [w for w, _ in words]
    if "不是" in tokens:
        # The affirmed side of a contrast: after a plain 是, or after the denied value.
        k = tokens.index("不是")
        if "是" in tokens[:k]:
            return _run(words[tokens.index("是") + 1:k]) or _run(words[k + 1:])
        after = _run(words[k + 1:])
        rest = words[k + 1 + len(after and [0]):]
        for j, (w, _f) in enumerate(rest):
            if w == "是":
                return _run(rest[j + 1:])
    for i, (word, _flag) in enumerate(words):
        if word in LOCATIVES or (len(word) == 2 and word[1] in LOCATIVES and word[0] in "搬住去"):
            span = _run(words[i + 1:])
            if span:
                return span
    nouns = [w for w, f in words if f.startswith(_NOUNISH) and w not in PERSON_NOUNS
             and w not in FIRST_PERSON]
    return nouns[-1] if nouns else ""


def _run(words: list[tuple[str, str]]) -> str:
    """The words up to the next particle or punctuation: "张江", "字节跳动"."""
    out: list[str] = []
    for word, flag in words:
        if word in _STOP or flag in ("x", "ul", "uj", "y", "d", "zg", "a", "c") or (
                out and flag.startswith("v")
                                                               and flag != "vn"):
            break
        out.append(word)
    return "".join(out)


# What each attribute sounds like in Chinese, in general words (see en.PROTOTYPES).
PROTOTYPES: dict[str, tuple[str, ...]] = {
    "residence": ("我住在这个城市。", "我家在另一个城市。", "我们搬进了新公寓。", "新家在郊区。",
                  "现在定居在一个小城。"),
    "employer": ("我在这家公司上班。", "我的公司是一家银行。", "我入职了一家新公司。"),
    "occupation": ("我是一名护士。", "我的职业是程序员。", "我现在做设计师。"),
    "diet": ("我吃素。", "我不吃肉。", "我不碰乳制品。"),
    "answer_language": ("用中文回答我。", "以后请用英文回复。"),
    "answer_length": ("回答要简短。", "请详细解释。"),
    "answer_format": ("用列表的形式回答。", "请用表格总结。"),
    "answer_tone": ("说话随意一点。", "语气正式一些。"),
    "units": ("距离用公里表示。", "温度用摄氏度。", "价格用人民币显示。"),
    "pet": ("我养了一只猫。", "我家有一条狗。"),
    "drink": ("我每天喝咖啡。", "我平时喝绿茶。"),
    "food": ("我最喜欢吃火锅。", "我不爱吃辣。"),
    "address": ("我的收货地址是人民路1号。", "快递寄到这个地址。", "我的地址改了。"),
    "seat": ("我喜欢靠窗的座位。", "给我订靠过道的座位。"),
    "schedule": ("开会安排在周二。", "我只有周末有空。"),
    "school": ("孩子在这所学校上学。", "我在这所大学读书。"),
    "commute": ("我坐地铁上班。", "我骑车去公司。"),
    "vehicle": ("我开一辆丰田。", "我的车是电动车。"),
    "hobby": ("我的爱好是钓鱼。", "我周末去爬山。"),
    "relationship": ("我结婚了。", "我单身。"),
    "health": ("我有哮喘。", "我被诊断出糖尿病。"),
    "allergy": ("我对花生过敏。", "我海鲜过敏。"),
    "name": ("我叫小李。", "我的名字是王芳。", "大家都叫我老张。"),
}
