"""The held-out batches: 90 stories of the public kinds that helpers wrote in words this
project had not seen (tests/heldout/README.md says how). ``f`` stories were used to find
what fails, ``g`` and ``h`` stories were held out while the code changed.

On the code before they were written (5dafeab): f 10/30, g 9/30. With the mechanisms the
f batch showed missing (81c39a3): f 16/30, g 9/30, the same nine g stories: what was fixed
from one batch did not carry to the other, which is what this suite is for. With a tool
field met clause by clause (2026-12-08): f 17/30, g 9/30; with a contrast that names the
one episode of the speaker's that says what it denies: f 18/30, g 10/30 (g07, the first g
story a change made from batch f passes). Batch h (2026-12-08, 26c0ea0, never read):
16/30, so 44/90 in all. The floor is
what the code passes now, not the goal (0.95): raise it as the code passes more; never
lower it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from story_suites import StoryPlace, check_floor, run_stories

from sleepmem.pipelines.ports import Embedder

SUITE = Path(__file__).parent.parent / "heldout"
STORIES = sorted(SUITE.glob("[fgh]*.toml"))
FLOOR = 0.48


def test_the_batches_hold_every_language_and_mechanism_they_name() -> None:
    parts = [p.stem.split("-") for p in STORIES]
    assert len(STORIES) == 90
    assert {name[0] for name, *_ in parts} == {"f", "g", "h"}
    assert {lang for _, lang, *_ in parts} == {"en", "zh", "mix"}
    assert len({kind for _, _, kind, *_ in parts}) >= 8


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_held_out_batches_pass_at_the_floor(embedder: Embedder, place: StoryPlace) -> None:
    def groups(path: Path) -> list[str]:
        batch, lang, kind, *_ = path.stem.split("-")
        return [f"batch:{batch[0]}", f"lang:{lang}", f"kind:{kind}"]

    run = run_stories(STORIES, embedder, groups, place=place)
    check_floor(run, "held-out batches", FLOOR, width=400)
