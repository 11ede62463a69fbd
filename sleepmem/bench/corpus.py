"""Synthetic multi-turn conversations for benchmarks: varied, realistic, reproducible."""

from __future__ import annotations

import random
from collections.abc import Iterator
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
