"""The paraphrase suite: the generalisation stories with every user message reworded by a model.

tests/paraphrases/<stem>-p1..p3.toml are written by scripts/paraphrase_stories.py, which asks
a local model (never a person here) for three rewrites of every user message of
tests/generalization/<stem>.toml, same language, same meaning, same speaker, and keeps the
strings the checks look for. Everything else in a story is the original's. The per-kind
breakdown (file prefix) and every failure are printed with the result.

Stories without a user message (kind 15: outcomes only) have nothing to paraphrase, so the
kinds the suite must cover are the kinds of the original stories that hold a user message.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from story_suites import StoryPlace, check_floor, run_stories

from sleepmem.evals.scenarios import validate_story
from sleepmem.pipelines.ports import Embedder

HERE = Path(__file__).parent.parent
SUITE = HERE / "paraphrases"
ORIGINALS = HERE / "generalization"
STORIES = sorted(SUITE.glob("*.toml"))
# The floor is what the code passes today, not the goal: issue 39 asks for 0.95, as the
# generalisation suite does. 2026-12-05: 110/155 (0.71) on the code before the clause
# analysis, 112/155 (0.723) with it; 2026-12-06: 129/155 (0.832) with named speakers'
# facts, frames for every unread statement, tool fields met in any memory type. About 17
# of the failures are rewrites that changed the meaning (a dropped "just this once",
# 前男友 -> 前女友: tests/paraphrases/README.md). 2026-12-06 night: 132/155 (0.852) with a
# person's later preference replacing their own and the name frame. 2026-12-07: 138/155
# (0.890) with tasks for now kept as episodes, liking keys as preferences, the address
# frame and changes the clause analysis reads. 2026-12-07 night: 140/155 (0.903) with ends
# ("gave up tea") and comparisons ("tea over coffee") read by the packs. 2026-12-07
# afternoon: 144/155 (0.929) with values joined by "and" one memory each, a request for
# one thing for now, 李明是我, "omit" as a forget verb and fillers that mean the same. Of
# the 11 failures, 7 are rewrites that changed the meaning (README). Raise it as the code
# passes more; never lower it.
FLOOR = 0.92
_NAME = re.compile(r"^(?P<stem>.+)-p(?P<i>[1-3])$")


def _load(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def _is_user_message(step: dict[str, Any]) -> bool:
    emit = step.get("emit")
    return bool(emit) and emit.get("role") == "user" and emit.get("kind") in (
        None, "message", "feedback")


def _bare(text: str) -> str:
    """The text without case, spaces or punctuation: a rewrite must differ in more."""
    return "".join(c for c in text.casefold() if c.isalnum())


def _without_user_contents(story: dict[str, Any]) -> list[dict[str, Any]]:
    steps = json.loads(json.dumps(story.get("step", [])))
    for step in steps:
        if _is_user_message(step):
            step["emit"]["content"] = "<user message>"
    return steps


def test_every_paraphrase_is_a_complete_variant_of_an_existing_story() -> None:
    assert STORIES, "tests/paraphrases/ holds no story: run scripts/paraphrase_stories.py"
    for path in STORIES:
        m = _NAME.match(path.stem)
        assert m, f"{path.name}: expected <original stem>-p1..p3.toml"
        original_path = ORIGINALS / f"{m['stem']}.toml"
        assert original_path.exists(), f"{path.name}: no original {original_path.name}"
        story, original = _load(path), _load(original_path)
        validate_story(story, path.name)
        assert story["name"] == f"{original['name']}-p{m['i']}", path.name
        assert m["stem"] in story["about"] and "paraphrase" in story["about"], path.name
        assert story.get("scope") == original.get("scope"), path.name
        # Same steps in the same order; only user message contents may differ.
        assert _without_user_contents(story) == _without_user_contents(original), path.name
        new = [s["emit"]["content"] for s in story["step"] if _is_user_message(s)]
        old = [s["emit"]["content"] for s in original["step"] if _is_user_message(s)]
        assert new, f"{path.name}: no user message"
        for n, o in zip(new, old, strict=True):
            assert _bare(n) and _bare(n) != _bare(o), (path.name, n)


def test_the_suite_holds_every_kind_the_generalisation_suite_has() -> None:
    kinds_with_users = {
        p.name[:2] for p in ORIGINALS.glob("*.toml")
        if any(_is_user_message(s) for s in _load(p).get("step", []))
    }
    have = {p.name[:2] for p in STORIES}
    assert kinds_with_users <= have, sorted(kinds_with_users - have)


@pytest.mark.slow
@pytest.mark.timeout(5400)  # 155 stories, each on a fresh instance (story_suites.py)
def test_the_paraphrase_suite_passes_at_the_floor(embedder: Embedder, place: StoryPlace) -> None:
    run = run_stories(STORIES, embedder, lambda path: [path.name[:2]], place=place)
    check_floor(run, "paraphrase suite", FLOOR)
