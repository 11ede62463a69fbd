"""Chinese patterns: the same slots as the English ones, so a fact said in either language
lands in the same place (attributes are English; values are the entity as written).
"""

from __future__ import annotations

import re
from typing import Any

from sleepmem.pipelines.language import pack
from sleepmem.pipelines.language.words import Literals, strip_prefix
from sleepmem.pipelines.text import (
    ONE_OFF_ZH,
    STRIP_CHARS,
    norm_value,
    opens_label,
    split_list,
    third_person_zh,
)
from sleepmem.pipelines.vocab import (
    ALLERGENS_ZH,
    FAMILY_ZH,
    FOODS_ZH,
    LANGS_ZH,
    REDACTED,
    SECRET_WORDS,
    ZH_ATTRS,
)
from sleepmem.pipelines.write.extract.en_person import family_attr
from sleepmem.pipelines.write.extract.slots import Clause, Slot, make_slot

_ZH_END = r"(?=[，,。！？!?；;\s]|$|了|吧|呢|啊)"
_ZH_NAME = re.compile(
    r"(?:我(?:的名字)?叫|我的名字是|我名叫|叫我|我姓名是)(?P<v>[\u4e00-\u9fffA-Za-z·]{1,12}?)"
    r"(?=[，,。！？!?\s]|$|就行|就好|吧)"
)
_ZH_AGE = re.compile(
    r"我(?:今年|已经|现在|刚满|满)?(?P<v>\d{1,3}|[一二两三四五六七八九十]{1,3})(?:周)?岁"
)
_ZH_BDAY = re.compile(r"我的生日是(?P<v>[^，。！？]+)|我(?:是)?(?P<v2>[^，。！？]{2,12}?)出生的?")
_ZH_ALLERGY = re.compile(
    r"(?:我)?(?P<neg>(?:已经)?(?:不再|不|没有)(?:再)?)?对(?P<v>[^，。；！？]{1,20}?)"
    r"(?:严重|非常|很|有点|轻微|特别)?过敏"
    r"|我(?:有)?(?!对)(?P<v2>[\u4e00-\u9fffA-Za-z]{1,10}?)过敏"
)
_ZH_CONDITION = re.compile(
    r"我(?:有|得了|患有|确诊了?|患了)(?P<v>糖尿病|哮喘|高血压|癫痫|抑郁症|焦虑症|心脏病|乳糖不耐受?|"
    r"偏头痛|关节炎|过敏性鼻炎|失眠|贫血|胃病|[\u4e00-\u9fff]{1,6}(?:症|病|炎))"
)
_REL_ZH = "|".join(sorted(FAMILY_ZH, key=len, reverse=True))
_ZH_PERSON = r"(?P<v>[A-Z][a-zA-Z]+|[\u4e00-\u9fff·]{1,4}?)"
_ZH_FAMILY = re.compile(
    r"我(?:的)?(?P<rel>" + _REL_ZH + r")(?:叫|名叫|的名字(?:是|叫)|名字叫|是)" + _ZH_PERSON
    + r"(?=[，,。！？!?\s]|$|今年|现在|已经|在|是|，)"
    r"|我有(?:一个|两个|个|一位|位)?(?P<rel2>" + _REL_ZH + r")[，,]?(?:叫|名叫)"
    + _ZH_PERSON.replace("v>", "v2>") + r"(?=[，,。！？!?\s]|$|今年|现在|已经|在)"
)
_ZH_DIET = re.compile(
    r"(?P<neg>不再|不是|已经不|不)?(?:是)?(?:一个|一名|个)?(?P<d>纯素食者|纯素食主义者|纯素|吃全素|"
    r"素食者|素食主义者|吃素)"
)
_ZH_NO_FOOD = re.compile(r"我(?:从来|一直|已经|现在)?(?:不|不再|不能|从不)吃(?P<f>" + "|".join(
    sorted(FOODS_ZH, key=len, reverse=True)) + r")")
_ZH_EAT = re.compile(r"(?:^|我)(?:现在|也|又|开始|只)?(?:吃|开始吃)(?P<f>(?:" + "|".join(
    sorted(FOODS_ZH, key=len, reverse=True)) + r")(?:(?:和|、|跟)(?:" + "|".join(
    sorted(FOODS_ZH, key=len, reverse=True)) + r"))*)")
_ZH_PLACE = r"(?P<v>[\u4e00-\u9fffA-Za-z]{2,10}?)"
_ZH_LIVE = re.compile(
    r"我(?:们)?(?:现在|目前|一直|已经|还|仍然|平时)?(?:住在|住|居住在|生活在|定居在|定居于|安家在|常住)"
    + _ZH_PLACE + r"(?=[，,。！？!?\s]|$|了|的|附近|这边|那边|一带|市|，)"
)
# The move is the speaker's unless 我 owns someone who moved: "我朋友刚搬到苏州" is the
# friend's, "我去年秋天搬到了大理" and "我们家上个月搬到苏州了" the speaker's.
_OTHERS_ZH = "|".join(sorted([*FAMILY_ZH, "朋友", "同事", "同学", "室友", "邻居", "老板", "公司",
                              "家人", "亲戚", "父母", "爸妈"], key=len, reverse=True))
_ZH_MOVE = re.compile(
    r"我(?:们)?(?!(?:的)?(?:一个|一位|两个|几个|有个)?(?:" + _OTHERS_ZH + r"))[^，,。]{0,8}?"
    r"(?:搬到|搬去|搬家到|迁到|迁居到?|移居到?|搬回)(?:了)?" + _ZH_PLACE
    + r"(?=[，,。！？!?\s]|$|了|去了|来了|市|住|生活)"
)
_ZH_HOMETOWN = re.compile(
    r"我是(?P<v>[\u4e00-\u9fff]{2,6}?)人(?=[，,。！？!?\s]|$)|我(?:的)?(?:老家|家乡)(?:在|是)"
                          + _ZH_PLACE.replace("v>", "v2>") + _ZH_END)
_ZH_JOB_SUFFIX = (
    r"医生|护士|工程师|程序员|老师|教师|律师|会计|经理|主管|总监|警察|司机|厨师|记者|作家|博士|研究员|"
    r"设计师|学生|大学生|研究生|店主|老板|创始人|产品经理|设计|销售|公务员|演员|歌手|画家|翻译|"
    r"分析师|科学家|教授|实习生|家庭主妇|自由职业者|[\u4e00-\u9fff]{1,4}(?:师|员|生|家|工)"
)
_ZH_JOB = re.compile(
    r"我(?:现在|目前)?(?:是|当|做)(?:一名|一个|一位|个|名)?(?P<v>(?:[\u4e00-\u9fffA-Za-z]{0,6}?)(?:"
    + _ZH_JOB_SUFFIX + r"))" + _ZH_END
    + r"|我(?:的)?(?:工作|职业)是(?P<v2>[^，。！？]{1,12})"
    + r"|我是做(?P<v3>[^，。！？]{1,10}?)的"
)
_ZH_EMPLOYER = re.compile(
    r"我(?:现在|目前)?在(?P<v>[^，。！？在]{2,15}?)(?:工作|上班|任职|实习|做事)"
)
_ZH_LANG = "|".join(sorted(LANGS_ZH, key=len, reverse=True))
_ZH_ANSWER_LANG = re.compile(
    r"(?:用|使用|说|讲)(?P<l>" + _ZH_LANG + r")(?:来)?(?:回答|回复|交流|沟通|写|聊|和我说|跟我说|"
    r"跟我聊|答复|回|解释)"
    r"|(?:回答|回复|答复|回应)(?:请|都|一律|的时候)?(?:用|使用)(?P<l2>" + _ZH_LANG + r")"
    r"|(?:喜欢|希望|想要?|偏好)(?:用)?(?P<l3>" + _ZH_LANG + r")(?:的)?(?:回答|回复|交流)"
)
_ZH_CONCISE = re.compile(
    r"简短|简洁|简单点|简单一点|精简|短一点|短一些|短点|少说|言简意赅|直接(?:说|给)结论|只要结论|别太长|"
    r"不要太长|长话短说"
)
_ZH_DETAILED = re.compile(
    r"详细|具体一点|具体些|展开(?:说|讲)|深入|多举例|举例说明|讲清楚|说清楚|越详细越好"
)
_ZH_ANSWER_CTX = Literals(("回答", "回复", "解释", "说明", "答复", "讲", "说", "请", "以后", "希望",
                           "喜欢"))
_ZH_FORMAT = re.compile(
    r"(?:用|使用|以)(?P<f>列表|要点|表格|markdown|Markdown|编号列表|项目符号|代码示例)"
)
_ZH_LIKE = re.compile(
    r"我(?:很|非常|特别|超|最|也|挺|真的|一直|都)*(?P<neg>不喜欢|讨厌|受不了|反感|不爱|烦)?"
    r"(?(neg)|(?:喜欢|热爱|爱|迷上了|钟爱|偏爱))(?P<v>[^，。！？；]{1,20})"
)
_ZH_HOBBY = re.compile(r"我的(?:爱好|兴趣|兴趣爱好)(?:是|有)(?P<v>[^，。！？；]{1,20})")
_ZH_CONSUME = "听看吃喝玩读去"
_ZH_REF = re.compile(
    r"(?P<k>订单|快递单|快递|运单|工单|预订|预约|航班|发票|票|物流单|退款单|会员)(?:号|编号|号码|单号)"
    r"(?:是|为|：|:)?\s*(?P<v>[A-Za-z0-9-]{3,})"
)
_ZH_REF_KIND = {
    "订单": "order", "快递单": "tracking", "快递": "tracking", "运单": "tracking",
    "物流单": "tracking", "工单": "ticket", "预订": "booking", "预约": "appointment_ref",
    "航班": "flight", "发票": "invoice", "票": "ticket", "退款单": "refund",
    "会员": "membership",
}
_ZH_MY_X_IS = re.compile(
    r"我的(?P<k>[\u4e00-\u9fff]{1,6}?)(?:是|为|：|:)(?P<v>[^，。！？；]{1,40})"
)
_ZH_PORT = re.compile(
    r"(?P<subj>[\u4e00-\u9fffA-Za-z0-9_ -]{1,20}?)(?:现在|目前|已经)?(?:运行|跑|监听|部署|开)在"
    r"(?:端口)?\s*(?P<v>\d{2,5})(?:端口|号端口)?"
    r"|(?P<subj2>[\u4e00-\u9fffA-Za-z0-9_ -]{1,20}?)的端口(?:号)?(?:现在)?"
    r"(?:是|为|改成了?|改为)\s*(?P<v2>\d{2,5})"
)
_ZH_USE = re.compile(
    r"我(?:一般|平时|现在|主要|一直|也)?(?:用|使用|在用)"
    r"(?P<v>[A-Za-z][\w.+#-]*(?:\s[A-Za-z0-9][\w.+#-]*)?)"
    r"(?:来|做|写|开发|进行)?(?P<purpose>[^，。！？]*)"
)
_ZH_PLACE_END = ("区", "市", "县", "省", "路", "街", "附近", "家", "这边", "那边",
                 "国", "镇")
_ZH_LASTING = Literals(("以后", "今后", "从现在起", "从现在开始", "每次", "总是", "永远", "一律"))
_ZH_ASKING = Literals(("请", "不要", "别", "给我", "帮我", "用", "回答", "回复", "提醒", "记得"))
_ZH_INSTRUCTION = re.compile(
    r"(?:以后|今后|从现在起|从现在开始|每次|总是|永远|务必|一律|不要|别|请)"
)


def _zh_head(c: Clause) -> str:
    return third_person_zh(c.text)


def _zh_slot(c: Clause, attribute: str, value: str, **kw: Any) -> Slot:
    return make_slot(attribute, value, _zh_head(c), from_clause=True, **kw)


def mz_name(c: Clause) -> list[Slot]:
    m = _ZH_NAME.search(c.text)
    # "我是李明" / "李明是我": the copula names the speaker when its other side is a name.
    name = m.group("v") if m else pack("zh").readings([c.text])[0].name
    if not name:
        return []
    return [make_slot("name", name, f"用户的名字是{name}", importance=0.95)]


def mz_age(c: Clause) -> list[Slot]:
    m = _ZH_AGE.search(c.text)
    return [_zh_slot(c, "age", m.group("v"), importance=0.8)] if m else []


def mz_birthday(c: Clause) -> list[Slot]:
    m = _ZH_BDAY.search(c.text)
    if not m:
        return []
    return [_zh_slot(c, "birthday", norm_value(m.group("v") or m.group("v2")), importance=0.85)]


def mz_allergy(c: Clause) -> list[Slot]:
    m = _ZH_ALLERGY.search(c.text)
    if not m:
        return []
    neg = bool(m.group("neg"))
    raw = m.group("v") or m.group("v2") or ""
    out = []
    for item in split_list(raw):
        canon = ALLERGENS_ZH.get(item, item)
        if neg:
            out.append(_zh_slot(c, f"allergy:{canon}", "", negated=True, change=True))
        else:
            out.append(_zh_slot(c, f"allergy:{canon}", canon, importance=0.95))
    return out


def mz_condition(c: Clause) -> list[Slot]:
    m = _ZH_CONDITION.search(c.text)
    return [_zh_slot(c, f"condition:{m.group('v')}", m.group("v"), importance=0.9)] if m else []


def mz_family(c: Clause) -> list[Slot]:
    m = _ZH_FAMILY.search(c.text)
    if not m:
        return []
    rel = FAMILY_ZH[m.group("rel") or m.group("rel2")]
    name = m.group("v") or m.group("v2")
    value = norm_value(name)
    typ = "fact" if rel.startswith("pet:") else "identity"
    return [_zh_slot(c, family_attr(rel, value), value, type=typ, importance=0.85)]


def mz_diet(c: Clause) -> list[Slot]:
    m = _ZH_DIET.search(c.text)
    if m and "我" in c.text[: m.start() + 1] + c.text:
        vegan = "纯" in m.group("d") or "全素" in m.group("d")
        d = "vegan" if vegan else "vegetarian"
        if m.group("neg"):
            return [_zh_slot(c, "diet", "", negated=True, change=True, details={"not": d})]
        return [_zh_slot(c, "diet", d, importance=0.7)]
    m = _ZH_NO_FOOD.search(c.text)
    if m:
        food = FOODS_ZH[m.group("f")]
        return [_zh_slot(c, f"avoids:{food}", f"avoids {food}", importance=0.65)]
    m = _ZH_EAT.search(c.text)
    if m:
        foods = [FOODS_ZH.get(f, f) for f in split_list(m.group("f"))]
        return [_zh_slot(c, "diet", "eats " + " and ".join(foods), importance=0.65)]
    return []


def mz_residence(c: Clause) -> list[Slot]:
    m = _ZH_MOVE.search(c.text)
    if m:
        place = m.group("v")
        rest = third_person_zh(c.text).lstrip("用户")
        return [make_slot("residence", place, f"用户住在{place}（{rest}）", change=True,
                      importance=0.65)]
    m = _ZH_LIVE.search(c.text)
    if m:
        return [_zh_slot(c, "residence", m.group("v"), importance=0.65)]
    m = _ZH_HOMETOWN.search(c.text)
    if m:
        return [_zh_slot(c, "hometown", m.group("v") or m.group("v2"), importance=0.6)]
    return []


def mz_employment(c: Clause) -> list[Slot]:
    m = _ZH_JOB.search(c.text)
    if m:
        occ = m.group("v") or m.group("v2") or m.group("v3")
        return [_zh_slot(c, "occupation", norm_value(occ), importance=0.65)]
    m = _ZH_EMPLOYER.search(c.text)
    if m:
        org = m.group("v")
        if org.endswith(_ZH_PLACE_END):
            return [_zh_slot(c, "work_location", org, importance=0.5)]
        return [_zh_slot(c, "employer", org, importance=0.6)]
    return []


def mz_answer_style(c: Clause) -> list[Slot]:
    m = _ZH_ANSWER_LANG.search(c.text)
    if m:
        lang = LANGS_ZH[m.group("l") or m.group("l2") or m.group("l3")]
        said = m.group("l") or m.group("l2") or m.group("l3")
        head = f"用户希望回答使用{said}（{third_person_zh(c.text)}）"
        return [make_slot("answer_language", lang, head, importance=0.7)]
    if _ZH_ANSWER_CTX.search(c.text):
        concise, detailed = (
            any(not opens_label(c.text, m.start()) for m in pattern.finditer(c.text))
            for pattern in (_ZH_CONCISE, _ZH_DETAILED))
        if concise != detailed:
            value = "concise" if concise else "detailed"
            word = "简洁" if concise else "详细"
            head = f"用户希望回答{word}（{third_person_zh(c.text)}）"
            return [make_slot("answer_length", value, head,
                          importance=0.6)]
    m = _ZH_FORMAT.search(c.text)
    if m:
        return [_zh_slot(c, "answer_format", m.group("f").lower(), importance=0.55)]
    return []


def mz_likes(c: Clause) -> list[Slot]:
    m = _ZH_HOBBY.search(c.text)
    if m:
        return [_zh_slot(c, f"hobby:{i}", i, importance=0.55) for i in split_list(m.group("v"))]
    m = _ZH_LIKE.search(c.text)
    if not m:
        return []
    polarity = "dislikes" if m.group("neg") else "likes"
    topic = m.group("v")
    topic = (topic[1:] if topic[:1] in _ZH_CONSUME else topic).strip(STRIP_CHARS)
    if not topic or topic.startswith(("你", "这", "那", "它")):
        return []
    return [_zh_slot(c, f"likes:{topic}", f"{polarity} {topic}", importance=0.5)]


def mz_task(c: Clause) -> list[Slot]:
    out = []
    for m in _ZH_REF.finditer(c.text):
        kind = _ZH_REF_KIND.get(m.group("k"), "reference")
        out.append(make_slot(f"{kind}_number", m.group("v").lower(),
                         f"用户的{m.group('k')}号是{m.group('v')}", type="task", importance=0.5))
    return out


def mz_project(c: Clause) -> list[Slot]:
    m = _ZH_PORT.search(c.text)
    if not m:
        return []
    subj = norm_value(m.group("subj") or m.group("subj2") or "")
    subj = strip_prefix(subj, ("我们的", "我们", "现在", "目前"))
    if not subj:
        return []
    return [_zh_slot(c, "port", m.group("v") or m.group("v2"), subject=subj, type="fact",
                     importance=0.6)]


def mz_tools(c: Clause) -> list[Slot]:
    m = _ZH_USE.search(c.text)
    if not m:
        return []
    tool = norm_value(m.group("v"))
    purpose = m.group("purpose").strip(STRIP_CHARS)
    attr = f"tool_for:{purpose}" if purpose else f"uses:{tool}"
    return [_zh_slot(c, attr, tool, importance=0.5)]


def mz_my_x_is(c: Clause) -> list[Slot]:
    m = _ZH_MY_X_IS.search(c.text)
    if not m:
        return []
    key = m.group("k")
    if SECRET_WORDS.search(key) or REDACTED.search(m.group("v")):
        return []
    attr = ZH_ATTRS.get(key)
    if attr is None:
        return []
    return [_zh_slot(c, attr, norm_value(m.group("v")), importance=0.55)]


def mz_instruction(c: Clause) -> list[Slot]:
    if not _ZH_INSTRUCTION.search(c.text) or len(c.text) < 4:
        return []
    if not (_ZH_LASTING.search(c.text)
            or ONE_OFF_ZH.search(c.raw)):
        return []
    if not _ZH_ASKING.search(c.text):
        return []
    return [make_slot("", "", f"用户要求助手：{third_person_zh(c.text)}", type="preference",
                  importance=0.6, from_clause=True, details={"instruction": True})]
