"""Topic labels: the words a question uses for what a statement only implies.

"I'm going through a divorce" never says "family", yet "What is the user's family
situation?" is about it. Small embedders (and any lexical index) miss that hop, so the
text we index carries the topic labels its words imply. The lexicon is general (EN and
ZH trigger words per topic), not tied to any story.
"""

from __future__ import annotations

from sleepmem.pipelines.language import has_cjk
from sleepmem.pipelines.language.words import runs

_TOPICS: dict[str, tuple[str, ...]] = {
    "family": (
        "family", "divorce", "divorced", "married", "marriage", "wedding", "wife", "husband",
        "spouse", "partner", "daughter", "son", "kids", "children", "child", "baby", "mother",
        "father", "mom", "dad", "parents", "sister", "brother", "sibling", "grandma",
        "grandpa", "grandmother", "grandfather", "aunt", "uncle", "cousin", "niece", "nephew",
        "in-laws", "家人", "家庭", "离婚", "结婚", "妻子", "老婆", "丈夫", "老公", "女儿", "儿子",
        "孩子", "父母", "妈妈", "爸爸", "姐姐", "妹妹", "哥哥", "弟弟",
    ),
    "relationship": (
        "boyfriend", "girlfriend", "dating", "breakup", "broke up", "engaged", "fiance",
        "fiancee", "divorce", "relationship", "男朋友", "女朋友", "恋爱", "分手", "离婚",
    ),
    "work": (
        "work", "works", "job", "career", "employer", "company", "office", "colleague",
        "boss", "manager", "nurse", "doctor", "engineer", "teacher", "developer", "hired",
        "promotion", "salary", "shift", "hospital", "startup", "工作", "上班", "公司", "同事",
        "老板", "职业", "护士", "医生", "工程师", "老师",
    ),
    "health": (
        "allergic", "allergy", "allergies", "sick", "illness", "disease", "diagnosed",
        "medication", "medicine", "doctor", "hospital", "surgery", "pain", "injury",
        "asthma", "diabetes", "pregnant", "therapy", "anxiety", "depression", "过敏", "生病",
        "医院", "药", "手术", "怀孕", "健康",
    ),
    "food": (
        "eat", "eats", "food", "diet", "vegan", "vegetarian", "meat", "fish", "chicken",
        "dairy", "eggs", "peanut", "peanuts", "gluten", "cook", "cooking", "recipe",
        "restaurant", "dinner", "lunch", "breakfast", "coffee", "tea", "吃", "素食", "餐厅",
        "做饭", "花生", "咖啡",
    ),
    "home": (
        "live", "lives", "living", "moved", "move", "apartment", "house", "home", "city",
        "neighborhood", "address", "street", "relocated", "住", "搬", "家", "城市", "地址",
    ),
    "travel": (
        "trip", "travel", "traveled", "vacation", "holiday", "flight", "visited", "visit",
        "tour", "abroad", "旅行", "旅游", "出差", "度假",
    ),
    "leisure": (
        "hobby", "hobbies", "weekend", "weekends", "hiking", "painting", "reading", "games",
        "gaming", "camping", "gardening", "photography", "knitting", "爱好", "周末", "徒步",
    ),
    "music": (
        "music", "song", "songs", "band", "concert", "guitar", "piano", "violin", "jazz",
        "rock", "album", "singing", "音乐", "歌", "吉他", "钢琴", "演唱会",
    ),
    "sports": (
        "sport", "sports", "run", "running", "marathon", "gym", "yoga", "soccer", "football",
        "basketball", "tennis", "swimming", "cycling", "运动", "跑步", "健身", "游泳",
    ),
    "pets": ("pet", "pets", "dog", "dogs", "cat", "cats", "puppy", "kitten", "宠物", "狗", "猫"),
    "education": (
        "school", "college", "university", "degree", "class", "course", "study", "studying",
        "student", "exam", "graduated", "学校", "大学", "学习", "考试", "毕业",
    ),
    "money": (
        "money", "price", "prices", "budget", "cost", "cheap", "expensive", "salary",
        "savings", "loan", "rent", "pay", "paid", "钱", "价格", "预算", "便宜", "贵",
    ),
    "technology": (
        "backend", "frontend", "database", "server", "deploy", "kubernetes", "cloud", "api",
        "python", "java", "code", "software", "stack", "framework", "gateway", "postgresql",
        "redis", "port", "service", "技术", "服务器", "数据库", "部署",
    ),
    "shopping": (
        "order", "orders", "shipping", "ship", "delivery", "package", "refund", "bought",
        "buy", "purchase", "store", "订单", "快递", "退款", "购买",
    ),
    "emotion": (
        "hard", "sad", "happy", "stressed", "stress", "lonely", "excited", "worried",
        "upset", "grateful", "proud", "angry", "难过", "开心", "压力", "焦虑",
    ),
}

# The labels themselves: a forget request may name a whole topic ("my medical history").
LABELS: tuple[str, ...] = tuple(_TOPICS)
# Slots whose kind says their topic, whatever words the statement uses.
_KIND_TOPIC = {
    "condition": "health", "allergy": "health", "family": "family", "pet": "pets",
    "diet": "food", "employer": "work", "occupation": "work", "residence": "home",
    "address": "home", "hometown": "home",
}


def _latin_words(low: str) -> list[str]:
    """Runs of a-z that may go on with "'" and "-" ("don't", "sci-fi")."""
    return runs(low, lambda ch: "a" <= ch <= "z", "'-")


_EN: dict[str, set[str]] = {}
_ZH: list[tuple[str, str]] = []
for _topic, _words in _TOPICS.items():
    for _w in _words:
        if has_cjk(_w):
            _ZH.append((_w, _topic))
        else:
            _EN.setdefault(_w, set()).add(_topic)
_EN_PHRASES = [(w, t) for w, ts in _EN.items() if " " in w for t in ts]


def topics(text: str) -> list[str]:
    """Topic labels implied by ``text``, in a stable order."""
    low = text.lower()
    found: set[str] = set()
    for word in _latin_words(low):
        found.update(_EN.get(word, ()))
    for phrase, topic in _EN_PHRASES:
        if phrase in low:
            found.add(topic)
    if has_cjk(text):
        for word, topic in _ZH:
            if word in text:
                found.add(topic)
    return sorted(found)


def topics_of_memory(attribute: str, statement: str) -> list[str]:
    """A memory's topic labels: its slot's kind when that names one (a condition is
    health, an employer work, whatever else the sentence mentions), else its words'."""
    kind = _KIND_TOPIC.get(attribute.split(":", 1)[0]) if attribute else None
    return [kind] if kind else topics(statement)
