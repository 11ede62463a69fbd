"""Synthetic multi-turn conversations for benchmarks: varied, realistic, reproducible."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

CITIES = ["Berlin", "Lisbon", "Austin", "Osaka", "Toronto", "Nairobi", "Lyon", "Hangzhou"]
JOBS = ["nurse", "data engineer", "teacher", "carpenter", "pharmacist", "architect"]
FOODS = ["sushi", "ramen", "tacos", "falafel", "dumplings", "paella", "lentil soup"]
HOBBIES = ["hiking", "bouldering", "chess", "pottery", "birdwatching", "sailing"]
PETS = ["a beagle named Toby", "two cats", "a parrot called Kiwi", "a rescue greyhound"]
TOOLS = ["Django", "FastAPI", "PostgreSQL 16", "Redis", "Kafka", "Terraform", "Vue"]
SMALL_TALK = [
    "Lovely weather today, isn't it?",
    "Haha, that's funny.",
    "I had a long day at work.",
    "Thanks, that helps a lot!",
    "Traffic was terrible this morning.",
]
ASSISTANT = [
    "Got it, I'll keep that in mind.",
    "Here are three suggestions you might like.",
    "That sounds great. Anything else I can help with?",
    "Noted. I'll use that for future recommendations.",
]


def user_turns(rng: random.Random) -> list[str]:
    return [
        f"I live in {rng.choice(CITIES)} with my partner.",
        f"I work as a {rng.choice(JOBS)} at a small clinic downtown.",
        f"My favourite food is {rng.choice(FOODS)}.",
        f"On weekends I usually go {rng.choice(HOBBIES)}.",
        f"We have {rng.choice(PETS)}.",
        f"Our backend uses {rng.choice(TOOLS)}.",
        f"My order number is {rng.randint(10000, 99999)}.",
        "Please keep your answers short.",
        f"I moved to {rng.choice(CITIES)} last month.",
        "I'm allergic to shellfish.",
        f"My daughter starts school in {rng.choice(['March', 'September'])}.",
        *SMALL_TALK,
    ]


def conversations(
    *, events: int, users: int, turns_per_session: int = 12, seed: int = 7
) -> Iterator[dict[str, Any]]:
    """Event field dicts, session by session, alternating user and assistant turns."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    made = 0
    session = 0
    while made < events:
        user = f"u{session % users}"
        at = start + timedelta(hours=session)
        pool = user_turns(rng)
        for turn in range(turns_per_session):
            if made >= events:
                return
            role = "user" if turn % 2 == 0 else "assistant"
            content = rng.choice(pool) if role == "user" else rng.choice(ASSISTANT)
            yield {
                "tenant": "bench",
                "agent": "assistant",
                "user": user,
                "session": f"s{session}",
                "role": role,
                "content": content,
                "at": at + timedelta(seconds=30 * turn),
            }
            made += 1
        session += 1


# -- memory statements (the search bench) -------------------------------------------
# Statements from templates × vocabulary (home, work, pets, food, hobbies, projects, ports,
# tools, dates, meetings), about one in eight in Chinese, and the queries that ask for them.

_NAMES = [
    "Ann",
    "Bob",
    "Chen Wei",
    "Dana",
    "Emeka",
    "Farah",
    "Goro",
    "Hana",
    "Ivan",
    "Júlia",
    "Kofi",
    "Lena",
    "Mateo",
    "Nadia",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tariq",
]
_CITIES = [
    "Berlin",
    "Lisbon",
    "Toronto",
    "Osaka",
    "Nairobi",
    "Austin",
    "Lyon",
    "Melbourne",
    "Seoul",
    "Bogotá",
    "Edinburgh",
    "Pune",
    "Denver",
    "Porto",
    "Kraków",
    "Valencia",
]
_ZH_CITIES = ["北京", "上海", "杭州", "成都", "深圳", "广州", "南京", "西安", "武汉", "苏州"]
_JOBS = [
    "nurse",
    "data engineer",
    "teacher",
    "product designer",
    "accountant",
    "chef",
    "site reliability engineer",
    "pharmacist",
    "architect",
    "journalist",
    "translator",
]
_ZH_JOBS = ["软件工程师", "老师", "医生", "设计师", "会计", "产品经理", "记者"]
_COMPANIES = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella Health",
    "Northwind",
    "Contoso",
    "Stark Logistics",
    "Wayne Foods",
    "Hooli",
    "Vandelay Imports",
]
_ZH_COMPANIES = ["阿里巴巴", "腾讯", "一家创业公司", "医院", "学校", "银行"]
_PETS = ["dog", "cat", "parrot", "rabbit", "turtle", "hamster", "goldfish"]
_PET_ADJ = ["old", "young", "rescue", "fluffy", "noisy", "lazy", "three-legged"]
_PET_NAMES = ["Biscuit", "Mochi", "Luna", "Pepper", "Rex", "Tofu", "Ziggy", "Olive"]
_FOODS = [
    "ramen",
    "tacos",
    "sushi",
    "lentil soup",
    "pad thai",
    "pizza margherita",
    "shakshuka",
    "pierogi",
    "falafel",
    "dim sum",
    "green curry",
]
_ZH_FOODS = ["火锅", "饺子", "小笼包", "麻婆豆腐", "烤鸭", "牛肉面"]
_ALLERGENS = ["peanuts", "shellfish", "penicillin", "gluten", "cats", "pollen", "latex"]
_HOBBIES = [
    "climbing",
    "running",
    "swimming",
    "cycling",
    "chess",
    "pottery",
    "salsa dancing",
    "birdwatching",
    "board games",
    "baking sourdough",
]
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_PROJECTS = [
    "billing",
    "atlas",
    "orion",
    "checkout",
    "search",
    "ledger",
    "pulse",
    "harbor",
    "nimbus",
    "relay",
]
_TOOLS = [
    "Postgres",
    "Redis",
    "Kafka",
    "Terraform",
    "Docker",
    "Kubernetes",
    "pytest",
    "Grafana",
    "Sentry",
    "FastAPI",
    "Celery",
    "nginx",
]
_PURPOSES = [
    "caching",
    "queues",
    "metrics",
    "deployments",
    "tests",
    "error tracking",
    "background jobs",
    "the API",
]
_RELATIONS = ["mother", "father", "sister", "brother", "partner", "best friend", "daughter", "son"]
_PLACES = [
    "the café on Main Street",
    "the office",
    "the park",
    "the library",
    "a ramen bar",
    "the airport",
]
_TOPICS = [
    "the move",
    "the budget",
    "a new job offer",
    "the wedding",
    "the trip to Japan",
    "the quarterly report",
    "a side project",
]

# (memory type, attribute, statement template). ``{x}`` is drawn from the vocabulary.
Template = tuple[str, str, Callable[[random.Random], str]]


def pick(rng: random.Random, words: list[str]) -> str:
    return words[rng.randrange(len(words))]


TEMPLATES: list[Template] = [
    ("fact", "residence", lambda r: f"I live in {pick(r, _CITIES)}."),
    (
        "fact",
        "residence",
        lambda r: f"I moved to {pick(r, _CITIES)} in {pick(r, _MONTHS)} {r.randint(2015, 2025)}.",
    ),
    ("fact", "residence", lambda r: f"我住在{pick(r, _ZH_CITIES)}。"),
    ("fact", "job", lambda r: f"I work as a {pick(r, _JOBS)} at {pick(r, _COMPANIES)}."),
    ("fact", "job", lambda r: f"我在{pick(r, _ZH_COMPANIES)}当{pick(r, _ZH_JOBS)}。"),
    (
        "fact",
        "pet",
        lambda r: f"I have a {pick(r, _PET_ADJ)} {pick(r, _PETS)} named {pick(r, _PET_NAMES)}.",
    ),
    ("preference", "food", lambda r: f"My favourite food is {pick(r, _FOODS)}."),
    ("preference", "food", lambda r: f"I don't eat {pick(r, _FOODS)} any more."),
    ("preference", "food", lambda r: f"我最喜欢吃{pick(r, _ZH_FOODS)}。"),
    ("identity", "allergy", lambda r: f"I am allergic to {pick(r, _ALLERGENS)}."),
    ("identity", "name", lambda r: f"My name is {pick(r, _NAMES)}."),
    ("preference", "hobby", lambda r: f"I go {pick(r, _HOBBIES)} every {pick(r, _WEEKDAYS)}."),
    (
        "fact",
        "port",
        lambda r: f"The {pick(r, _PROJECTS)} service listens on port {r.randint(1024, 65000)}.",
    ),
    (
        "fact",
        "stack",
        lambda r: (
            f"Project {pick(r, _PROJECTS)} uses {pick(r, _TOOLS)} for {pick(r, _PURPOSES)}."
        ),
    ),
    (
        "preference",
        "tool",
        lambda r: f"I prefer {pick(r, _TOOLS)} over {pick(r, _TOOLS)} for {pick(r, _PURPOSES)}.",
    ),
    (
        "fact",
        "birthday",
        lambda r: (
            f"My {pick(r, _RELATIONS)}'s birthday is on {pick(r, _MONTHS)} {r.randint(1, 28)}."
        ),
    ),
    (
        "task",
        "deadline",
        lambda r: (
            f"The {pick(r, _PROJECTS)} release is due on "
            f"{pick(r, _MONTHS)} {r.randint(1, 28)}, 2025."
        ),
    ),
    (
        "event",
        "",
        lambda r: (
            f"Last {pick(r, _WEEKDAYS)} I met {pick(r, _NAMES)} at "
            f"{pick(r, _PLACES)} to talk about {pick(r, _TOPICS)}."
        ),
    ),
]

# Queries an agent would send, each with the attribute a good answer fills.
QUERIES: list[tuple[str, Callable[[random.Random], str]]] = [
    ("residence", lambda r: "Where do I live?"),
    ("residence", lambda r: "我住在哪里？"),
    ("job", lambda r: "What is my job?"),
    ("pet", lambda r: "What pets do I have?"),
    ("food", lambda r: "What food do I like?"),
    ("allergy", lambda r: "Do I have any allergies?"),
    ("hobby", lambda r: "What do I do for exercise or fun?"),
    ("port", lambda r: f"Which port does the {pick(r, _PROJECTS)} service use?"),
    ("stack", lambda r: f"What does project {pick(r, _PROJECTS)} use for {pick(r, _PURPOSES)}?"),
    ("birthday", lambda r: f"When is my {pick(r, _RELATIONS)}'s birthday?"),
    ("deadline", lambda r: "When is the next release due?"),
    ("name", lambda r: "What is my name?"),
]

RULES = [
    "Always answer in the user's language.",
    "Never suggest recipes with ingredients the user is allergic to.",
    "Prefer metric units unless the user uses imperial ones.",
    "Ask before booking anything that costs money.",
]
