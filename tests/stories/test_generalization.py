"""The generalisation suite: stories of every public kind in words the project never saw.

tests/generalization/ holds at least five stories per kind of ../shared/scenarios
(the file prefix is the number of the public story they vary: 01 residence update …
19 conflict set; 20 is our own kind, clean statements), written in other words: English
and Chinese, other syntax and vocabulary, several facts in one message, typos, the change
stated first or last. One memory decision must not depend on one wording, so the suite as
a whole must pass at the floor; the per-kind breakdown is printed with the result.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from story_suites import StoryPlace, check_floor, run_stories

from sleepmem.pipelines.ports import Embedder

SUITE = Path(__file__).parent.parent / "generalization"
STORIES = sorted(SUITE.glob("*.toml"))
FLOOR = 0.95


def test_the_suite_has_at_least_five_stories_of_every_kind() -> None:
    kinds: dict[str, int] = defaultdict(int)
    for p in STORIES:
        kinds[p.name[:2]] += 1
    assert set(kinds) >= {f"{n:02d}" for n in range(1, 20)}, sorted(kinds)
    assert min(kinds.values()) >= 5, dict(kinds)


# Before the issue-10 work: 75/110 (68.2%); with the fail-safe extractor and the semantic
# resolver: 97/110 (88.2%); with changes judged by what they are about (time shifts,
# feedback, the value named or related in meaning), tool fields named in the user's words
# and forget requests naming a whole topic: 109/110, and 124/125 with 15 more stories of
# those kinds. Still failing: 12a, a ranking tie between dense and lexical (retrieval).
# 2026-12-04: 155/156 with 27 more, among them feedback that disputes a fact without a
# correction marker (14m, 14q, 14r failed before negative feedback became a correction).
@pytest.mark.slow
@pytest.mark.timeout(1800)  # 156 stories, each on a fresh instance (story_suites.py)
def test_the_generalisation_suite_passes_at_the_floor(
    embedder: Embedder, place: StoryPlace
) -> None:
    run = run_stories(STORIES, embedder, lambda path: [path.name[:2]], place=place)
    check_floor(run, "generalisation suite", FLOOR)
