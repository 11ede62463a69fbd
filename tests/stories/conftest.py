"""Where the story suites run (story_suites.StoryPlace): the machine's Redis under this
test's namespace, whose keys each story deletes, and the in-memory index unless the
test is marked ``real_index`` or run under ``--real-index``."""

from __future__ import annotations

import pytest
from story_suites import StoryPlace
from support import REDIS_URL, blas_threads, wants_real_index

from sleepmem.core.settings import Settings
from sleepmem.pipelines.ports import Embedder


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default embedder, loaded once per test process for every story suite."""
    from sleepmem.adapters.embedders import UsemEmbedder

    return UsemEmbedder(threads=blas_threads())


@pytest.fixture
def place(request: pytest.FixtureRequest, namespace: str) -> StoryPlace:
    settings = Settings(redis_url=REDIS_URL, namespace=namespace,
                        _env_file=None)  # type: ignore[call-arg]
    return StoryPlace(settings=settings, real_index=wants_real_index(request))
